"""A first load of thousands of manifest files, shared with a worker process.

Decoding and parsing 10,000 files costs seconds of CPU in one interpreter; a server starting
has little else to do meanwhile, and another core can take a share. The worker is a fresh
interpreter (never a fork of the threaded server, which could inherit a lock another thread
holds). It scans the directory itself and parses the files in scan order from the first,
handing back what it made in pickled chunks as it goes, while the caller parses from the last
file backwards: they stop where they meet, so each parses what its core had time for, however
busy the machine. A directory of few files but a large YAML file (one file of every object,
as generated manifests often are) is shared by that file's pieces (its documents) the same
way. `dragoman serve` starts the worker before it imports the rest of itself, so the worker
is well ahead when the first load begins.

A record from the worker is taken only for a file whose stamp is still the one the worker
read it under (a piece, only of the very content the caller read); anything else is parsed
here. A worker that cannot start, dies, or hands back nonsense leaves its files to the
caller: the load is the same, only slower. The caller never waits for the worker, and stops it
once they meet (a worker whose caller went away ends at its next write, on the closed pipe).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from operator import attrgetter
from pathlib import Path
from typing import IO, Any, TypeVar

from dragoman.sources.errors import printable
from dragoman.sources.tree import YAML_SUFFIXES, FileStamp, holds_at_least

log = logging.getLogger("dragoman.sources")

# A first load of fewer files is parsed here alone: a worker's start (an interpreter and the
# parsing modules, about 0.15 s of CPU) would cost more than it saves.
SHARE_FROM = 2000
# How the worker is started: sys.executable, these arguments, and the directory this process
# found dragoman in (put first on the worker's path, unless it is there already: an
# installed package's site-packages must not come before the standard library).
WORKER_COMMAND: tuple[str, ...] = (
    "-c",
    "import sys\n"
    "if sys.argv[1] not in sys.path: sys.path.insert(0, sys.argv[1])\n"
    "from dragoman.sources.parse_worker import main\n"
    "main()\n",
)
# A first load of fewer files shares the pieces (documents) of its largest YAML file, when
# that file holds at least this many bytes (10,000 Services with their routes: about 3 MB).
SHARE_BYTES = 1024 * 1024
# Files (or pieces) per chunk the worker hands back, and files (or pieces) parsed here
# between looks at what it handed back: a few milliseconds of work each.
WORKER_CHUNK = 16
WORKER_PIECES = 32
HERE_CHUNK = 32
# While the worker parses, the caller's `meanwhile` (parse_meeting) is given what is parsed
# each time this share of the keys more is: a first build of it then costs only what differs
# (a few tenths of a second of 10,000 Services' build moved out of the time to serve), and
# each turn adds a little work (the store and build of the objects so far compared again).
MEANWHILE_SHARE = 1 / 6
# Each chunk travels as its length (this many bytes, little-endian), then its pickle.
FRAME_HEAD = 8
# The pipe's capacity asked for: a chunk or several fit, so the worker seldom waits for the
# caller to look (Linux; elsewhere the default, and the worker waits a little more).
PIPE_BYTES = 1024 * 1024
# Looks at the pipe are this many switch intervals apart at least. Each look is a read that
# lets go of the interpreter lock and takes it back at once: a thread waiting for the lock
# asks the holder to hand it over only after a whole switch interval with no such exchange,
# so a look every millisecond kept the event loop of `dragoman serve` waiting for most of a
# reload (0.46 s of 0.51 s at 10,000 documents in one file).
LOOK_SWITCH_INTERVALS = 2
# This process's CPU quota (cgroup v2).
CPU_MAX = "/sys/fs/cgroup/cpu.max"
# The kernel's load: averages over 1, 5 and 15 minutes, then "runnable/all" tasks right now.
LOADAVG = "/proc/loadavg"
RUNNABLE_LOOKS = 5

Result = TypeVar("Result")


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, within its cgroup's CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    try:  # cgroup v2: "max 100000", or "200000 100000" for two CPUs' worth
        quota, period = Path(CPU_MAX).read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cpus


def idle_cpus() -> float:
    """Usable CPUs that nothing else runs on, as far as the load tells. The 1-minute load
    average lags behind a machine that has just gone quiet (a build or a previous server
    that stopped seconds ago), so the tasks the kernel counts runnable right now, less this
    one, bound it: a CPU that is idle now is used."""
    try:
        average = float(Path(LOADAVG).read_text().split()[0])
        busy = min(average, _runnable_now())
    except (OSError, ValueError, IndexError):  # not Linux
        try:
            busy = os.getloadavg()[0]
        except OSError:  # pragma: no cover - no load average
            busy = 0.0
    return usable_cpus() - busy


def _runnable_now() -> int:
    """Tasks runnable besides this one, the fewest of a few looks 2 ms apart (one look may
    catch a task that runs for a moment)."""
    counts = []
    for look in range(RUNNABLE_LOOKS):
        if look:
            time.sleep(0.002)
        counts.append(int(Path(LOADAVG).read_text().split()[3].split("/")[0]) - 1)
    return max(0, min(counts))


def worth_a_worker() -> bool:
    """Whether a first load may be shared: not with debug logs on (what is ignored is logged
    by this process), and not on a busy machine (a worker adds CPU time and saves none)."""
    return not log.isEnabledFor(logging.DEBUG) and idle_cpus() >= 1


class ParseWorker:
    """A worker process parsing a directory's files in scan order; `received` takes what it
    has handed back so far, without waiting."""

    def __init__(
        self, process: subprocess.Popen[bytes], root: str, namespace: str, errors: IO[bytes]
    ) -> None:
        self.root, self.namespace = root, namespace
        self._process = process
        self._errors = errors
        self._buffer = bytearray()
        self._ended = False
        assert process.stdout is not None
        self._output = process.stdout.fileno()
        os.set_blocking(self._output, False)
        with contextlib.suppress(AttributeError, OSError):  # not Linux, or a lower limit
            fcntl.fcntl(self._output, fcntl.F_SETPIPE_SZ, PIPE_BYTES)

    @classmethod
    def start(cls, root: Path, namespace: str) -> ParseWorker | None:
        """A worker for the directory, if it holds enough to be worth one (files, or a large
        YAML file)."""
        if not holds_at_least(root, SHARE_FROM, SHARE_BYTES):
            return None
        # (What is worth sharing travels with the request: the worker decides as this does.)
        request = json.dumps(
            {
                "root": str(root),
                "namespace": namespace,
                "share_from": SHARE_FROM,
                "share_bytes": SHARE_BYTES,
            }
        )
        package_parent = str(Path(__file__).resolve().parents[2])
        errors = tempfile.TemporaryFile()  # noqa: SIM115 - the worker's, closed by stop()
        try:
            # The request travels in a file: a pipe would hold the caller until the worker reads.
            with tempfile.TemporaryFile() as file:
                file.write(request.encode())
                file.seek(0)
                process = subprocess.Popen(
                    [sys.executable, *WORKER_COMMAND, package_parent],
                    stdin=file,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                )
        except OSError as exc:
            errors.close()
            log.debug("parsing every file here: no worker process (%s)", exc)
            return None
        return cls(process, str(root), namespace, errors)

    def received(self) -> list[tuple[Hashable, Any]]:
        """(key, record) of every chunk handed back since the last call: a file's relative
        path, or (relative path, stamp read under, index) of a piece."""
        while not self._ended:
            try:
                part = os.read(self._output, PIPE_BYTES)
            except BlockingIOError:
                break
            except OSError:
                part = b""
            if not part:
                self._ended = True
            self._buffer += part
        handed: list[tuple[Hashable, Any]] = []
        while len(self._buffer) >= FRAME_HEAD:
            size = int.from_bytes(self._buffer[:FRAME_HEAD], "little")
            if len(self._buffer) < FRAME_HEAD + size:
                break
            payload = bytes(self._buffer[FRAME_HEAD : FRAME_HEAD + size])
            del self._buffer[: FRAME_HEAD + size]
            chunk = _chunk(payload)
            if chunk is None:
                log.warning("the manifest parse worker's answer is unreadable; parsing here")
                self._ended = True
                self._buffer.clear()
                break
            handed += chunk
        return handed

    def stop(self) -> None:
        """Ends the worker (if still running) and reaps it; says why if it failed."""
        process = self._process
        if process.returncode is not None:
            return
        running = process.poll() is None
        if running:
            process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()
        if not running and process.returncode != 0:
            self._errors.seek(0)
            tail = printable(self._errors.read().decode(errors="replace")[-500:])
            log.warning("the manifest parse worker failed (%s); parsed its files here", tail)
        self._errors.close()


def _chunk(payload: bytes) -> list[tuple[Hashable, Any]] | None:
    try:
        chunk = pickle.loads(payload)  # from the worker this process started itself
    except Exception:
        return None
    if not isinstance(chunk, list) or not all(
        isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str | tuple)
        for item in chunk
    ):
        return None
    return chunk


def parse_meeting(
    worker: ParseWorker,
    keys: Sequence[Hashable],
    parse_here: Callable[[list[Any]], list[Result]],
    fresh: Callable[[Any, int], bool],
    meanwhile: Callable[[Sequence[Result | None]], None] | None = None,
) -> tuple[list[Result], int]:
    """Everything `keys` names (files by path, or the pieces of a file) parsed, in the
    worker's order: the first ones by the worker, as far as it got, the others here from the
    last backwards. A record the worker handed back for the key at `position` is taken where
    `fresh(record, position)`. Returns the results in order and how many came from the
    worker. Stops the worker.

    `meanwhile`, while the worker parses, is given the results so far (None where a key is
    not parsed yet) each time a MEANWHILE_SHARE of the keys more has been parsed: work on
    those (a first build) takes this core's turn, and the worker parses more of the rest."""
    results: list[Result | None] = [None] * len(keys)
    handed: dict[Hashable, Any] = {}
    again: list[int] = []  # handed back, but not as the file is now
    low, high, taken = 0, len(keys), 0
    look_every = LOOK_SWITCH_INTERVALS * sys.getswitchinterval()
    next_look = 0.0
    share = max(1, math.ceil(len(keys) * MEANWHILE_SHARE))
    given = 0  # results parsed when `meanwhile` was last given them
    try:
        while low < high:
            now = time.monotonic()
            if now >= next_look:
                handed.update(worker.received())
                next_look = now + look_every
            while low < high and keys[low] in handed:
                record = handed.pop(keys[low])
                if fresh(record, low):
                    results[low] = record
                    taken += 1
                else:
                    again.append(low)
                low += 1
            if meanwhile is not None and low < high and low + len(keys) - high - given >= share:
                given = low + len(keys) - high
                meanwhile(results)
            elif low < high:
                start = max(low, high - HERE_CHUNK)
                results[start:high] = parse_here(list(keys[start:high]))
                high = start
    finally:
        worker.stop()
    if again:
        for index, result in zip(again, parse_here([keys[i] for i in again]), strict=True):
            results[index] = result
    return results, taken  # type: ignore[return-value]  # every slot filled


