"""The `dragoman` command: parses arguments and hands over to one of dragoman.commands."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dragoman import __version__
from dragoman.commands import bootstrap, certgen, check, clients, demo, render, serve, status

# Each module adds its subparser and sets `run`; the order is the order of `--help`.
COMMANDS = (serve, render, check, bootstrap, certgen, demo, clients, status)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dragoman",
        description="An Envoy xDS control plane for Kubernetes Services and Gateway API routes.",
    )
    parser.add_argument("--version", action="version", version=f"dragoman {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from dragoman.runtime.logs import setup_logging

    args = _parser().parse_args(argv)
    setup_logging(getattr(args, "log_level", "warning"), getattr(args, "log_format", "text"))
    return int(args.run(args))
