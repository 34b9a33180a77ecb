"""`dragoman clients`: which xDS clients are connected, and what they ACKed or NACKed (CSDS)."""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import (
    DEFAULT_XDS_ADDRESS,
    add_xds_client_tls,
    host_port,
    xds_client_tls,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "clients", help="show connected xDS clients: versions ACKed, NACKs and their errors"
    )
    parser.add_argument(
        "--xds-address", type=host_port, default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT"
    )
    parser.add_argument(
        "--resources", action="store_true", help="one row per resource instead of per type"
    )
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="default: 5")
    add_xds_client_tls(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import grpc

    from dragoman.security.files import TlsFileError
    from dragoman.xds.csds.csds_client import client_rows, fetch_client_status, format_table

    try:
        response = fetch_client_status(
            args.xds_address,
            timeout=args.timeout,
            tls=xds_client_tls(args),
            server_name=args.xds_server_name or "",
        )
    except TlsFileError as error:
        print(f"dragoman clients: {error}", file=sys.stderr)
        return 2
    except grpc.RpcError as error:
        report_rpc_error("clients", args, error)
        return 1
    rows = client_rows(response, per_resource=args.resources)
    if not rows:
        print(f"no xDS clients connected to {args.xds_address}")
        return 0
    sys.stdout.write(format_table(rows, per_resource=args.resources))
    return 0


def report_rpc_error(command: str, args: argparse.Namespace, error: Exception) -> None:
    """Why CSDS gave no answer, on standard error (`error` a grpc.RpcError)."""
    import grpc

    code = error.code() if isinstance(error, grpc.Call) else None
    detail = error.details() if isinstance(error, grpc.Call) else str(error)
    print(
        f"dragoman {command}: cannot get client status from {args.xds_address}: "
        f"{code.name if code else 'error'}: {detail}",
        file=sys.stderr,
    )
    if code is grpc.StatusCode.UNAVAILABLE and args.xds_tls_ca is None:
        # A plaintext client never completes a mutual TLS server's handshake.
        print(
            f"dragoman {command}: if dragoman serves mutual TLS, give --xds-tls-ca, "
            "--xds-tls-cert and --xds-tls-key (the admin certificate)",
            file=sys.stderr,
        )
