"""Arguments several commands share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dragoman.config import ServerConfig
    from dragoman.dag.model import Dag
    from dragoman.dag.options import BuildOptions
    from dragoman.store import Store

DEFAULT_XDS_ADDRESS = "127.0.0.1:18000"


def manifest_dir(value: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: not a directory")
    return path


def add_logging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity (default: info)",
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
    from dragoman.config import DEFAULT_CONFIG, ConfigError, load_config

    path = getattr(args, "config", None)
    if path is None:
        return DEFAULT_CONFIG
    try:
        return load_config(path)
    except ConfigError as error:
        print(f"error: bad configuration file\n{error}", file=sys.stderr)
        return None


def checked_build(store: Store, options: BuildOptions, config: ServerConfig) -> Dag:
    """A build, with the DNS check's observations when the configuration turns it on (the
    names are resolved once, here)."""
    import asyncio

    from dragoman.dag.build import build
    from dragoman.dns_checker import DnsChecker

    dag = build(store, options)
    if not config.dns_check.enabled or not dag.dns_hostnames:
        return dag
    checker = DnsChecker(config.dns_check)
    asyncio.run(checker.check(dag.dns_hostnames))
    return build(store, options, checker.observations)
