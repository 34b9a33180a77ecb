"""`dragoman demo`: dragoman, a real Envoy and sample backends on this machine."""

from __future__ import annotations

import argparse

from dragoman.commands.common import add_logging, manifest_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo", help="run dragoman, a real Envoy and sample backends on this machine"
    )
    parser.add_argument(
        "--manifests",
        type=manifest_dir,
        default=None,
        metavar="DIR",
        help="demo manifests (default: the bundled examples)",
    )
    parser.add_argument(
        "--check", action="store_true", help="send the demo requests, report, and exit"
    )
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.demo.run import run_demo

    return run_demo(manifests=args.manifests, check_only=args.check)
