"""Child processes a test starts: never left running, whatever the test's outcome."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def reaped(process: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """`process` for the block; then killed (by its own pid) if it still runs, and its
    stdout closed."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()
