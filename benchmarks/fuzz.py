"""Fuzz: a long run of the manifest and xDS fuzzers that CI runs a seeded slice of.

    python benchmarks/fuzz.py --seconds 600              # about 2/3 manifests, 1/3 xDS
    python benchmarks/fuzz.py --seconds 120 --seed 7     # another seed
    python benchmarks/fuzz.py --manifest-seconds 300 --xds-seconds 0

Manifests: mutants of the every-feature manifest set (tests/support/manifest_fuzzer.py) are
loaded, built and translated one after the other until the time is up; each is checked (no
exception, bounded time and memory, untouched files still served, what vanished reported),
and every distinct resource served goes through `envoy --mode validate` in a few batched
runs at the end. Reported: mutants generated, failures, the worst time and peak memory
(tracemalloc) of one mutant, Envoy runs and what Envoy refused.

xDS: a `dragoman serve` process over the same manifests; hostile clients in another process
send random SotW and delta requests (ADS and per type), CSDS requests with pathological
matchers and raw bytes (tests/support/xds_fuzzer.py), while a well-behaved client opens a
fresh ADS stream and asks CSDS every 100 ms. Reported: messages and streams sent, the
server's answers, the probe latency before and during the fuzz, and whether the server
lived. The machine's load average is printed beside the figures.

It prints figures; nothing asserts on them (the exit status is 1 when a check failed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.envoy_dags import envoy_binary
from tests.support.harness import DragomanProcess, free_port
from tests.support.manifest_fuzzer import (
    EnvoyBatch,
    base_documents,
    base_files,
    check_outcome,
    expected_keys,
    mutants,
    run_mutant,
)
from tests.support.xds_fuzzer import fuzz_xds


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def fuzz_manifests(seed: int, seconds: float, workdir: Path) -> bool:
    expected = expected_keys()
    batch = EnvoyBatch()
    directory = workdir / "manifests"
    directory.mkdir()
    deadline = time.monotonic() + seconds
    count = 0
    failures: list[str] = []
    worst_time = (0.0, "")
    worst_memory = (0, "")
    for mutant in mutants(seed, 10**9):
        if time.monotonic() >= deadline:
            break
        outcome = run_mutant(mutant, directory)
        count += 1
        failures += [
            f"mutant {mutant.index} ({mutant.description[:200]}): {failure[:1500]}"
            for failure in check_outcome(outcome, expected)
        ]
        if outcome.seconds > worst_time[0]:
            worst_time = (outcome.seconds, mutant.description[:120])
        if outcome.peak_bytes > worst_memory[0]:
            worst_memory = (outcome.peak_bytes, mutant.description[:120])
        batch.add(outcome)
    print(f"manifests: {count} mutants (seed {seed}) in {seconds:.0f} s; {load()}")
    print(f"  worst time per mutant: {worst_time[0] * 1000:.0f} ms ({worst_time[1]})")
    print(f"  worst peak memory per mutant: {worst_memory[0] / 2**20:.1f} MiB ({worst_memory[1]})")
    print(f"  failures: {len(failures)}")
    for failure in failures[:20]:
        print("   ", failure)
    started = time.monotonic()
    runs, refused = batch.validate(envoy_binary(), workdir)
    print(
        f"  envoy --mode validate: {len(batch.listeners)} distinct listeners and "
        f"{len(batch.clusters)} clusters in {runs} runs ({time.monotonic() - started:.1f} s); "
        f"refused: {len(refused)}"
    )
    for reason in refused[:20]:
        print("   ", reason[:1500])
    return not failures and not refused


def fuzz_grpc(seed: int, seconds: float, workdir: Path) -> bool:
    manifests = workdir / "served"
    manifests.mkdir()
    for name, content in base_files(base_documents()).items():
        (manifests / name).write_bytes(content)
    log = workdir / "dragoman.log"
    server = DragomanProcess(manifests, f"127.0.0.1:{free_port()}", log).start()
    try:
        report = asyncio.run(fuzz_xds(server.xds_address, seed=seed, seconds=seconds))
        alive = server.process is not None and server.process.poll() is None
    finally:
        server.stop()
    lines = log.read_text(errors="replace").splitlines()
    print(f"xDS: {seconds:.0f} s of hostile clients (seed {seed}); {load()}")
    print(f"  {report.summary()}")
    print(
        f"  server alive: {alive}; log: {len(lines)} lines, longest "
        f"{max(map(len, lines), default=0)} characters, "
        f"{sum('Traceback' in line for line in lines)} tracebacks"
    )
    return alive and not report.failed_probes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--manifest-seconds", type=float)
    parser.add_argument("--xds-seconds", type=float)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    manifest_seconds = args.manifest_seconds
    xds_seconds = args.xds_seconds
    if manifest_seconds is None:
        manifest_seconds = args.seconds * 2 / 3
    if xds_seconds is None:
        xds_seconds = args.seconds - manifest_seconds if args.manifest_seconds is None else 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="dragoman-fuzz-") as scratch:
        workdir = Path(scratch)
        if manifest_seconds > 0:
            (workdir / "m").mkdir()
            ok &= fuzz_manifests(args.seed, manifest_seconds, workdir / "m")
        if xds_seconds > 0:
            (workdir / "x").mkdir()
            ok &= fuzz_grpc(args.seed, xds_seconds, workdir / "x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
