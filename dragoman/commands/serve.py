"""`dragoman serve`: serve a manifest directory, or a Kubernetes cluster, over xDS."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from dragoman.commands.certgen import renewal_threshold
from dragoman.commands.common import (
    DEFAULT_XDS_ADDRESS,
    add_config,
    add_logging,
    add_xds_server_tls,
    gateway_address,
    host_port,
    manifest_dir,
    namespaced_name,
    ops_address,
    server_config,
    xds_cluster_name,
    xds_server_tls,
)

if TYPE_CHECKING:
    from dragoman.dag.options import BuildOptions
    from dragoman.envoy.translate_options import TranslateOptions
    from dragoman.provisioning.workload import ProvisionSettings
    from dragoman.runtime.server_config import ServerConfig
    from dragoman.sources.parse_worker import ParseWorker
    from dragoman.xds.server.limits import XdsLimits

DEFAULT_METRICS_ADDRESS = "127.0.0.1:8002"
DEFAULT_LEASE_NAME = "dragoman-leader"


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve", help="serve a manifest directory or a Kubernetes cluster over xDS"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifests", type=manifest_dir, metavar="DIR")
    source.add_argument(
        "--kubernetes",
        action="store_true",
        help="list and watch the Kubernetes API server (in-cluster, or --kubeconfig)",
    )
    parser.add_argument(
        "--xds-address", type=host_port, default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT"
    )
    parser.add_argument(
        "--xds-cluster-name",
        type=xds_cluster_name,
        default="dragoman-xds",
        metavar="NAME",
        help="the name per-type clients' bootstraps give their cluster for dragoman; the EDS "
        "and RDS config sources they are served name it (default: dragoman-xds)",
    )
    parser.add_argument(
        "--listener-address",
        default="0.0.0.0",
        metavar="IP",
        help="address Envoy binds Gateway listeners to (default: 0.0.0.0)",
    )
    parser.add_argument(
        "--metrics-address",
        type=ops_address,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="HOST:PORT",
        help=f"HTTP /metrics, /healthz, /readyz and /debug (default: {DEFAULT_METRICS_ADDRESS}; "
        "port 0 picks a free port; 'off' for none)",
    )
    parser.add_argument(
        "--debug-remote",
        action="store_true",
        help="answer /debug pages to peers off loopback too (by default only loopback peers, "
        "such as kubectl port-forward, see them)",
    )
    parser.add_argument(
        "--gateway-address",
        action="append",
        dest="gateway_addresses",
        type=gateway_address,
        metavar="IP_OR_HOSTNAME",
        help="where clients reach the Gateways, written to their status.addresses; repeat "
        "for several",
    )
    _add_xds_limit_arguments(parser)
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="keep what is served here (the last good version of each manifest file, the "
        "DNS check's answers), so a restart serves it while a file stays broken or DNS is "
        "down (default: nowhere)",
    )
    add_xds_server_tls(parser)
    add_config(parser)
    _add_kubernetes_arguments(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def _add_xds_limit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--xds-max-connection-age",
        type=duration,
        default=30 * 60.0,
        metavar="DURATION",
        help="close each xDS connection after this age (up to 10%% more, at random), so that "
        "clients spread over replicas that came up later; its streams get 10 s to end "
        "(default: 30m; 0: never)",
    )
    parser.add_argument(
        "--xds-stall-timeout",
        type=duration,
        default=120.0,
        metavar="DURATION",
        help="close an xDS stream whose client has read nothing for this long (default: 2m)",
    )
    parser.add_argument(
        "--xds-max-connections",
        type=connection_count,
        default=5000,
        metavar="N",
        help="xDS connections open at once, in their handshakes or not; more are closed as "
        "soon as accepted (default: 5000; 0: no bound)",
    )


def _add_kubernetes_arguments(parser: argparse.ArgumentParser) -> None:
    kube = parser.add_argument_group("with --kubernetes")
    kube.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="kubeconfig to use (default: in-cluster service account, else $KUBECONFIG or "
        "~/.kube/config)",
    )
    kube.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    kube.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="watch namespaced objects in NS only; repeat for several (default: all namespaces)",
    )
    kube.add_argument(
        "--gateway-class",
        metavar="NAME",
        help="serve only Gateways of this GatewayClass (default: every GatewayClass whose "
        "controllerName is dragoman's)",
    )
    kube.add_argument(
        "--controller-name",
        metavar="NAME",
        help="the GatewayClass controllerName that means dragoman "
        "(default: dragoman.dev/gateway-controller)",
    )
    kube.add_argument(
        "--envoy-service",
        type=namespaced_name,
        metavar="NS/NAME",
        help="the Service in front of Envoy: its status.loadBalancer.ingress addresses become "
        "the Gateways' status.addresses (followed as they change)",
    )
    _add_provision_arguments(kube)
    kube.add_argument(
        "--no-leader-election",
        dest="leader_election",
        action="store_false",
        help="never write status (every replica serves xDS either way)",
    )
    kube.add_argument(
        "--leader-election-namespace",
        metavar="NS",
        help="namespace of the leader-election Lease (default: the pod's namespace)",
    )
    kube.add_argument(
        "--leader-election-name",
        default=DEFAULT_LEASE_NAME,
        metavar="NAME",
        help=f"name of the Lease (default: {DEFAULT_LEASE_NAME})",
    )
    kube.add_argument(
        "--leader-election-identity",
        metavar="ID",
        help="holder identity (default: $POD_NAME, else hostname_pid)",
    )
    kube.add_argument("--lease-duration", type=float, default=15.0, metavar="SECONDS")
    kube.add_argument("--renew-deadline", type=float, default=10.0, metavar="SECONDS")
    kube.add_argument("--retry-period", type=float, default=2.0, metavar="SECONDS")


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _add_provision_arguments(kube: argparse._ArgumentGroup) -> None:
    kube.add_argument(
        "--provision",
        action="store_true",
        help="give each accepted Gateway its own Envoy Deployment, Service, ServiceAccount, "
        "PodDisruptionBudget and bootstrap (the leader creates them; see `dragoman provision`)",
    )
    kube.add_argument(
        "--provision-xds-address",
        type=host_port,
        metavar="HOST:PORT",
        help="where provisioned Envoys reach dragoman "
        "(default: dragoman.dragoman-system.svc.cluster.local:18000)",
    )
    kube.add_argument(
        "--provision-drain-image",
        metavar="IMAGE",
        help="dragoman's image, for the provisioned Envoys' drain container",
    )
    kube.add_argument(
        "--provision-ca-secret",
        type=namespaced_name,
        metavar="NS/NAME",
        help="a kubernetes.io/tls Secret holding the xDS CA and its key (certgen's "
        "dragoman-system/dragoman-xds-ca): dragoman issues and renews each provisioned "
        "Gateway's xDS client certificate with it (default: the Secret is yours to provide)",
    )
    kube.add_argument(
        "--provision-renew-before",
        type=renewal_threshold,
        metavar="DURATION",
        help="issue a Gateway's xDS certificate again when it expires within DURATION "
        "(`30d`, `720h`; default: 30d; they are issued for 90 days)",
    )


def duration(text: str) -> float:
    """Seconds from "90s", "30m", "1h", "500ms" or a plain number of seconds (at least 0)."""
    number, unit = text.strip(), "s"
    for suffix in sorted(_DURATION_UNITS, key=len, reverse=True):
        if number.endswith(suffix):
            number, unit = number[: -len(suffix)], suffix
            break
    try:
        seconds = float(number) * _DURATION_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration (e.g. 90s, 30m, 1h, or 0)"
        ) from None
    if not seconds >= 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is 0 or more, and finite")
    return seconds


def connection_count(text: str) -> int:
    """A number of connections: a whole number, 0 or more."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of connections is 0 or more")
    return count


