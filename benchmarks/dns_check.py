"""DNS check benchmark: N external names checked by dragoman and served as EDS endpoints.

Prints figures; it is not a test. For N ExternalName Services, each reached by its own
HTTPRoute on one Gateway, with the DNS check on:

- memory: the controller's tracemalloc peak and retained size while it serves the N checked
  names (store, DAG, snapshots, checker state), and the checker's own state;
- re-resolution: CPU seconds dragoman spends to re-check every name once (what one minute
  costs when every answer's TTL is 60 s): real A and AAAA lookups through dnspython against
  an authoritative responder on loopback that runs in a child process (its CPU is not
  counted), plus the checker's bookkeeping;
- a burst of B answer changes: applied as endpoint-only updates (the EDS fast path of
  `Controller.update_dns`), against the floor of a full build and translation of the same
  store measured in the same run.

    python benchmarks/dns_check.py [--names 10000] [--burst 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import Callable

import yaml

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.options import BuildOptions
from dragoman.envoy.translation.translator import translate
from dragoman.objects import KubeObject
from dragoman.runtime.controller import Controller
from dragoman.runtime.dns_checker import DnsChecker
from dragoman.runtime.server_config import DnsCheckSettings
from dragoman.snapshots.gc_pause import cyclic_gc_paused
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache

# Runs in a child process: an authoritative responder answering every `n<i>.bench.test`.
RESPONDER = """
import sys, time
from dragoman.demo.dns import DnsResponder
names = int(sys.argv[1])
server = DnsResponder(ttl=60).start()
for i in range(names):
    server.set_a(f"n{i}.bench.test", f"198.18.{i // 250}.{i % 250 + 1}")
    server.set_aaaa(f"n{i}.bench.test", f"2001:db8::{i + 1:x}")
print(server.port, flush=True)
sys.stdin.read()
server.stop()
"""


def address_of(i: int, generation: int = 0) -> str:
    return f"198.{18 + generation}.{i // 250}.{i % 250 + 1}"


def store_of(names: int) -> Store:
    docs = [
        """
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {name: bench, namespace: default}
        spec:
          gatewayClassName: dragoman
          listeners: [{name: http, protocol: HTTP, port: 8080}]
        """
    ]
    for i in range(names):
        docs.append(
            f"""
            apiVersion: v1
            kind: Service
            metadata: {{name: ext-{i}, namespace: default}}
            spec: {{type: ExternalName, externalName: n{i}.bench.test, ports: [{{port: 443}}]}}
            """
        )
        docs.append(
            f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {{name: r-{i}, namespace: default}}
            spec:
              parentRefs: [{{name: bench}}]
              hostnames: [h{i}.bench.example]
              rules: [{{backendRefs: [{{name: ext-{i}, port: 443}}]}}]
            """
        )
    found: list[KubeObject] = []
    for doc in docs:
        parsed = parse_object(yaml.safe_load(textwrap.dedent(doc)))
        assert parsed is not None
        found.append(parsed)
    return Store.from_objects(found)


def observations(names: int, generation: int = 0) -> dict[str, DnsObservation]:
    return {
        f"n{i}.bench.test": DnsObservation((address_of(i, generation), f"2001:db8::{i + 1:x}"))
        for i in range(names)
    }


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(best, median) wall seconds of `repeat` runs."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def mib(size: float) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--names", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    names, burst = args.names, min(args.burst, args.names)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    print(f"{names:,} checked names, each its own ExternalName Service and HTTPRoute")

    store = store_of(names)
    options = BuildOptions(dns_check=True)
    # --- memory: a controller serving every name, checked -----------------------------------
    tracemalloc.start()
    controller = Controller(SnapshotCache(), options)
    controller.update(store)
    controller.update_dns(observations(names))
    assert controller.dag is not None and len(controller.dag.clusters) == names
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"controller serving them: retained {mib(current)}, peak {mib(peak)} (tracemalloc)")

    # --- re-resolution: every name once, real lookups --------------------------------------
    child = subprocess.Popen(
        [sys.executable, "-c", RESPONDER, str(names)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        settings = DnsCheckSettings(
            enabled=True, resolvers=(("127.0.0.1", port),), timeout_s=5, min_interval_s=60
        )
        clock = [0.0]
        checker = DnsChecker(settings, clock=lambda: clock[0])
        wanted = [f"n{i}.bench.test" for i in range(names)]
        tracemalloc.start()
        asyncio.run(checker.check(wanted))  # first round: every name new
        checker_bytes = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        failed = [n for n, o in checker.observations.items() if o.error is not None]
        clock[0] += 61  # a minute later every answer's TTL (60 s) has run out
        before_cpu, before_wall = cpu(), time.perf_counter()
        asyncio.run(checker.check(wanted))
        spent_cpu, spent_wall = cpu() - before_cpu, time.perf_counter() - before_wall
        print(f"checker state: {mib(checker_bytes)} (tracemalloc, first round)")
        print(
            f"re-resolution, every name once (A + AAAA, {2 * names:,} queries): "
            f"{spent_cpu:.2f} s CPU in {spent_wall:.2f} s wall = {100 * spent_cpu / 60:.1f}% "
            f"of one core per minute at TTL 60 s; {len(failed)} lookups failed "
            f"(load {os.getloadavg()[0]:.2f})"
        )
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)

    # --- a burst of answer changes: endpoint-only updates against a full build ---------------
    generation = [0]

    def changed_burst() -> None:
        generation[0] = 1 - generation[0]
        dns = observations(names)
        dns.update(
            (name, observation)
            for name, observation in list(observations(burst, generation[0]).items())
        )
        result = controller.update_dns(dns)
        assert result.kind == "endpoints", result.kind

    def full() -> None:
        with cyclic_gc_paused():
            translate(build(store, options, controller.dns))

    burst_best, burst_median = timed(changed_burst, args.repeat)
    full_best, full_median = timed(full, args.repeat)
    print(
        f"burst of {burst:,} answer changes (endpoints only): best {burst_best * 1000:.0f} ms, "
        f"median {burst_median * 1000:.0f} ms"
    )
    print(
        f"floor, full build + translation of the same store: best {full_best * 1000:.0f} ms, "
        f"median {full_median * 1000:.0f} ms; burst / full = {burst_best / full_best:.2f}"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
