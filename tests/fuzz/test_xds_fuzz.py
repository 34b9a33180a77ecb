"""Hostile xDS and CSDS clients against a live `dragoman serve` (seeded, a few seconds;
benchmarks/fuzz.py runs longer), while a well-behaved client keeps connecting and asking."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.harness import DragomanProcess, free_port
from tests.support.manifest_fuzzer import base_documents, base_files
from tests.support.xds_fuzzer import fuzz_xds

SEED = 20261124
SECONDS = 8.0
# A liveness bound, not a performance target (benchmarks/fuzz.py reports the figures): a
# backtracking regex or a parse on the event loop stalled probes for seconds.
MAX_PROBE_S = 2.0
MAX_LOG_LINE = 4096


@pytest.fixture
def server(tmp_path: Path) -> Iterator[DragomanProcess]:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, content in base_files(base_documents()).items():
        (manifests / name).write_bytes(content)
    process = DragomanProcess(
        manifests, f"127.0.0.1:{free_port()}", tmp_path / "dragoman.log"
    ).start()
    try:
        yield process
    finally:
        process.stop()


def test_hostile_clients_never_stall_a_well_behaved_one(server: DragomanProcess) -> None:
    report = asyncio.run(fuzz_xds(server.xds_address, seed=SEED, seconds=SECONDS))

    assert server.process is not None and server.process.poll() is None, server.log()[-4000:]
    assert report.requests > 100 and report.streams > 50, report.summary()
    assert not report.failed_probes, report.failed_probes[:5]
    assert len(report.during) > 10, report.summary()
    assert max(report.during) < MAX_PROBE_S, report.summary()
    log = server.log()
    assert "Traceback" not in log, log[-4000:]
    # Client strings are cut and escaped: no forged or megabyte lines.
    longest = max(len(line) for line in log.splitlines())
    assert longest < MAX_LOG_LINE, longest
    assert not any(line.startswith("FORGED") for line in log.splitlines())
