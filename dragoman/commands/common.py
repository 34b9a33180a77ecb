"""Arguments several commands share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from dragoman.dag.model import Dag
    from dragoman.dag.options import BuildOptions
    from dragoman.runtime.server_config import ServerConfig
    from dragoman.security.files import TlsFiles
    from dragoman.sources.manifests import LoadResult
    from dragoman.store import Store

DEFAULT_XDS_ADDRESS = "127.0.0.1:18000"


def manifest_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: not a directory")
    return path


def add_manifest_inputs(parser: argparse.ArgumentParser) -> None:
    """Manifests as files, directories or `-` (standard input), or `--manifests DIR`."""
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="manifest files and directories; - reads standard input",
    )
    parser.add_argument("--manifests", type=manifest_dir, metavar="DIR")


def manifest_inputs_problem(args: argparse.Namespace) -> str | None:
    """Why the manifests named on the command line cannot be read (a usage error), if so."""
    if args.manifests is None and not args.paths:
        return (
            "name manifest files or directories (PATH, or - for standard input), or --manifests DIR"
        )
    if args.paths.count("-") > 1:
        return "- (standard input) given more than once"
    return None


def load_manifests(
    args: argparse.Namespace, stdin: BinaryIO | None = None, *, unread_fields: bool = False
) -> LoadResult:
    """The objects of the manifests named on the command line (`-`: `stdin`, by default the
    process's standard input); `unread_fields`: with warnings for the spec fields parsers
    never read. Raises OSError when a directory itself cannot be read."""
    from dragoman.sources.manifests import ManifestDirectory
    from dragoman.sources.paths import load_paths

    named: list[str] = getattr(args, "paths", [])
    if args.manifests is not None and not named:
        return ManifestDirectory(args.manifests, unread_fields=unread_fields).load()
    paths = [*([str(args.manifests)] if args.manifests is not None else []), *named]
    stream = stdin if stdin is not None else sys.stdin.buffer
    return load_paths(paths, stream, unread_fields=unread_fields)


def host_port(value: str) -> str:
    """`HOST:PORT` (IPv6 as `[addr]:port`), checked: a typo must not listen somewhere else."""
    from dragoman.envoy.bootstrap.envoy_bootstrap import split_host_port

    try:
        split_host_port(value, default_port=None)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def ops_address(value: str) -> str:
    """`HOST:PORT` of the operations HTTP server (port 0: any free port), or "off"."""
    if value == "off":
        return value
    from dragoman.runtime.ops_server import split_address

    try:
        split_address(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def gateway_address(value: str) -> str:
    """An IP address or a DNS hostname, as Gateway status.addresses holds them."""
    import ipaddress
    import re

    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    if len(value) > 253 or not re.fullmatch(rf"{label}(\.{label})*", value):
        raise argparse.ArgumentTypeError(
            f"expected an IP address or a lowercase DNS hostname, such as 203.0.113.10 or "
            f"gateway.example.com, got {value!r}"
        )
    return value


def namespaced_name(value: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` of an object."""
    import re

    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    if not re.fullmatch(rf"{label}/{label}(\.{label})*", value):
        raise argparse.ArgumentTypeError(
            f"expected NAMESPACE/NAME, such as dragoman-system/envoy, got {value!r}"
        )
    namespace, name = value.split("/")
    return namespace, name


def dns_server(value: str) -> str:
    """A DNS server: an IP address, with an optional port (53 by default)."""
    import ipaddress

    from dragoman.envoy.bootstrap.envoy_bootstrap import DNS_PORT, split_host_port

    try:
        host, _ = split_host_port(value, default_port=DNS_PORT)
        ipaddress.ip_address(host)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an IP address with an optional port, such as 10.0.0.10:53, got {value!r}"
        ) from None
    return value


def xds_cluster_name(value: str) -> str:
    """The name of a bootstrap's cluster for dragoman."""
    from dragoman.envoy.bootstrap.envoy_bootstrap import xds_cluster_name_problem

    problem = xds_cluster_name_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"a cluster name {problem}, got {value!r}")
    return value


def gateway_ref(value: str) -> str:
    """`NAMESPACE/NAME` of a Gateway, or "" for every Gateway."""
    import re

    if value == "":
        return value
    label = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    if not re.fullmatch(rf"{label}/{label}(\.{label})*", value):
        raise argparse.ArgumentTypeError(
            f"expected NAMESPACE/NAME of a Gateway, such as default/demo, got {value!r}"
        )
    return value


def add_logging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity (default: info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text (default), or json: one object per line (time, level, logger, message, "
        "object, node)",
    )


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="server configuration (YAML): ExternalName policy, DNS check, DNS defaults, "
        "system CA bundle; see README.md",
    )


