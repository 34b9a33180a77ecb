"""`propagation.py --sotw-floor`: the same change pushed by an ideal SotW server, interleaved.

In state-of-the-world xDS every CDS response carries every cluster, so each Envoy re-reads
all N clusters on every change, however fast the server. This module measures what that
leaves for any SotW server on this machine: a minimal ADS server (grpcio's asyncio server,
in a process of its own) that does next to nothing per change.

Before the clock starts, dragoman's own translation of the workload's manifest directory
gives every resource's bytes (the node group of the benchmark's Gateway), once with every
Service on the first port and once with every Service on the second, so the server holds both
forms of every cluster. A change is one line on the server's standard input naming a cluster
and a port: the server swaps that cluster's entry, joins the already encoded entries into
one DiscoveryResponse and writes that same bytes object to every stream at once. Envoys, their
DNS responders and backends are started exactly as in the dragoman phase (same bootstrap, a
fresh set per phase) and the data plane is probed the same way (`propagation.measure_changes`).

Phases alternate, dragoman (SotW ADS) then the floor, `--rounds` times; the figures of the
rounds are pooled into one table with dragoman's as ratios to the floor's, beside each
Envoy's main-thread CPU per change in both phases.

    python benchmarks/propagation_floor.py --serve PORT RESOURCES   # the server alone
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import itertools
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import grpc
import propagation as prop
from envoy.service.discovery.v3.discovery_pb2 import DiscoveryRequest, DiscoveryResponse
from google.protobuf.any_pb2 import Any

from dragoman.demo.envoy import EnvoyProcess

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
WILDCARD_TYPES = frozenset({CLUSTER, LISTENER})  # full state: every resource, names ignored


# --- the resources, from dragoman's translation ---------------------------------------------


@dataclass
class FloorResources:
    """Serialized resources by type and name (in the order dragoman serves them), and both
    forms of every cluster that differs between the workload's two ports."""

    types: dict[str, dict[str, bytes]]
    forms: dict[str, dict[int, bytes]]  # cluster name -> port -> body


def cluster_name(i: int) -> str:
    """dragoman's name for Service i's cluster (namespace/service/port name)."""
    return f"{prop.NAMESPACE}/svc{i}/http"


def translated(directory: Path) -> dict[str, dict[str, bytes]]:
    """What `dragoman serve --listener-address 127.0.0.1` serves the benchmark's Gateway."""
    from dragoman.commands.common import checked_build, loaded_store
    from dragoman.envoy.translate_options import TranslateOptions
    from dragoman.envoy.translation.translator import translate
    from dragoman.runtime.server_config import DEFAULT_CONFIG

    dag = checked_build(loaded_store(directory), DEFAULT_CONFIG.build_options(), DEFAULT_CONFIG)
    options = DEFAULT_CONFIG.translate_options(TranslateOptions(listener_address="127.0.0.1"))
    snapshot = translate(dag, options)[f"{prop.NAMESPACE}/{prop.GATEWAY}"]
    return {
        type_url: {name: r.body for name, r in typed.resources.items()}
        for type_url, typed in snapshot.types.items()
        if typed.resources
    }


