"""Kubernetes mode benchmark: one watch event → new snapshot published.

Prints figures; it is not a test. dragoman's Kubernetes mode (informers, object cache,
controller, xDS cache; no leader election, so no status writes) runs against the in-process
fake API server of the test suite, seeded with N ExternalName Services and one HTTPRoute
per Service on one Gateway. Each change writes one object to the API server (a Service's
external name, or an HTTPRoute's path) and times until the snapshot that holds it is
published to the xDS cache: the watch event's trip through the API server's HTTP stream,
the informer thread, the object cache and the build. Changes are spaced so each goes out
on its own (the holdoff lets the first change after a quiet spell through at once). The
floor is the replica's first (full) build of the same objects.

    python benchmarks/kube_events.py [--services 10000] [--changes 20]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.builders import GATEWAY_V1, external_service, gateway, gateway_class
from tests.support.kube_replica import Replica, eventually, replica_config
from tests.support.kubeapi import KubeApiServer

TARGET_MS = 50.0
SPACING_S = 0.7  # above the holdoff's longest delay (0.5 s): every change goes out alone


def route(i: int, prefix: str = "/") -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "HTTPRoute",
        "metadata": {"name": f"route{i}", "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [f"svc{i}.example.org"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                    "backendRefs": [{"name": f"svc{i}", "port": 80}],
                }
            ],
        },
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def run(n: int, changes: int) -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    api = KubeApiServer(history_limit=max(2000, 4 * changes))
    api.apply(gateway_class())
    api.apply(gateway())
    started = time.perf_counter()
    for i in range(n):
        api.apply(external_service(f"svc{i}", f"svc{i}.example.test", 80))
        api.apply(route(i))
    print(f"N = {n:,}: seeded the API server in {time.perf_counter() - started:.1f} s")
    replica = Replica(api, replica_config(None)).start()
    try:
        started = time.perf_counter()
        await eventually(lambda: replica.server.serving, timeout=600, what="serving")
        controller = replica.server.controller
        await eventually(lambda: len(controller.dag.clusters) == n, timeout=600, what="built")
        first = replica.server.updates[0]
        print(
            f"replica serving after {time.perf_counter() - started:.1f} s; first build "
            f"({first.kind}) {first.seconds * 1000:.0f} ms"
        )
        await asyncio.sleep(2 * SPACING_S)
        cache = controller.cache
        figures: dict[str, list[float]] = {"Service": [], "HTTPRoute": []}
        kinds: dict[str, set[str]] = {"Service": set(), "HTTPRoute": set()}
        step = max(1, n // 97)
        for k in range(changes):
            for label in figures:
                i = (k * step + (label == "HTTPRoute")) % n
                if label == "Service":
                    obj = external_service(f"svc{i}", f"v{k}.svc{i}.example.test", 80)
                    key = ("default", f"svc{i}")

                    def applied(obj: dict[str, Any] = obj, key: Any = key) -> bool:
                        held = controller.store.services.get(key) if controller.store else None
                        return (
                            held is not None and held.external_name == obj["spec"]["externalName"]
                        )
                else:
                    obj = route(i, f"/v{k}")
                    key = ("default", f"route{i}")

                    def applied(obj: dict[str, Any] = obj, key: Any = key) -> bool:
                        held = controller.store.http_routes.get(key) if controller.store else None
                        prefix = obj["spec"]["rules"][0]["matches"][0]["path"]["value"]
                        return held is not None and any(
                            m.path is not None and m.path.value == prefix
                            for rule in held.rules
                            for m in rule.matches
                        )

                generation = cache.generation
                begun = time.perf_counter()
                api.apply(copy.deepcopy(obj))
                while not applied():
                    generation = await asyncio.wait_for(cache.wait_for_change(generation), 30)
                figures[label].append(time.perf_counter() - begun)
                kinds[label].add(replica.server.updates[-1].kind)
                await asyncio.sleep(SPACING_S)
        print(f"{'watch event':<12} {'build':<12} {'median':>8} {'p90':>8} {'p99':>8} {'max':>8}")
        for label, values in figures.items():
            print(
                f"{label:<12} {','.join(sorted(kinds[label])):<12} "
                f"{statistics.median(values) * 1000:7.1f}  {percentile(values, 0.9) * 1000:7.1f}  "
                f"{percentile(values, 0.99) * 1000:7.1f}  {max(values) * 1000:7.1f}"
            )
        worst = max(statistics.median(v) for v in figures.values())
        print(
            f"\nevent → snapshot published, slowest median {worst * 1000:.1f} ms (target "
            f"{TARGET_MS:.0f} ms: {'met' if worst * 1000 <= TARGET_MS else 'MISSED'}); floor "
            f"(first full build) {first.seconds * 1000:.0f} ms; load average after: "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
    finally:
        await replica.stop()
        api.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000, help="N: Services and HTTPRoutes")
    parser.add_argument("--changes", type=int, default=20, help="changes per kind (at least 20)")
    args = parser.parse_args(argv)
    asyncio.run(run(args.services, args.changes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
