"""A first load of thousands of manifest files, shared with a worker process.

Decoding and parsing 10,000 files costs seconds of CPU in one interpreter; a server starting
has nothing else to do meanwhile, and another core can take a share. The worker is a fresh
interpreter (never a fork of the threaded server, which could inherit a lock another thread
holds) given the files it reads and parses; it sends back what it made, pickled. The caller parses
the rest meanwhile. The split leaves the worker less than half, for the time it takes to
start. Anything going wrong with the worker (it cannot start, dies, answers nothing usable
in time) leaves its files to the caller: the load is the same, only slower.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from dragoman.sources.errors import printable

log = logging.getLogger("dragoman.sources")

# The worker's share: it starts about 0.2 s after the caller begins (an interpreter and the
# parsing modules), and sending its results back costs it a little more.
WORKER_SHARE = 0.42
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
# This process's CPU quota (cgroup v2).
CPU_MAX = "/sys/fs/cgroup/cpu.max"
# The kernel's load: averages over 1, 5 and 15 minutes, then "runnable/all" tasks right now.
LOADAVG = "/proc/loadavg"
RUNNABLE_LOOKS = 5
# A worker that has not answered this long after the caller finished its own share is
# given up (its files are parsed here).
WORKER_TIMEOUT_S = 120.0

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


def parse_shared(
    root: str,
    default_namespace: str,
    relatives: Sequence[str],
    parse_here: Callable[[list[str]], list[Result]],
) -> tuple[list[Result], int]:
    """`parse_here(relatives)`, with a worker process parsing the first share of them.
    Returns the results in order and how many came from the worker."""
    split = int(len(relatives) * WORKER_SHARE)
    theirs, ours = list(relatives[:split]), list(relatives[split:])
    worker = _start(root, default_namespace, theirs) if theirs else None
    results = parse_here(ours)
    from_worker = _collect(worker) if worker is not None else None
    if from_worker is None or len(from_worker) != len(theirs):
        return parse_here(theirs) + results, 0
    return from_worker + results, len(theirs)


def _start(
    root: str, default_namespace: str, relatives: list[str]
) -> subprocess.Popen[bytes] | None:
    request = json.dumps({"root": root, "namespace": default_namespace, "files": relatives})
    package_parent = str(Path(__file__).resolve().parents[2])
    try:
        # The request travels in a file: a pipe would hold the caller until the worker reads.
        with tempfile.TemporaryFile() as file:
            file.write(request.encode())
            file.seek(0)
            return subprocess.Popen(
                [sys.executable, *WORKER_COMMAND, package_parent],
                stdin=file,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
    except OSError as exc:
        log.debug("parsing every file here: no worker process (%s)", exc)
        return None


def _collect(worker: subprocess.Popen[bytes]) -> list[Any] | None:
    assert worker.stdout is not None and worker.stderr is not None
    try:
        output, errors = worker.communicate(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        log.warning("the manifest parse worker did not answer; parsing its files here")
        return None
    if worker.returncode != 0:
        tail = printable(errors.decode(errors="replace")[-500:])
        log.warning("the manifest parse worker failed (%s); parsing its files here", tail)
        return None
    try:
        results = pickle.loads(output)  # from the worker this process started itself
    except Exception as exc:
        log.warning("the manifest parse worker's answer is unreadable (%s)", exc)
        return None
    return results if isinstance(results, list) else None


def main() -> None:
    from dragoman.sources.manifests import parse_fresh_files

    request = json.loads(sys.stdin.buffer.read())
    results = parse_fresh_files(request["root"], request["namespace"], request["files"])
    sys.stdout.buffer.write(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
