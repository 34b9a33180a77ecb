"""Arguments several commands share."""

from __future__ import annotations

import argparse
from pathlib import Path

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