def xds_limits(args: argparse.Namespace) -> XdsLimits:
    from dragoman.xds.server.limits import XdsLimits

    age = args.xds_max_connection_age
    return XdsLimits(
        max_connection_age_s=age if age > 0 else None,
        stall_timeout_s=args.xds_stall_timeout,
        max_connections=args.xds_max_connections or None,
    )


def run(args: argparse.Namespace) -> int:
    from dragoman.envoy.translate_options import TranslateOptions
    from dragoman.security.files import TlsFileError
    from dragoman.xds.server.grpc_server import is_loopback

    log = logging.getLogger("dragoman")
    config = server_config(args)
    if config is None:
        return 2
    try:
        args.xds_tls = xds_server_tls(args)
    except TlsFileError as error:
        log.error("xDS TLS: %s", error)
        return 2
    if args.xds_tls is None and not args.xds_insecure and not is_loopback(args.xds_address):
        log.error(
            "refusing to serve xDS in plaintext on %s: give --xds-tls-cert, --xds-tls-key and "
            "--xds-tls-client-ca (see `dragoman certgen`), or --xds-insecure if this is meant",
            args.xds_address,
        )
        return 2
    translate_options = config.translate_options(
        TranslateOptions(
            listener_address=args.listener_address, xds_cluster_name=args.xds_cluster_name
        )
    )
    build_options = dataclasses.replace(
        config.build_options(),
        gateway_addresses=tuple(dict.fromkeys(args.gateway_addresses or ())),
        address_service=args.envoy_service,
    )
    ops = None if args.metrics_address == "off" else args.metrics_address
    if args.kubernetes:
        return _run_kubernetes(args, config, build_options, translate_options, ops, log)
    if args.kubeconfig is not None or args.namespaces or args.context or args.envoy_service:
        log.error("--kubeconfig, --context, --namespace and --envoy-service need --kubernetes")
        return 2
    if args.provision:
        log.error("--provision needs --kubernetes (`dragoman provision` prints the objects)")
        return 2

    from dragoman.runtime.manifest_serving import ServeConfig, serve

    # A worker already parsing the directory, started from the command line (dragoman.cli).
    parse_worker: ParseWorker | None = getattr(args, "parse_worker", None)
    serve_config = ServeConfig(
        manifests=args.manifests,
        xds_address=args.xds_address,
        build_options=build_options,
        translate_options=translate_options,
        dns_check=config.dns_check,
        xds_tls=args.xds_tls,
        xds_insecure=args.xds_insecure,
        xds_limits=xds_limits(args),
        ops_address=ops,
        debug_remote=args.debug_remote,
        state_dir=args.state_dir,
    )
    try:
        asyncio.run(serve(serve_config, parse_worker))
    except OSError as error:
        log.error("%s", error)
        return 1
    return 0


