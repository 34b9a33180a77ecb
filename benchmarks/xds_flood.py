"""One flooding xDS client: what it costs the server, and what a well-behaved client sees.

    python benchmarks/xds_flood.py                      # 3,000 clusters, 20 s, delta flood
    python benchmarks/xds_flood.py --flood sotw --seconds 10
    python benchmarks/xds_flood.py --flooders 4
    python benchmarks/xds_flood.py --server-path OTHER_TREE   # serve with another checkout

The server runs in a child process (the real grpc.aio server and SnapshotCache, serving
`--clusters` EDS clusters and their CLAs). `--flooders` clients each open one ADS stream and
send requests as fast as the server takes them, reading every response: `delta` alternately
subscribes to and unsubscribes from one CLA (each subscription asks for the resource again,
so each is worth an answer); `sotw` re-sends its wildcard CDS request with the latest nonce;
`eds` re-sends a SotW EDS request naming every CLA (about 100 KiB at 3,000) with the latest
nonce.
Meanwhile one well-behaved delta client, subscribed to every cluster, subscribes to a CLA
every 0.2 s and times its answer.

Printed: requests the flooders sent and responses they got, the server's peak RSS (VmHWM)
and its CPU over the flood (1.0 = one core), and the well-behaved client's answer times
(median, p99, max). It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]

SERVER = """
import asyncio, sys
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.xds_builders import eds_cluster, endpoints, snapshot

async def main(clusters):
    names = [f"default/service-{i:05d}/8080" for i in range(clusters)]
    cache = SnapshotCache()
    cache.set_snapshots({ALL_GATEWAYS: snapshot(
        clusters=[eds_cluster(n) for n in names],
        assignments=[endpoints(n, "10.0.0.1") for n in names])})
    server = await start_xds_server(cache, "127.0.0.1:0")
    print(bound_port(server), flush=True)
    await asyncio.Event().wait()  # until terminated

asyncio.run(main(int(sys.argv[1])))
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cla(i: int) -> str:
    return f"default/service-{i:05d}/8080"


def flood(
    port: int, kind: str, stop: threading.Event, counts: list[int], clusters: int = 0
) -> None:
    """Sends as fast as gRPC takes requests; counts[0] sent, counts[1] received."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
    node = Node(id=f"flooder-{id(counts)}", cluster="edge")
    nonce = [""]
    every_cla = [cla(i) for i in range(clusters)]

    def requests() -> Iterator[DeltaDiscoveryRequest | DiscoveryRequest]:
        if kind == "delta":
            yield DeltaDiscoveryRequest(node=node, type_url=EDS, resource_names_subscribe=[cla(0)])
        elif kind == "eds":
            yield DiscoveryRequest(node=node, type_url=EDS, resource_names=every_cla)
        else:
            yield DiscoveryRequest(node=node, type_url=CDS)
        names = [cla(1)]
        while not stop.is_set():
            counts[0] += 1
            if kind == "sotw":
                yield DiscoveryRequest(type_url=CDS, response_nonce=nonce[0])
            elif kind == "eds":
                yield DiscoveryRequest(
                    type_url=EDS, resource_names=every_cla, response_nonce=nonce[0]
                )
            elif counts[0] % 2:
                yield DeltaDiscoveryRequest(type_url=EDS, resource_names_subscribe=names)
            else:
                yield DeltaDiscoveryRequest(type_url=EDS, resource_names_unsubscribe=names)

    call = (
        stub.DeltaAggregatedResources(requests())
        if kind == "delta"
        else stub.StreamAggregatedResources(requests())
    )
    try:
        for response in call:
            counts[1] += 1
            nonce[0] = response.nonce
    except grpc.RpcError:
        pass  # cancelled at the end
    finally:
        channel.close()


async def well_behaved(port: int, stop: asyncio.Event, latencies: list[float]) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS) as channel:
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources()
        await call.write(DeltaDiscoveryRequest(node=Node(id="calm", cluster="edge"), type_url=CDS))
        await call.read()  # every cluster
        i = 100
        while not stop.is_set():
            i += 1
            asked = time.monotonic()
            await call.write(DeltaDiscoveryRequest(type_url=EDS, resource_names_subscribe=[cla(i)]))
            while True:
                response = await call.read()
                if response.type_url == EDS:
                    break
            latencies.append(time.monotonic() - asked)
            await call.write(DeltaDiscoveryRequest(type_url=EDS, response_nonce=response.nonce))
            await asyncio.sleep(0.2)
        call.cancel()


async def run(args: argparse.Namespace, port: int, pid: int) -> None:
    stop = asyncio.Event()
    latencies: list[float] = []
    calm = asyncio.create_task(well_behaved(port, stop, latencies))
    await asyncio.sleep(2)
    cpu_before, started = cpu_seconds(pid), time.monotonic()
    # Each flooder in a process of its own: gRPC's sync and asyncio clients do not share one.
    floods = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--flood-only",
                str(port),
                args.flood,
                str(args.seconds),
                str(args.clusters),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.flooders)
    ]
    await asyncio.sleep(args.seconds)
    cpu = (cpu_seconds(pid) - cpu_before) / (time.monotonic() - started)
    stop.set()
    await asyncio.wait([calm], timeout=10)
    counts = [[int(n) for n in f.communicate(timeout=30)[0].split()] for f in floods]
    sent, received = sum(c[0] for c in counts), sum(c[1] for c in counts)
    ordered = sorted(latencies) or [float("nan")]
    print(
        f"{args.flood} flood x{args.flooders}, {args.clusters} clusters, {args.seconds:g} s: "
        f"sent {sent} requests, got {received} responses; server peak RSS "
        f"{peak_rss_mib(pid):.0f} MiB, CPU {cpu:.2f} cores; well-behaved client: median "
        f"{statistics.median(ordered) * 1000:.1f} ms, p99 "
        f"{ordered[int(len(ordered) * 0.99)] * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms "
        f"over {len(latencies)} answers"
    )


def flood_only(port: int, kind: str, seconds: float, clusters: int) -> None:
    """One flooder's process: floods for `seconds`, prints requests sent, responses got."""
    stop, counts = threading.Event(), [0, 0]
    thread = threading.Thread(target=flood, args=(port, kind, stop, counts, clusters), daemon=True)
    thread.start()
    time.sleep(seconds)
    stop.set()
    print(counts[0], counts[1], flush=True)


def main() -> None:
    if sys.argv[1:2] == ["--flood-only"]:
        flood_only(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clusters", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--flooders", type=int, default=1)
    parser.add_argument("--flood", choices=("delta", "sotw", "eds"), default="delta")
    parser.add_argument("--server-path", type=Path, default=ROOT, help="the tree to serve with")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{args.server_path}:{ROOT}"}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(args.clusters)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=args.server_path,  # `-c` puts the working directory first on the path
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        asyncio.run(run(args, port, server.pid))
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
