"""Incremental builds benchmark: one object changed → new snapshot published.

Prints figures; it is not a test. The workload is the one of the propagation benchmark: N
ExternalName Services (`svcI.example.test`) and one HTTPRoute per Service on one Gateway
(with --pod-backed, every other Service pod-backed with a 3-endpoint EndpointSlice), plus a
few objects of every other kind the build reads: an HTTPS listener and its Secret, a
GRPCRoute-only listener with 100 GRPCRoutes, 100 Services in another namespace reached
through ReferenceGrants, and (in a phase of its own) a BackendTLSPolicy.

For each kind it changes one object at a time (--changes times, different objects) and
times `Controller.update` on the new store: the build, the serialization of what changed
and the snapshots handed to the xDS cache (published: streams are woken). The floor is a
full build in the same run: a fresh Controller's first update of the same store.

    python benchmarks/incremental.py [--services 10000] [--changes 20] [--pod-backed] [--cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dragoman.objects import KubeObject
from dragoman.runtime.controller import Controller
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.certificates import certificate_authority

GATEWAY_V1 = "gateway.networking.k8s.io/v1"
NAMESPACE = "default"
OTHER = "other"
EXTRA = 100  # GRPCRoutes, and Services reached through ReferenceGrants
TARGET_MS = 50.0

Doc = dict[str, Any]


# --- the workload -----------------------------------------------------------------------------


def service(i: int, pod_backed: bool, host: str = "example.test") -> Doc:
    spec: Doc
    if pod_backed:
        spec = {"selector": {"app": f"svc{i}"}, "ports": [{"name": "http", "port": 80}]}
    else:
        spec = {"type": "ExternalName", "externalName": f"svc{i}.{host}", "ports": [{"port": 80}]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(f"svc{i}"), "spec": spec}


def endpoint_slice(i: int, generation: int = 0) -> Doc:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {**_meta(f"svc{i}-1"), "labels": {"kubernetes.io/service-name": f"svc{i}"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": [f"10.{i >> 8 & 255}.{i & 255}.{3 * generation + j + 1}"]}
            for j in range(3)
        ],
    }


def http_route(i: int, prefix: str = "/", namespace: str = NAMESPACE) -> Doc:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "HTTPRoute",
        "metadata": _meta(f"route{i}"),
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "http"}],
            "hostnames": [f"svc{i}.example.org"],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                    "backendRefs": [{"name": f"svc{i}", "namespace": namespace, "port": 80}],
                }
            ],
        },
    }


def other_route(j: int) -> Doc:
    route = http_route(j, namespace=OTHER)
    route["metadata"] = _meta(f"to-other{j}")
    route["spec"]["hostnames"] = [f"other{j}.example.org"]
    return route


def grpc_route(j: int, service_name: str = "pkg.Echo") -> Doc:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "GRPCRoute",
        "metadata": _meta(f"grpc{j}"),
        "spec": {
            "parentRefs": [{"name": "gw", "sectionName": "grpc"}],
            "hostnames": [f"grpc{j}.example.org"],
            "rules": [
                {
                    "matches": [{"method": {"service": service_name}}],
                    "backendRefs": [{"name": f"svc{j}", "port": 80}],
                }
            ],
        },
    }


def reference_grant(j: int, name: str | None) -> Doc:
    to: Doc = {"group": "", "kind": "Service"}
    if name is not None:
        to["name"] = name
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": _meta(f"grant{j}", OTHER),
        "spec": {
            "from": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": NAMESPACE}
            ],
            "to": [to],
        },
    }


def gateway(https_hostname: str = "secure.example.test") -> Doc:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "Gateway",
        "metadata": _meta("gw"),
        "spec": {
            "gatewayClassName": "dragoman",
            "listeners": [
                {"name": "http", "protocol": "HTTP", "port": 8080},
                {
                    "name": "https",
                    "protocol": "HTTPS",
                    "port": 8443,
                    "hostname": https_hostname,
                    "tls": {"certificateRefs": [{"name": "site"}]},
                },
                {
                    "name": "grpc",
                    "protocol": "HTTP",
                    "port": 8081,
                    "allowedRoutes": {"kinds": [{"kind": "GRPCRoute"}]},
                },
            ],
        },
    }


def secret(generation: int) -> Doc:
    pem = certificate_authority(f"bench CA {generation}").issue("secure.example.test")
    import base64

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta("site"),
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(pem.certificate).decode(),
            "tls.key": base64.b64encode(pem.private_key).decode(),
        },
    }


def backend_tls_policy(hostname: str) -> Doc:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "BackendTLSPolicy",
        "metadata": _meta("policy"),
        "spec": {
            "targetRefs": [{"group": "", "kind": "Service", "name": "svc0"}],
            "validation": {"hostname": hostname, "wellKnownCACertificates": "System"},
        },
    }


def workload(n: int, pod_backed: bool) -> list[KubeObject]:
    docs: list[Doc] = [
        {
            "apiVersion": GATEWAY_V1,
            "kind": "GatewayClass",
            "metadata": {"name": "dragoman"},
            "spec": {"controllerName": "dragoman.dev/gateway-controller"},
        },
        gateway(),
        secret(0),
    ]
    for i in range(n):
        docs.append(service(i, pod_backed and i % 2 == 0))
        if pod_backed and i % 2 == 0:
            docs.append(endpoint_slice(i))
        docs.append(http_route(i))
    for j in range(EXTRA):
        docs.append(grpc_route(j))
        other = service(j, False, "other.test")
        other["metadata"] = _meta(f"svc{j}", OTHER)
        docs.append(other)
        docs.append(other_route(j))
        docs.append(reference_grant(j, f"svc{j}"))
    return [_parsed(doc) for doc in docs]


def _meta(name: str, namespace: str = NAMESPACE) -> Doc:
    return {"name": name, "namespace": namespace}


def _parsed(doc: Doc) -> KubeObject:
    made = parse_object(doc)
    assert made is not None, doc
    return made


# --- changes ------------------------------------------------------------------------------------

Change = Callable[[int], KubeObject]


def changes(n: int, pod_backed: bool) -> dict[str, Change]:
    """Per kind: the k-th change (a new version of one object, a different one each time)."""
    step = max(1, n // 97)
    external = [i for i in range(n) if not (pod_backed and i % 2 == 0)]

    def spread(k: int) -> int:
        return external[(k * step) % len(external)]

    made: dict[str, Change] = {
        "Service": lambda k: _parsed(service(spread(k), False, f"v{k}.example.test")),
        "HTTPRoute": lambda k: _parsed(http_route((k * step) % n, f"/v{k}")),
        "GRPCRoute": lambda k: _parsed(grpc_route(k % EXTRA, f"pkg.Echo{k}")),
        # Revoked: the one route that used it loses its backend (RefNotPermitted).
        "ReferenceGrant": lambda k: _parsed(reference_grant(k % EXTRA, "none")),
        "Secret": lambda k: _parsed(secret(k + 1)),
        "Gateway": lambda k: _parsed(gateway(f"secure{k}.example.test")),
    }
    if pod_backed:
        made["EndpointSlice"] = lambda k: _parsed(endpoint_slice((2 * k * step) % n, k + 1))
    return made


def changed(store: Store, obj: KubeObject) -> Store:
    return store.with_object(type(obj), (obj.meta.namespace, obj.meta.name), obj)


# --- measuring ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Figures:
    label: str
    seconds: list[float]
    paths: set[str]

    def percentile(self, p: float) -> float:
        ordered = sorted(self.seconds)
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


# What the figures are measured with: wall time, or this process's CPU time with --cpu (on
# a machine other work keeps busy, wall time counts the waits for a core on both sides).
clock: Callable[[], float] = time.perf_counter


def full_build(store: Store, repeat: int) -> Figures:
    seconds = []
    for _ in range(repeat):
        controller = Controller(SnapshotCache())
        started = clock()
        result = controller.update(store)
        seconds.append(clock() - started)
        assert result.kind == "full"
    return Figures("full build (floor)", seconds, {"full"})


def one_kind(
    controller: Controller, store: Store, label: str, change: Change, count: int
) -> tuple[Figures, Store]:
    seconds, paths = [], set()
    for k in range(count):
        new = changed(store, change(k))
        started = clock()
        result = controller.update(new)
        seconds.append(clock() - started)
        paths.add(result.kind)
        store = new
    return Figures(label, seconds, paths), store


def policy_phase(controller: Controller, store: Store, count: int) -> tuple[Figures, Store]:
    """With a BackendTLSPolicy present (its first appearance is a full build), each change
    to it: the routes reaching the Service it targets are rebuilt."""
    store = changed(store, _parsed(backend_tls_policy("svc0.example.test")))
    controller.update(store)
    return one_kind(
        controller,
        store,
        "BackendTLSPolicy",
        lambda k: _parsed(backend_tls_policy(f"svc0-{k}.example.test")),
        count,
    )


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(rows: list[Figures], floor: float) -> None:
    print(
        f"{'change':<20} {'path':<24} {'median':>8} {'p90':>8} {'p99':>8} {'max':>8}  floor/median"
    )
    for row in rows:
        median = statistics.median(row.seconds)
        print(
            f"{row.label:<20} {','.join(sorted(row.paths)):<24} "
            f"{median * 1000:7.1f}  {row.percentile(0.9) * 1000:7.1f}  "
            f"{row.percentile(0.99) * 1000:7.1f}  {max(row.seconds) * 1000:7.1f}  "
            f"{floor / median:8.1f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=10_000, help="N: Services and HTTPRoutes")
    parser.add_argument("--changes", type=int, default=20, help="changes per kind (at least 20)")
    parser.add_argument("--pod-backed", action="store_true", help="half the Services pod-backed")
    parser.add_argument("--full-repeat", type=int, default=3, help="full builds for the floor")
    parser.add_argument(
        "--cpu", action="store_true", help="time with this process's CPU time, not wall time"
    )
    args = parser.parse_args(argv)
    if args.cpu:
        global clock
        clock = time.process_time
    n = args.services

    async def run() -> None:  # the cache wakes streams through asyncio events
        what = "CPU time" if clock is time.process_time else "wall time"
        print(f"load average before: {load_average()}; figures in ms of {what}")
        started = time.perf_counter()
        store = Store.from_objects(workload(n, args.pod_backed))
        shape = "half pod-backed" if args.pod_backed else "ExternalName"
        print(
            f"N = {n:,} Services and HTTPRoutes ({shape}), "
            f"{len(store.services):,} Services, {len(store.http_routes):,} HTTPRoutes, "
            f"{len(store.grpc_routes)} GRPCRoutes; made in {time.perf_counter() - started:.1f} s"
        )
        floor = full_build(store, args.full_repeat)
        controller = Controller(SnapshotCache())
        controller.update(store)
        rows = [floor]
        for label, change in changes(n, args.pod_backed).items():
            row, store = one_kind(controller, store, label, change, args.changes)
            rows.append(row)
        row, store = policy_phase(controller, store, args.changes)
        rows.append(row)
        median_floor = statistics.median(floor.seconds)
        report(rows, median_floor)
        incremental = [r for r in rows if r.paths <= {"incremental", "endpoints"}]
        worst = max(statistics.median(r.seconds) for r in incremental)
        print(
            f"\nslowest incremental kind: median {worst * 1000:.1f} ms "
            f"(target {TARGET_MS:.0f} ms: {'met' if worst * 1000 <= TARGET_MS else 'MISSED'}); "
            f"load average after: {load_average()}"
        )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