def _run_kubernetes(
    args: argparse.Namespace,
    server: ServerConfig,
    build_options: BuildOptions,
    translate_options: TranslateOptions,
    ops: str | None,
    log: logging.Logger,
) -> int:
    from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
    from dragoman.kubernetes.client import ClientConfigError
    from dragoman.kubernetes.leader import LeaseSettings, default_identity, default_namespace
    from dragoman.kubernetes.runtime import KubernetesConfig, serve_kubernetes

    if args.provision and not args.leader_election:
        log.error("--provision needs leader election: only the leader provisions")
        return 2
    problem = _issuing_problem(args)
    if problem:
        log.error("%s", problem)
        return 2
    lease = None
    if args.leader_election:
        lease = LeaseSettings(
            identity=args.leader_election_identity or default_identity(),
            name=args.leader_election_name,
            namespace=args.leader_election_namespace or default_namespace(),
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
        problems = lease.problems()
        if problems:
            log.error("leader election: %s", "; ".join(problems))
            return 2
    config = KubernetesConfig(
        xds_address=args.xds_address,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(dict.fromkeys(args.namespaces or ())),
        ops_address=ops,
        debug_remote=args.debug_remote,
        controller_name=args.controller_name or DEFAULT_CONTROLLER_NAME,
        gateway_class=args.gateway_class,
        lease=lease,
        build_options=build_options,
        translate_options=translate_options,
        dns_check=server.dns_check,
        xds_tls=args.xds_tls,
        xds_insecure=args.xds_insecure,
        xds_limits=xds_limits(args),
        state_dir=args.state_dir,
        provision=_provision_settings(args),
    )
    try:
        asyncio.run(serve_kubernetes(config))
    except ClientConfigError as error:
        log.error("cannot reach Kubernetes: %s", error)
        return 1
    except OSError as error:
        log.error("%s", error)
        return 1
    return 0


def _provision_settings(args: argparse.Namespace) -> ProvisionSettings | None:
    from dragoman.provisioning.workload import ProvisionSettings as Settings

    if not args.provision:
        return None
    defaults = Settings()
    return Settings(
        xds_address=args.provision_xds_address or defaults.xds_address,
        drain_image=args.provision_drain_image or defaults.drain_image,
        ca_secret="/".join(args.provision_ca_secret or ()),
        renew_before=args.provision_renew_before or defaults.renew_before,
    )


def _issuing_problem(args: argparse.Namespace) -> str:
    """Why the flags of dragoman-issued Gateway certificates cannot work ("": they can)."""
    if args.provision_ca_secret is None and args.provision_renew_before is None:
        return ""  # (and cryptography stays unloaded)
    from dragoman.kubernetes.gateway_certificates import ISSUED_DAYS
    from dragoman.security.certgen import renewal_problem

    if not args.provision or args.provision_ca_secret is None:
        return "--provision-ca-secret and --provision-renew-before need --provision, and each other"
    if args.provision_renew_before is None:
        return ""
    problem = renewal_problem(args.provision_renew_before, ISSUED_DAYS)
    return (problem or "").replace("--renew-before", "--provision-renew-before")
