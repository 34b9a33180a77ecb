"""`dragoman bootstrap`: print an Envoy bootstrap that connects to dragoman."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.commands.common import (
    DEFAULT_XDS_ADDRESS,
    add_xds_client_tls,
    dns_server,
    gateway_ref,
    host_port,
    xds_client_tls,
    xds_cluster_name,
)

if TYPE_CHECKING:
    from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("bootstrap", help="print an Envoy bootstrap that connects here")
    parser.add_argument(
        "--xds-address", type=host_port, default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT"
    )
    parser.add_argument(
        "--gateway",
        type=gateway_ref,
        default="",
        metavar="NS/NAME",
        help="serve this Envoy only that Gateway's listeners (default: every Gateway)",
    )
    parser.add_argument("--node-id", default="envoy", help="Envoy node id (default: envoy)")
    parser.add_argument(
        "--admin-socket",
        default="/tmp/dragoman-envoy-admin.sock",
        metavar="PATH",
        help="unix socket for Envoy's admin interface (never a TCP port a route could reach)",
    )
    parser.add_argument(
        "--envoy-stats-address",
        type=host_port,
        metavar="HOST:PORT",
        help="a listener exposing only Envoy's /stats/prometheus and /ready (for Prometheus "
        "and probes); the admin interface stays on its unix socket",
    )
    parser.add_argument(
        "--dns-resolver",
        type=dns_server,
        action="append",
        default=[],
        metavar="IP[:PORT]",
        help="DNS server Envoy resolves ExternalName hosts with (repeatable; default: system)",
    )
    parser.add_argument(
        "--dns-tcp", action="store_true", help="resolve over TCP (with --dns-resolver)"
    )
    parser.add_argument(
        "--xds-transport",
        choices=["ads", "per-type"],
        default="ads",
        help="one ADS stream for every type, or a stream per type (default: ads)",
    )
    parser.add_argument(
        "--xds-cluster-name",
        type=xds_cluster_name,
        default="dragoman-xds",
        metavar="NAME",
        help="the name of the bootstrap's cluster for dragoman; give serve the same "
        "--xds-cluster-name (default: dragoman-xds)",
    )
    parser.add_argument(
        "--delta",
        action="store_true",
        help="incremental (delta) xDS instead of state of the world",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive_int,
        default=50_000,
        metavar="N",
        help="most downstream connections Envoy accepts on all its listeners together "
        "(default: 50000)",
    )
    add_xds_client_tls(parser)
    parser.add_argument(
        "--xds-tls-sds-dir",
        metavar="DIR",
        help="deliver the --xds-tls-* files to Envoy by file-based SDS from DIR (a path on "
        "Envoy's machine), so that Envoy re-reads them when they rotate; writes the two SDS "
        "files there, or to --sds-files-out (without it, Envoy reads the files once, at start)",
    )
    parser.add_argument(
        "--sds-files-out",
        type=Path,
        metavar="DIR",
        help="write the SDS files here instead of --xds-tls-sds-dir (a ConfigMap, an image)",
    )
    parser.set_defaults(run=run)


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def run(args: argparse.Namespace) -> int:
    from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, bootstrap_yaml
    from dragoman.security.files import TlsFileError

    try:
        files = xds_client_tls(args)
    except TlsFileError as error:
        print(f"dragoman bootstrap: {error}", file=sys.stderr)
        return 2
    if files is None and (args.xds_tls_sds_dir or args.sds_files_out):
        print("dragoman bootstrap: --xds-tls-sds-dir needs the --xds-tls-* files", file=sys.stderr)
        return 2
    if args.sds_files_out and not args.xds_tls_sds_dir:
        print("dragoman bootstrap: --sds-files-out needs --xds-tls-sds-dir", file=sys.stderr)
        return 2
    tls = None
    if files is not None:
        # Paths as given: they name files on Envoy's machine (a mounted Secret, say).
        tls = XdsClientTls(
            trusted_ca=str(files.trusted_ca),
            certificate=str(files.certificate),
            private_key=str(files.private_key),
            server_name=args.xds_server_name or "",
            sds_directory=args.xds_tls_sds_dir or "",
        )
        if tls.sds_directory:
            try:
                _write_sds_files(tls, args.sds_files_out or Path(tls.sds_directory))
            except OSError as error:
                print(f"dragoman bootstrap: {error}", file=sys.stderr)
                return 1
    sys.stdout.write(
        bootstrap_yaml(
            args.xds_address,
            node_id=args.node_id,
            node_cluster=args.gateway or "dragoman",
            admin_socket=args.admin_socket,
            dns_resolvers=args.dns_resolver,
            dns_use_tcp=args.dns_tcp,
            xds_transport=args.xds_transport,
            delta=args.delta,
            xds_cluster_name=args.xds_cluster_name,
            max_downstream_connections=args.max_connections,
            xds_tls=tls,
            stats_address=args.envoy_stats_address,
        )
    )
    return 0


def _write_sds_files(tls: XdsClientTls, directory: Path) -> None:
    """Each file written whole, then renamed into place: Envoy never reads half of one."""
    from dragoman.envoy.bootstrap.envoy_bootstrap import xds_tls_secret_files

    directory.mkdir(parents=True, exist_ok=True)
    for name, text in xds_tls_secret_files(tls).items():
        staged = directory / f".{name}.tmp"
        staged.write_text(text)
        staged.replace(directory / name)