def server_config(args: argparse.Namespace) -> ServerConfig | None:
    """The --config file read and checked, the defaults without one; None (after printing
    every problem) when the file is wrong: the command must stop."""
    from dragoman.runtime.server_config import DEFAULT_CONFIG, ConfigError, load_config

    path = getattr(args, "config", None)
    if path is None:
        return DEFAULT_CONFIG
    try:
        return load_config(path)
    except ConfigError as error:
        print(f"error: bad configuration file\n{error}", file=sys.stderr)
        return None


def loaded_store(directory: Path) -> Store:
    """A manifest directory's objects, each error printed to standard error."""
    from dragoman.sources.manifests import ManifestDirectory

    return _store_printing_errors(ManifestDirectory(directory).load())


def named_store(args: argparse.Namespace) -> Store:
    """The objects of the manifests named on the command line, each error printed to
    standard error. Raises OSError when a directory itself cannot be read."""
    return _store_printing_errors(load_manifests(args))


def _store_printing_errors(result: LoadResult) -> Store:
    from dragoman.store import Store

    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    return Store.from_objects(result.objects)


def checked_build(store: Store, options: BuildOptions, config: ServerConfig) -> Dag:
    """A build, with the DNS check's observations when the configuration turns it on (the
    names are resolved once, here)."""
    import asyncio

    from dragoman.dag.build import build
    from dragoman.runtime.dns_checker import DnsChecker

    dag = build(store, options)
    if not config.dns_check.enabled or not dag.dns_hostnames:
        return dag
    checker = DnsChecker(config.dns_check, policy=options.external_names)
    asyncio.run(checker.check(dag.dns_hostnames))
    return build(store, options, checker.observations)


def add_xds_server_tls(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group(
        "xDS security (mutual TLS; without it, plaintext on a loopback address only)"
    )
    tls.add_argument("--xds-tls-cert", type=Path, metavar="FILE", help="server certificate (PEM)")
    tls.add_argument("--xds-tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    tls.add_argument(
        "--xds-tls-client-ca",
        type=Path,
        metavar="FILE",
        help="CA that signs client certificates (PEM); clients without one are refused",
    )
    tls.add_argument(
        "--xds-insecure",
        action="store_true",
        help="allow plaintext xDS on an address other than loopback (anyone who can connect "
        "receives every private key served)",
    )


def xds_server_tls(args: argparse.Namespace) -> TlsFiles | None:
    """The server's TLS files, read and checked; None without the flags.

    Raises TlsFileError naming the file with a problem, or the flag missing.
    """
    from dragoman.security.files import TlsFileError, TlsFiles, load_material

    given = {
        "--xds-tls-cert": args.xds_tls_cert,
        "--xds-tls-key": args.xds_tls_key,
        "--xds-tls-client-ca": args.xds_tls_client_ca,
    }
    if not any(given.values()):
        return None
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        raise TlsFileError(
            f"mutual TLS needs --xds-tls-cert, --xds-tls-key and --xds-tls-client-ca; "
            f"missing {', '.join(missing)}"
        )
    files = TlsFiles(args.xds_tls_cert, args.xds_tls_key, args.xds_tls_client_ca)
    load_material(files)
    return files


def add_xds_client_tls(parser: argparse.ArgumentParser) -> None:
    tls = parser.add_argument_group("xDS security (mutual TLS to dragoman)")
    tls.add_argument(
        "--xds-tls-ca", type=Path, metavar="FILE", help="CA that signed dragoman's certificate"
    )
    tls.add_argument(
        "--xds-tls-cert", type=Path, metavar="FILE", help="this client's certificate (PEM)"
    )
    tls.add_argument("--xds-tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    tls.add_argument(
        "--xds-server-name",
        metavar="NAME",
        help="name dragoman's certificate must carry (default: the host of --xds-address)",
    )


def xds_client_tls(args: argparse.Namespace) -> TlsFiles | None:
    """The client's TLS files; None without the flags. Raises TlsFileError if incomplete."""
    from dragoman.security.files import TlsFileError, TlsFiles

    given = {
        "--xds-tls-ca": args.xds_tls_ca,
        "--xds-tls-cert": args.xds_tls_cert,
        "--xds-tls-key": args.xds_tls_key,
    }
    if not any(given.values()):
        if args.xds_server_name:
            raise TlsFileError(
                "--xds-server-name needs --xds-tls-ca, --xds-tls-cert, --xds-tls-key"
            )
        return None
    missing = [flag for flag, value in given.items() if value is None]
    if missing:
        raise TlsFileError(
            f"mutual TLS needs --xds-tls-ca, --xds-tls-cert and --xds-tls-key; "
            f"missing {', '.join(missing)}"
        )
    return TlsFiles(args.xds_tls_cert, args.xds_tls_key, args.xds_tls_ca)
