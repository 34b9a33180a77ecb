"""`dragoman certgen`: a CA and the certificates of the xDS port, as files or Secrets."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

from dragoman.commands.common import gateway_ref


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "certgen",
        help="make a CA and mutual TLS certificates for the xDS port (files or Secrets)",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, metavar="DIR", help="write PEM files into DIR")
    target.add_argument(
        "--kubernetes",
        action="store_true",
        help="write kubernetes.io/tls Secrets (each with ca.crt) into --namespace",
    )
    parser.add_argument(
        "--server-name",
        action="append",
        dest="server_names",
        metavar="NAME",
        help="DNS name or IP address of dragoman's certificate (repeatable; default: "
        "dragoman, dragoman.dragoman-system.svc, localhost, 127.0.0.1)",
    )
    parser.add_argument(
        "--gateway",
        action="append",
        type=gateway_ref,
        default=[],
        metavar="NS/NAME",
        help="a certificate that may receive this Gateway only (repeatable)",
    )
    parser.add_argument(
        "--grpc-client",
        action="append",
        default=[],
        metavar="NAME",
        help="a certificate for a proxyless gRPC client (repeatable)",
    )
    parser.add_argument("--days", type=int, default=365, help="validity (default: 365)")
    parser.add_argument(
        "--renew-before",
        type=renewal_threshold,
        default=datetime.timedelta(days=30),
        metavar="DURATION",
        help="issue again what expires within DURATION (`30d`, `720h`; default: 30d); the CA "
        "at twice that, both CAs trusted meanwhile",
    )
    kube = parser.add_argument_group("with --kubernetes")
    kube.add_argument("--namespace", default="dragoman-system", metavar="NS")
    kube.add_argument("--kubeconfig", type=Path, metavar="FILE")
    kube.add_argument("--context", metavar="NAME")
    parser.set_defaults(run=run)


_DAYS = re.compile(r"([0-9]{1,5})d")


def renewal_threshold(value: str) -> datetime.timedelta:
    """`30d`, or a duration as the Gateway API writes them (`720h`, `1h30m`)."""
    from dragoman.objects.durations import parse_duration

    days = _DAYS.fullmatch(value.strip())
    seconds = int(days.group(1)) * 86400.0 if days else parse_duration(value)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a duration such as 30d or 720h")
    return datetime.timedelta(seconds=seconds)


def run(args: argparse.Namespace) -> int:
    from dragoman.security.certgen import DEFAULT_SERVER_NAMES, renewal_problem

    if args.days < 1:
        print("dragoman certgen: --days must be at least 1", file=sys.stderr)
        return 2
    problem = renewal_problem(args.renew_before, args.days)
    if problem is not None:
        print(f"dragoman certgen: {problem}", file=sys.stderr)
        return 2
    if "" in args.gateway:
        print("dragoman certgen: --gateway needs NAMESPACE/NAME", file=sys.stderr)
        return 2
    names = tuple(args.server_names or DEFAULT_SERVER_NAMES)
    try:
        written = _write(args, names)
    except (OSError, ValueError) as error:
        print(f"dragoman certgen: {error}", file=sys.stderr)
        return 1
    for name, action in written:
        print(f"{action:8} {name}")
    return 0


def _write(args: argparse.Namespace, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Raises ValueError (with a message to show) when the Secrets cannot be written."""
    if not args.kubernetes:
        from dragoman.security.files_store import write_files

        return write_files(
            args.out,
            server_names=names,
            gateways=args.gateway,
            grpc_clients=args.grpc_client,
            days=args.days,
            renew_before=args.renew_before,
        )
    from kubernetes.client.exceptions import ApiException

    from dragoman.kubernetes.certificate_secrets import write_secrets
    from dragoman.kubernetes.client import ClientConfigError

    try:
        return write_secrets(
            args.namespace,
            server_names=names,
            gateways=args.gateway,
            grpc_clients=args.grpc_client,
            days=args.days,
            renew_before=args.renew_before,
            kubeconfig=args.kubeconfig,
            context=args.context,
        )
    except ClientConfigError as error:
        raise ValueError(f"cannot reach Kubernetes: {error}") from None
    except ApiException as error:
        raise ValueError(
            f"writing Secrets in namespace {args.namespace}: {error.status} {error.reason}"
        ) from None
