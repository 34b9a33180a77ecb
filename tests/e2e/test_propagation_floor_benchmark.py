"""benchmarks/propagation.py --sotw-floor: the ideal SotW server serves the very bytes
`dragoman serve` serves for the workload, pushes a change as one new CDS response to every
stream, and a floor phase measures changes through a real Envoy."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import grpc
import pytest
from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.base_pb2 import Node
from envoy.config.listener.v3.listener_pb2 import Listener

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE
from tests.support.harness import DragomanProcess, free_port
from tests.support.xds_client import Received, XdsClient

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NODE = Node(id="floor-test", cluster="default/bench")


@pytest.fixture(scope="module")
def floor() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHMARKS))  # the floor imports propagation.py beside it
    try:
        import propagation_floor

        yield propagation_floor
    finally:
        sys.path.remove(str(BENCHMARKS))


def digests(bodies: dict[str, bytes]) -> dict[str, str]:
    return {name: hashlib.sha256(body).hexdigest() for name, body in bodies.items()}


async def fetch_all(address: str, endpoints: list[str]) -> dict[str, Received]:
    """CDS and LDS, then EDS (of `endpoints`) and RDS (of the listener's routes), each ACKed,
    over one ADS stream."""
    channel = grpc.aio.insecure_channel(address)
    client = XdsClient(channel, NODE)
    received: dict[str, Received] = {}
    try:
        for type_url in (CLUSTER, LISTENER):
            await client.subscribe(type_url)
            received[type_url] = await client.receive_acked()
        await client.subscribe(ENDPOINT, endpoints)
        received[ENDPOINT] = await client.receive_acked()
        await client.subscribe(ROUTE, [next(iter(received[LISTENER].resources))])
        received[ROUTE] = await client.receive_acked()
        await client.nothing()
    finally:
        client.cancel()
        await channel.close()
    return received


def test_the_floor_serves_what_dragoman_serves(floor: ModuleType, tmp_path: Path) -> None:
    prop = floor.prop
    workload = prop.Workload(
        tmp_path / "manifests", 4, 10080, (10081, 10082), pod_backed=True, one_file=False
    )
    workload.write_all()
    resources = floor.floor_resources(workload, tmp_path / "other")
    assert not (tmp_path / "other").exists()
    # Both forms of every ExternalName Service's cluster, and only of those.
    assert sorted(resources.forms) == ["default/svc0/http", "default/svc2/http"]
    for forms in resources.forms.values():
        assert sorted(forms) == [10081, 10082]
        assert forms[10081] != forms[10082]

    config = tmp_path / "defaults.yaml"
    config.write_text("")  # the benchmark's dragoman runs with the defaults
    dragoman = DragomanProcess(
        workload.root,
        f"127.0.0.1:{free_port()}",
        tmp_path / "dragoman.log",
        ("--config", str(config)),
    ).start()
    try:
        served = asyncio.run(fetch_all(dragoman.xds_address, ["default/svc1/10081"]))
    finally:
        dragoman.stop()

    async def from_the_floor() -> dict[str, Received]:
        server, port = await floor.start_server(floor.FloorServer(resources), "127.0.0.1:0")
        try:
            return await fetch_all(f"127.0.0.1:{port}", ["default/svc1/10081"])
        finally:
            await server.stop(None)

    floored = asyncio.run(from_the_floor())
    for type_url in (CLUSTER, LISTENER, ROUTE):
        assert served[type_url].resources == digests(resources.types[type_url])
        assert floored[type_url].resources == served[type_url].resources
    assert served[ENDPOINT].resources == floored[ENDPOINT].resources
    assert list(floored[ENDPOINT].resources) == ["default/svc1/10081"]


def test_a_change_is_one_cds_response_to_every_stream(floor: ModuleType) -> None:
    def cluster(name: str, port: int) -> bytes:
        return Cluster(name=name, alt_stat_name=f"on {port}").SerializeToString()

    names = [f"default/svc{i}/http" for i in range(3)]
    bodies = {name: cluster(name, 1) for name in names}
    resources = floor.FloorResources(
        {CLUSTER: bodies, LISTENER: {"l": Listener(name="l").SerializeToString()}},
        {name: {1: cluster(name, 1), 2: cluster(name, 2)} for name in names},
    )
    server_side = floor.FloorServer(resources)

    async def scenario() -> None:
        server, port = await floor.start_server(server_side, "127.0.0.1:0")
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        clients = [XdsClient(channel, NODE) for _ in range(2)]
        try:
            first = []
            for client in clients:
                await client.subscribe(CLUSTER)
                first.append(await client.receive_acked())
            assert first[0].resources == digests(bodies)
            server_side.flip("default/svc1/http", 2)
            for client in clients:
                pushed = await client.receive()
                assert pushed.version != first[0].version
                assert pushed.resources == digests({**bodies, names[1]: cluster(names[1], 2)})
                # An ACK of it asks for nothing more; nor does a stale ACK of the first.
                await client.send_raw(
                    floor.DiscoveryRequest(
                        type_url=CLUSTER, version_info=first[0].version, response_nonce="r0"
                    )
                )
                await client.ack(pushed)
                await client.nothing()
            # A NACK is counted and not answered with the same response again.
            server_side.flip("default/svc1/http", 1)
            pushed = await clients[0].receive()
            await clients[0].nack(pushed, "rejected")
            await clients[0].nothing()
            assert server_side.nacks == 1
            await clients[1].receive_acked()
        finally:
            for client in clients:
                client.cancel()
            await channel.close()
            await server.stop(None)

    asyncio.run(scenario())


def test_a_floor_phase_measures_changes_through_real_envoy(
    floor: ModuleType, tmp_path: Path
) -> None:
    args = argparse.Namespace(
        services=6,
        envoys=1,
        changes=2,
        idle_seconds=0.2,
        probe_interval=0.005,
        pause=0.2,
        pod_backed=True,
        one_file=False,
    )
    figures = floor.run_floor(args, tmp_path)
    assert len(figures.changes) == 2
    assert all(0 < seconds < 30 for seconds in figures.changes)
    assert figures.failures == []  # no non-200 answer, no NACK
    assert len(figures.envoy_cpu_ms) == 2
    assert len(figures.dragoman_cpu_ms) == 2  # the floor server's own
