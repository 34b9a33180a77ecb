"""The `dragoman` command: parses arguments and hands over to one of dragoman.commands."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dragoman.commands import (
    bootstrap,
    certgen,
    check,
    clients,
    config,
    demo,
    drain,
    provision,
    render,
    serve,
    status,
)

# Each module adds its subparser and sets `run`; the order is the order of `--help`.
COMMANDS = (
    serve,
    render,
    check,
    bootstrap,
    certgen,
    drain,
    provision,
    demo,
    clients,
    config,
    status,
)


class _Version(argparse.Action):
    """argparse's "version" action, reading the version only when asked for it."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        import dragoman

        print(f"dragoman {dragoman.__version__}")  # on stdout, as argparse's own action
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dragoman",
        description="An Envoy xDS control plane for Kubernetes Services and Gateway API routes.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from dragoman.runtime.logs import setup_logging

    args = _parser().parse_args(argv)
    setup_logging(getattr(args, "log_level", "warning"), getattr(args, "log_format", "text"))
    return int(args.run(args))
