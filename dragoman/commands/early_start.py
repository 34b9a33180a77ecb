"""What `dragoman serve --manifests DIR` starts before the rest of dragoman is imported.

Importing the server and parsing its arguments take a few tenths of a second; the worker
process that shares the directory's first load (dragoman.sources.parse_worker) parses
meanwhile. The command line is read here as given, before argparse reads it: where this
reading and argparse's differ (an abbreviated option, a directory set in a config file), the
worker is stopped unused, or the first load starts one of its own, as it would without this.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dragoman.sources.parse_worker import ParseWorker

# The namespace of objects that name none (ManifestDirectory's default, which serve keeps).
DEFAULT_NAMESPACE = "default"


def first_load_worker(words: Sequence[str]) -> ParseWorker | None:
    """A worker already parsing the manifest directory of a `serve` command line (`words`:
    the arguments after the program's name); None for any other command, or where the first
    load would not share (no directory, `--state-dir`, debug logs)."""
    if not words or words[0] != "serve" or "--kubernetes" in words:
        return None
    manifests = _option(words, "--manifests")
    if manifests is None or _option(words, "--state-dir") is not None:
        return None
    if _option(words, "--log-level") == "debug":  # what is ignored is logged by the server
        return None
    from dragoman.sources.parse_worker import ParseWorker, worth_a_worker

    return ParseWorker.start(Path(manifests), DEFAULT_NAMESPACE) if worth_a_worker() else None


def _option(words: Sequence[str], name: str) -> str | None:
    """The value of the last `name VALUE` or `name=VALUE` (argparse keeps the last)."""
    value = None
    for index, word in enumerate(words):
        if word == "--":
            break
        if word == name and index + 1 < len(words):
            value = words[index + 1]
        elif word.startswith(name + "="):
            value = word[len(name) + 1 :]
    return value