def floor_resources(workload: prop.Workload, scratch: Path) -> FloorResources:
    """Both forms of every resource: the workload as written, and every ExternalName Service
    (those the benchmark changes) moved to the other port (written to `scratch`, one file
    per Service, translated, then removed)."""
    first = translated(workload.root)
    other = prop.Workload(
        scratch,
        workload.services,
        workload.listener_port,
        (workload.ports[1], workload.ports[0]),
        pod_backed=workload.pod_backed,
        one_file=False,
    )
    other.write_all()
    for i in range(workload.services):
        if not other.is_external(i):
            other.change(i)  # back to the first port: pod-backed Services never change
    try:
        second = translated(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for type_url in (LISTENER, ROUTE):
        if first.get(type_url) != second.get(type_url):
            raise RuntimeError(f"a port change alters {type_url.rsplit('.', 1)[1]} too")
    forms: dict[str, dict[int, bytes]] = {}
    for i in range(workload.services):
        if not workload.is_external(i):
            continue
        name = cluster_name(i)
        if name not in first.get(CLUSTER, {}) or name not in second.get(CLUSTER, {}):
            raise RuntimeError(f"dragoman serves no cluster {name!r}")
        forms[name] = {
            workload.ports[0]: first[CLUSTER][name],
            workload.ports[1]: second[CLUSTER][name],
        }
    return FloorResources(first, forms)


# --- the server -----------------------------------------------------------------------------


def _entry(type_url: str, body: bytes) -> bytes:
    """One element of DiscoveryResponse.resources, encoded: responses are these joined."""
    return DiscoveryResponse(resources=[Any(type_url=type_url, value=body)]).SerializeToString()


def _head(version: str) -> bytes:
    return DiscoveryResponse(version_info=version).SerializeToString()


def _tail(type_url: str, nonce: str) -> bytes:
    return DiscoveryResponse(type_url=type_url, nonce=nonce).SerializeToString()


@dataclass(eq=False)
class Stream:
    queue: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    nonces: dict[str, str] = field(default_factory=dict)  # type URL -> last nonce sent
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type URL -> subscribed


class FloorServer:
    """SotW ADS with precomputed entries: a change costs one join and one write per stream."""

    def __init__(self, resources: FloorResources) -> None:
        self.entries = {
            type_url: {name: _entry(type_url, body) for name, body in bodies.items()}
            for type_url, bodies in resources.types.items()
        }
        self.forms = {
            name: {port: _entry(CLUSTER, body) for port, body in by_port.items()}
            for name, by_port in resources.forms.items()
        }
        self.versions = dict.fromkeys(self.entries, 1)
        self.streams: set[Stream] = set()
        self.counter = itertools.count()
        self.nacks = 0

    def full(self, type_url: str, nonce: str) -> bytes:
        entries = self.entries.get(type_url, {})
        version = str(self.versions.get(type_url, 1))
        return _head(version) + b"".join(entries.values()) + _tail(type_url, nonce)

    def named(self, type_url: str, names: tuple[str, ...], nonce: str) -> bytes:
        entries = self.entries.get(type_url, {})
        found = [entries[name] for name in names if name in entries]
        version = str(self.versions.get(type_url, 1))
        return _head(version) + b"".join(found) + _tail(type_url, nonce)

    def on_request(self, stream: Stream, request: DiscoveryRequest) -> None:
        type_url = request.type_url
        if request.response_nonce and request.response_nonce != stream.nonces.get(type_url):
            return  # about a response since superseded: the newer one is on its way
        if request.HasField("error_detail"):
            # Rejected: the same resources again would be rejected again; the next change
            # brings new ones.
            self.nacks += 1
            print(f"NACK {type_url}: {request.error_detail.message[:300]}", file=sys.stderr)
            return
        names = () if type_url in WILDCARD_TYPES else tuple(sorted(request.resource_names))
        current = str(self.versions.get(type_url, 1))
        if (
            type_url in stream.nonces
            and request.version_info == current
            and names == stream.names.get(type_url)
        ):
            return  # an ACK of what it has
        nonce = f"r{next(self.counter)}"
        stream.nonces[type_url] = nonce
        stream.names[type_url] = names
        if type_url in WILDCARD_TYPES:
            stream.queue.put_nowait(self.full(type_url, nonce))
        else:
            stream.queue.put_nowait(self.named(type_url, names, nonce))

    def flip(self, name: str, port: int) -> None:
        """The change: one cluster to its other form, pushed to every stream at once."""
        self.entries[CLUSTER][name] = self.forms[name][port]
        self.versions[CLUSTER] += 1
        # One bytes object for every stream: the nonce is the version, new on every push.
        nonce = f"c{self.versions[CLUSTER]}"
        response = self.full(CLUSTER, nonce)
        for stream in self.streams:
            if CLUSTER in stream.nonces:
                stream.nonces[CLUSTER] = nonce
                stream.queue.put_nowait(response)

    async def stream(
        self, requests: AsyncIterator[DiscoveryRequest], context: object
    ) -> AsyncIterator[bytes]:
        stream = Stream()
        self.streams.add(stream)

        async def read() -> None:
            async for request in requests:
                self.on_request(stream, request)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                getter = asyncio.ensure_future(stream.queue.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return  # the client closed its side
                yield getter.result()
        finally:
            reader.cancel()
            self.streams.discard(stream)


async def start_server(floor: FloorServer, address: str) -> tuple[grpc.aio.Server, int]:
    """The floor's ADS service on `address` ("host:port", port 0: any): server, port."""
    handler = grpc.method_handlers_generic_handler(
        "envoy.service.discovery.v3.AggregatedDiscoveryService",
        {
            "StreamAggregatedResources": grpc.stream_stream_rpc_method_handler(
                floor.stream,
                request_deserializer=DiscoveryRequest.FromString,
                response_serializer=bytes,  # already encoded
            )
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(address)
    await server.start()
    return server, port


async def serve(port: int, resources: FloorResources) -> None:
    floor = FloorServer(resources)
    server, _ = await start_server(floor, f"127.0.0.1:{port}")
    loop = asyncio.get_running_loop()
    control = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(control), sys.stdin)
    # One line per change, "NAME PORT"; end of input stops the server.
    while line := await control.readline():
        name, port_text = line.decode().split()
        floor.flip(name, int(port_text))
    await server.stop(1)


# --- one floor phase ------------------------------------------------------------------------


@dataclass
class FloorWorkload(prop.Workload):
    """The workload's state, changed by telling the floor server (no file is written);
    quacks like `propagation.Workload` for `measure_changes`."""

    control: IO[bytes] | None = None

    def change(self, i: int) -> int:
        self.current[i] = self.ports[1] if self.current[i] == self.ports[0] else self.ports[0]
        assert self.control is not None
        self.control.write(f"{cluster_name(i)} {self.current[i]}\n".encode())
        self.control.flush()
        return self.current[i]


def run_floor(args: argparse.Namespace, workdir: Path) -> prop.Figures:
    figures = prop.Figures()
    workload = prop.written_workload(FloorWorkload, args, workdir)
    resources_path = workdir / "floor-resources.pickle"
    resources = floor_resources(workload, workdir / "other")
    resources_path.write_bytes(pickle.dumps((resources.types, resources.forms)))
    upstreams = prop.start_upstreams(workdir, args.envoys, args.services, workload.ports)
    server: subprocess.Popen[bytes] | None = None
    envoys: list[EnvoyProcess] = []
    log_path = workdir / "floor.log"
    try:
        dns_ports = prop.wait_upstreams(upstreams, workdir)

        xds_port = prop.free_port()
        started = time.monotonic()
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(xds_port), str(resources_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log_path.open("wb"),
        )
        workload.control = server.stdin
        prop.wait_port(xds_port, 120, server)
        figures.startup_s = time.monotonic() - started
        figures.loads.append(prop.load())

        for k in range(args.envoys):
            envoys.append(prop.start_envoy(workdir, k, xds_port, dns_ports[k], False))
            if k == 0:
                figures.envoy_ready_s.append(prop.wait_envoy_ready(envoys[0], args.services))
                time.sleep(2)
                figures.idle_cpu_1 = prop.idle_cpu(server.pid, args.idle_seconds)
                figures.rss_1 = prop.rss_mib(server.pid)
        started_rest = time.monotonic()
        for envoy in envoys[1:]:
            prop.wait_envoy_ready(envoy, args.services)
        if len(envoys) > 1:
            figures.envoy_ready_s.append(time.monotonic() - started_rest)
        time.sleep(2)
        envoy_pids = [e.pid for e in envoys if e.pid is not None]
        before = [prop.main_thread_cpu_seconds(pid) for pid in envoy_pids]
        figures.idle_cpu_all = prop.idle_cpu(server.pid, args.idle_seconds)
        figures.envoy_idle_cpu_ms_per_s = statistics.mean(
            (prop.main_thread_cpu_seconds(pid) - b) * 1000 / args.idle_seconds
            for pid, b in zip(envoy_pids, before, strict=True)
        )
        figures.rss_all = prop.rss_mib(server.pid)
        figures.loads.append(prop.load())

        for envoy in envoys:
            prop.wait_listening(envoy)
        asyncio.run(prop.measure_changes(args, workload, figures, log_path, envoy_pids, server.pid))
        with contextlib.suppress(Exception):
            figures.cds_update_duration = prop.cds_update_duration(envoys[0])
        figures.loads.append(prop.load())
    finally:
        with prop.ThreadPoolExecutor(max(1, len(envoys))) as pool:
            list(pool.map(prop._stop_envoy, envoys))
        if server is not None and server.stdin is not None:
            with contextlib.suppress(OSError):
                server.stdin.close()  # end of input: the server stops
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(5)
        prop.stop(server)
        prop.stop(upstreams)
    nacks = log_path.read_text(errors="replace").count("NACK") if log_path.exists() else 0
    figures.failures.extend(["the floor server was NACKed"] * nacks)
    return figures


# --- the interleaved comparison -------------------------------------------------------------


def compare(args: argparse.Namespace) -> int:
    per_phase = copy.copy(args)
    per_phase.changes = max(1, -(-args.changes // args.rounds))
    print(
        f"N = {args.services:,}, {args.envoys} Envoys, {args.rounds} round(s) of dragoman "
        f"(SotW ADS) then the SotW floor, {per_phase.changes} changes per phase; {prop.load()}",
        flush=True,
    )
    dragoman_rounds: list[prop.Figures] = []
    floor_rounds: list[prop.Figures] = []
    for r in range(args.rounds):
        print(f"round {r + 1}: dragoman ...", flush=True)
        with prop.workspace() as workdir:
            dragoman_rounds.append(prop.run(per_phase, workdir, False))
        print(f"round {r + 1}: SotW floor ...", flush=True)
        with prop.workspace() as workdir:
            floor_rounds.append(run_floor(per_phase, workdir))
    report(args, dragoman_rounds, floor_rounds)
    return 0


def pooled(rounds: list[prop.Figures]) -> dict[str, float]:
    changes = [c for f in rounds for c in f.changes]
    median, p90, p99 = prop.quantiles(changes)
    envoy_cpu = [c for f in rounds for c in f.envoy_cpu_ms]
    server_cpu = [c for f in rounds for c in f.dragoman_cpu_ms]
    return {
        "change -> all Envoys answer, median (ms)": median * 1000,
        "change -> all Envoys answer, p90 (ms)": p90 * 1000,
        "change -> all Envoys answer, p99 (ms)": p99 * 1000,
        "change -> one Envoy answers, median (ms)": prop.quantiles(
            [c for f in rounds for c in f.per_envoy]
        )[0]
        * 1000,
        # Raw: from the write until that Envoy answered, its idle work included.
        "each Envoy's main thread per change, median (ms)": prop.quantiles(envoy_cpu)[0],
        "each Envoy's main thread per change, p90 (ms)": prop.quantiles(envoy_cpu)[1],
        "each Envoy's main thread idle (ms/s)": statistics.mean(
            f.envoy_idle_cpu_ms_per_s for f in rounds
        ),
        "control-plane CPU per change, median (ms)": prop.quantiles(server_cpu)[0],
        "changes measured": float(len(changes)),
        "non-200 answers (and NACKs) during changes": float(sum(len(f.failures) for f in rounds)),
    }


def report(
    args: argparse.Namespace, dragoman_rounds: list[prop.Figures], floor_rounds: list[prop.Figures]
) -> None:
    for r, figures in enumerate(dragoman_rounds):
        prop.report(f"round {r + 1}: dragoman SotW", args, figures)
    for r, figures in enumerate(floor_rounds):
        prop.report(
            f"round {r + 1}: SotW floor (the 'dragoman' lines: the floor server)", args, figures
        )
    ours, floor = pooled(dragoman_rounds), pooled(floor_rounds)
    print(
        f"\n== dragoman SotW vs the SotW floor: N = {args.services:,}, {args.envoys} Envoys, "
        f"{args.rounds} interleaved round(s) =="
    )
    prop.print_ratios(
        ("dragoman", "floor", "d/floor"),
        ours,
        floor,
        lambda name: name.startswith(("changes", "non-200")),
    )
    cores = os.cpu_count() or 1
    per_envoy = floor["each Envoy's main thread per change, median (ms)"]
    print(
        f"(the floor: {args.envoys} Envoys x {per_envoy:.0f} ms of main thread on {cores} "
        f"cores is {args.envoys * per_envoy / min(cores, args.envoys):.0f} ms of CPU per change)"
    )
    loads = [load for f in [*dragoman_rounds, *floor_rounds] for load in f.loads]
    print(f"load average during the run: {'; '.join(loads)}; at the end: {prop.load()}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sotw-floor",
        action="store_true",
        help="interleave dragoman (SotW) with an ideal SotW server serving the same bytes "
        "(--rounds pairs) and print dragoman's figures as ratios to it",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "RESOURCES"), required=True)
    args = parser.parse_args(argv)
    port, path = args.serve
    types, forms = pickle.loads(Path(path).read_bytes())
    asyncio.run(serve(int(port), FloorResources(types, forms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
