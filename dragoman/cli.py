"""The `dragoman` command: parses arguments and hands over to one of dragoman.commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType


def _commands() -> tuple[ModuleType, ...]:
    """Each module adds its subparser and sets `run`; the order is the order of `--help`.
    Imported when the parser is made: `serve` starts its parse worker before."""
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

    return (
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
    for command in _commands():
        command.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from dragoman.commands.early_start import first_load_worker

    words = sys.argv[1:] if argv is None else list(argv)
    parse_worker = first_load_worker(words)
    try:
        from dragoman.runtime.logs import setup_logging

        args = _parser().parse_args(words)
        args.parse_worker = parse_worker
        setup_logging(getattr(args, "log_level", "warning"), getattr(args, "log_format", "text"))
        return int(args.run(args))
    finally:
        if parse_worker is not None:
            parse_worker.stop()  # unused, or used and stopped already