def largest_yaml(stamps: Sequence[FileStamp], share_bytes: int | None = None) -> FileStamp | None:
    """The YAML file whose pieces a first load of few files shares (the first of the largest,
    in scan order), if one holds `share_bytes` (SHARE_BYTES) or more."""
    yaml_files = (stamp for stamp in stamps if stamp.path.endswith(YAML_SUFFIXES))
    largest = max(yaml_files, key=attrgetter("size"), default=None)
    least = SHARE_BYTES if share_bytes is None else share_bytes
    return largest if largest is not None and largest.size >= least else None


def main() -> None:
    """The worker: scans the directory of the request, and hands back each chunk parsed: of
    its files, or of the pieces of its largest file when it holds few."""
    from dragoman.sources import record_pickles
    from dragoman.sources.manifests import fresh_pieces, parse_fresh_files
    from dragoman.sources.tree import scan_tree

    request = json.loads(sys.stdin.buffer.read())
    root, namespace = request["root"], request["namespace"]
    try:
        stamps = scan_tree(Path(root)).files
    except OSError:
        return  # the caller's own load says why
    chunks: Iterator[list[tuple[Hashable, Any]]]
    if len(stamps) >= request["share_from"]:
        files = [stamp.path for stamp in stamps]
        chunks = (
            list(zip(chunk, parse_fresh_files(root, namespace, chunk), strict=True))
            for chunk in (
                files[at : at + WORKER_CHUNK] for at in range(0, len(files), WORKER_CHUNK)
            )
        )
    elif (largest := largest_yaml(stamps, request["share_bytes"])) is not None:
        chunks = fresh_pieces(root, namespace, largest.path, WORKER_PIECES)
    else:
        return
    output = sys.stdout.buffer
    for chunk in chunks:
        payload = record_pickles.dumps(chunk)
        output.write(len(payload).to_bytes(FRAME_HEAD, "little") + payload)
        output.flush()


if __name__ == "__main__":
    main()
