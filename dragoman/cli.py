"""The `dragoman` command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from dragoman import __version__

DEFAULT_XDS_ADDRESS = "127.0.0.1:18000"


def _add_logging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity (default: info)",
    )


def _manifest_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: not a directory")
    return path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dragoman",
        description="An Envoy xDS control plane for Kubernetes Services and Gateway API routes.",
    )
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve a manifest directory over xDS")
    serve.add_argument("--manifests", type=_manifest_dir, required=True, metavar="DIR")
    serve.add_argument("--xds-address", default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT")
    serve.add_argument(
        "--listener-address",
        default="0.0.0.0",
        metavar="IP",
        help="address Envoy binds Gateway listeners to (default: 0.0.0.0)",
    )
    _add_logging(serve)

    render = commands.add_parser(
        "render", help="print the Envoy resources a manifest directory becomes"
    )
    render.add_argument("--manifests", type=_manifest_dir, required=True, metavar="DIR")
    render.add_argument("--listener-address", default="0.0.0.0", metavar="IP")
    _add_logging(render)

    boot = commands.add_parser("bootstrap", help="print an Envoy bootstrap that connects here")
    boot.add_argument("--xds-address", default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT")
    boot.add_argument(
        "--gateway",
        default="",
        metavar="NS/NAME",
        help="serve this Envoy only that Gateway's listeners (default: every Gateway)",
    )
    boot.add_argument("--node-id", default="envoy", help="Envoy node id (default: envoy)")
    boot.add_argument(
        "--admin-socket",
        default="/tmp/dragoman-envoy-admin.sock",
        metavar="PATH",
        help="unix socket for Envoy's admin interface (never a TCP port a route could reach)",
    )
    boot.add_argument(
        "--dns-resolver",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="DNS server Envoy resolves ExternalName hosts with (repeatable; default: system)",
    )
    boot.add_argument(
        "--dns-tcp", action="store_true", help="resolve over TCP (with --dns-resolver)"
    )

    demo = commands.add_parser(
        "demo", help="run dragoman, a real Envoy and sample backends on this machine"
    )
    demo.add_argument(
        "--manifests",
        type=_manifest_dir,
        default=None,
        metavar="DIR",
        help="demo manifests (default: the bundled examples)",
    )
    demo.add_argument(
        "--check", action="store_true", help="send the demo requests, report, and exit"
    )
    _add_logging(demo)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if hasattr(args, "log_level"):
        _setup_logging(args.log_level)
    if args.command == "serve":
        return _serve(args)
    if args.command == "render":
        return _render(args)
    if args.command == "bootstrap":
        return _bootstrap(args)
    if args.command == "demo":
        from dragoman.demo.run import run_demo

        return run_demo(manifests=args.manifests, check_only=args.check)
    raise AssertionError(args.command)


def _serve(args: argparse.Namespace) -> int:
    from dragoman.envoy.options import TranslateOptions
    from dragoman.serve import ServeConfig, serve

    config = ServeConfig(
        manifests=args.manifests,
        xds_address=args.xds_address,
        translate_options=TranslateOptions(listener_address=args.listener_address),
    )
    try:
        asyncio.run(serve(config))
    except OSError as error:
        logging.getLogger("dragoman").error("%s", error)
        return 1
    return 0


def _render(args: argparse.Namespace) -> int:
    from dragoman.dag.build import build
    from dragoman.envoy.options import TranslateOptions
    from dragoman.envoy.render import render_yaml
    from dragoman.envoy.translate import translate
    from dragoman.sources.manifests import ManifestDirectory

    result = ManifestDirectory(args.manifests).load()
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    dag = build(result.store())
    for problem in dag.problems:
        print(f"problem: {problem}", file=sys.stderr)
    snapshots = translate(dag, TranslateOptions(listener_address=args.listener_address))
    sys.stdout.write(render_yaml(snapshots))
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    from dragoman.envoy.bootstrap import bootstrap_yaml

    sys.stdout.write(
        bootstrap_yaml(
            args.xds_address,
            node_id=args.node_id,
            node_cluster=args.gateway or "dragoman",
            admin_socket=args.admin_socket,
            dns_resolvers=args.dns_resolver,
            dns_use_tcp=args.dns_tcp,
        )
    )
    return 0
