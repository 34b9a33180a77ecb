"""The `dragoman` command: parses arguments and hands over to one of dragoman.commands."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from dragoman import __version__
from dragoman.commands import bootstrap, certgen, clients, demo, render, serve, status

# Each module adds its subparser and sets `run`; the order is the order of `--help`.
COMMANDS = (serve, render, bootstrap, certgen, demo, clients, status)


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


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _setup_logging(getattr(args, "log_level", "warning"))
    return int(args.run(args))
