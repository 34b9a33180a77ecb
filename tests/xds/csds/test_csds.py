"""CSDS (ClientStatusDiscoveryService) and `dragoman clients`, against real streams on loopback."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from typing import Any

import grpc
import pytest
import yaml
from envoy.admin.v3.config_dump_shared_pb2 import ClientResourceStatus
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import (
    ClientConfig,
    ClientStatusRequest,
    ClientStatusResponse,
    ConfigStatus,
)
from envoy.type.matcher.v3.node_pb2 import NodeMatcher
from envoy.type.matcher.v3.string_pb2 import StringMatcher

from dragoman import cli
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, Snapshot
from dragoman.xds.csds.csds_client import client_rows, format_table
from dragoman.xds.csds.csds_service import CONNECTION_KEY
from dragoman.xds.protocol.resource_status import ClientStatus
from dragoman.xds.protocol.resource_status import ConfigStatus as ClientConfigStatus
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from tests.support.xds_builders import (
    ack,
    eds_cluster,
    endpoints,
    nack,
    names_in,
    request,
    snapshot,
)
from tests.support.xds_client import XdsClient, xds_channel, xds_endpoint

ENVOY = Node(id="envoy-1", cluster="gateways")


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def base() -> Snapshot:
    return snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
    )


def cache_with(snap: Snapshot) -> SnapshotCache:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    cache.set_snapshots({ALL_GATEWAYS: snap})
    return cache


async def fetch(
    channel: grpc.aio.Channel, request: ClientStatusRequest | None = None
) -> ClientStatusResponse:
    stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
    response: ClientStatusResponse = await stub.FetchClientStatus(
        request or ClientStatusRequest(), timeout=5
    )
    return response


def entries(config: ClientConfig) -> dict[tuple[str, str], ClientConfig.GenericXdsConfig]:
    return {(e.type_url, e.name): e for e in config.generic_xds_configs}


async def settled(channel: grpc.aio.Channel, check: Callable[[ClientStatusResponse], bool]) -> Any:
    """Fetch until `check` holds (ACKs reach the server on their own time)."""
    for _ in range(200):
        response = await fetch(channel)
        if check(response):
            return response
        await asyncio.sleep(0.02)
    raise AssertionError(f"CSDS never settled: {response}")


def all_acked(response: ClientStatusResponse) -> bool:
    return bool(response.config) and all(
        e.client_status == ClientResourceStatus.ACKED
        for c in response.config
        for e in c.generic_xds_configs
    )


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_csds_reports_acked_versions_per_resource(delta: bool) -> None:
    async def scenario() -> None:
        snap = base()
        async with xds_channel(cache_with(snap)) as channel:
            client = XdsClient(channel, ENVOY, delta=delta)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            await client.subscribe(ENDPOINT, ["a"])
            await client.receive_acked()
            response = await settled(channel, all_acked)
            (config,) = response.config
            assert config.node.id == "envoy-1" and config.node.cluster == "gateways"
            found = entries(config)
            assert set(found) == {(CLUSTER, "a"), (CLUSTER, "b"), (ENDPOINT, "a")}
            for (type_url, name), entry in found.items():
                assert entry.config_status == ConfigStatus.SYNCED
                resource = snap.of_type(type_url).resources[name]
                # SotW: the version_info the client ACKed; delta: the resource's own version.
                expected = resource.digest if delta else snap.of_type(type_url).version
                assert entry.version_info == expected
                assert entry.xds_config.value == resource.body
            client.cancel()

    run(scenario)


def test_csds_after_a_delta_reconnect_reports_what_the_client_already_held_as_acked() -> None:
    # An Envoy reconnecting (another replica took over) names what it holds in
    # initial_resource_versions and is sent nothing it already has: it accepted all of it.
    async def scenario() -> None:
        snap = base()
        held = {name: r.digest for name, r in snap.of_type(CLUSTER).resources.items()}
        async with xds_channel(cache_with(snap)) as channel:
            client = XdsClient(channel, ENVOY, delta=True, initial_versions={CLUSTER: held})
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            response = await settled(channel, all_acked)
            found = entries(response.config[0])
            assert {name for _, name in found} == {"a", "b"}
            for (_, name), entry in found.items():
                assert entry.config_status == ConfigStatus.SYNCED
                assert entry.version_info == held[name]
            client.cancel()

    run(scenario)


@pytest.mark.parametrize("delta", [False, True], ids=["sotw", "delta"])
def test_csds_reports_nack_with_the_error_and_rejected_version(delta: bool) -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, ENVOY, delta=delta)
            await client.subscribe(CLUSTER)
            accepted = await client.receive_acked()
            await settled(channel, all_acked)  # the ACK is in before the push
            bad = snapshot(clusters=[eds_cluster("a", timeout_s=99), eds_cluster("b")])
            cache.set_snapshots({ALL_GATEWAYS: bad})
            await client.nack(await client.receive(), "cluster a: connect_timeout too long")
            response = await settled(
                channel,
                lambda r: any(
                    e.client_status == ClientResourceStatus.NACKED
                    for e in r.config[0].generic_xds_configs
                ),
            )
            found = entries(response.config[0])
            nacked = found[(CLUSTER, "a")]
            assert nacked.config_status == ConfigStatus.ERROR
            assert nacked.error_state.details == "cluster a: connect_timeout too long"
            assert nacked.error_state.version_info == bad.of_type(CLUSTER).version
            # The client still runs what it accepted before.
            expected = accepted.resources["a"] if delta else accepted.version
            assert nacked.version_info == expected
            # "b" came again unchanged in the rejected (full-state) response: not rejected.
            kept = found[(CLUSTER, "b")]
            assert kept.client_status == ClientResourceStatus.ACKED
            assert kept.config_status == ConfigStatus.SYNCED
            rows = client_rows(response)
            assert [(r.type, r.status, r.error) for r in rows] == [
                ("CDS", "nacked", "cluster a: connect_timeout too long")
            ]
            client.cancel()

    run(scenario)


def test_csds_reports_stale_and_does_not_exist() -> None:
    async def scenario() -> None:
        cache = cache_with(base())
        async with xds_channel(cache) as channel:
            client = XdsClient(channel, ENVOY)
            await client.subscribe(ENDPOINT, ["a", "ghost"])
            await client.receive_acked()
            await settled(channel, lambda r: bool(r.config))
            # A push the client has not ACKed yet: it runs older content.
            cache.set_snapshots({ALL_GATEWAYS: snapshot(assignments=[endpoints("a", "10.0.0.9")])})
            await client.receive()
            found = entries((await fetch(channel)).config[0])
            assert found[(ENDPOINT, "a")].config_status == ConfigStatus.STALE
            assert found[(ENDPOINT, "a")].client_status == ClientResourceStatus.ACKED
            ghost = found[(ENDPOINT, "ghost")]
            assert ghost.client_status == ClientResourceStatus.DOES_NOT_EXIST
            client.cancel()

    run(scenario)


def test_csds_merges_the_per_type_streams_of_one_node() -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            clusters = XdsClient(channel, ENVOY, type_url=CLUSTER)
            points = XdsClient(channel, ENVOY, type_url=ENDPOINT, delta=True)
            await clusters.subscribe(CLUSTER)
            await clusters.receive_acked()
            await points.subscribe(ENDPOINT, ["b"])
            await points.receive_acked()
            response = await settled(
                channel, lambda r: all_acked(r) and len(r.config[0].generic_xds_configs) == 3
            )
            assert [c.node.id for c in response.config] == ["envoy-1"]
            clusters.cancel()
            points.cancel()

    run(scenario)


def test_csds_node_matchers_and_excluded_contents() -> None:
    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            clients = [XdsClient(channel, Node(id=name)) for name in ("gw-1", "gw-2", "side")]
            for client in clients:
                await client.subscribe(CLUSTER)
                await client.receive_acked()
            await settled(channel, lambda r: len(r.config) == 3)

            async def ids(*matchers: StringMatcher) -> list[str]:
                request = ClientStatusRequest(
                    node_matchers=[NodeMatcher(node_id=m) for m in matchers],
                    exclude_resource_contents=True,
                )
                response = await fetch(channel, request)
                for config in response.config:
                    assert not any(e.HasField("xds_config") for e in config.generic_xds_configs)
                return sorted(c.node.id for c in response.config)

            assert await ids(StringMatcher(exact="side")) == ["side"]
            assert await ids(StringMatcher(prefix="GW-", ignore_case=True)) == ["gw-1", "gw-2"]
            regex = StringMatcher()
            regex.safe_regex.regex = "gw-[2-9]"
            assert await ids(regex, StringMatcher(suffix="de")) == ["gw-2", "side"]
            with_metadata = NodeMatcher()
            with_metadata.node_metadatas.add()
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await fetch(channel, ClientStatusRequest(node_matchers=[with_metadata]))
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "node_metadatas" in (raised.value.details() or "")
            for client in clients:
                client.cancel()

    run(scenario)


def test_csds_regex_is_re2_and_bounded() -> None:
    """`(a+)+b` backtracks for seconds in Python's re over a 28-character node id; RE2 (what
    Envoy uses) answers at once. Patterns Envoy refuses are refused with INVALID_ARGUMENT."""
    hostile_id = "a" * 28

    async def scenario() -> None:
        async with xds_channel(cache_with(base())) as channel:
            clients = [XdsClient(channel, Node(id=name)) for name in (hostile_id, "gw-1")]
            for client in clients:
                await client.subscribe(CLUSTER)
                await client.receive_acked()
            await settled(channel, lambda r: len(r.config) == 2)

            def regex(pattern: str) -> ClientStatusRequest:
                matcher = StringMatcher()
                matcher.safe_regex.regex = pattern
                return ClientStatusRequest(node_matchers=[NodeMatcher(node_id=matcher)])

            loop = asyncio.get_running_loop()
            started = loop.time()
            response = await fetch(channel, regex("(a+)+b"))
            assert response.config == []  # nothing ends in b
            response = await fetch(channel, regex("(a+)+"))
            assert [c.node.id for c in response.config] == [hostile_id]
            # Generous: Python's re takes seconds on the first pattern alone.
            assert loop.time() - started < 2.0
            for pattern, detail in (
                ("(a", "invalid RE2"),
                ("a{1000}", "too complex"),
                ("(?=a)", "invalid RE2"),  # lookahead: Python re syntax, not RE2
                ("x" * 2000, "longer than"),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as raised:
                    await fetch(channel, regex(pattern))
                assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert detail in (raised.value.details() or ""), pattern
            many = ClientStatusRequest(
                node_matchers=[NodeMatcher(node_id=StringMatcher(exact="x"))] * 65
            )
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await fetch(channel, many)
            assert "at most 64 node_matchers" in (raised.value.details() or "")
            for client in clients:
                client.cancel()

    run(scenario)


def test_csds_stream_answers_each_request() -> None:
    async def scenario() -> None:
        registry = StreamRegistry()
        async with xds_channel(cache_with(base()), registry=registry) as channel:
            client = XdsClient(channel, ENVOY)
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(channel)
            call = stub.StreamClientStatus()
            for _ in range(2):
                await call.write(ClientStatusRequest())
                response = await asyncio.wait_for(call.read(), 5)
                assert [c.node.id for c in response.config] == ["envoy-1"]
            call.cancel()
            client.cancel()

    run(scenario)


def test_clients_command_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    async def scenario() -> int:
        cache = cache_with(base())
        async with xds_endpoint(cache) as (address, channel):
            envoy = Node(id="envoy-good", cluster="gateways", user_agent_name="envoy")
            envoy.user_agent_build_version.version.major_number = 1
            envoy.user_agent_build_version.version.minor_number = 33
            envoy.user_agent_build_version.version.patch = 2
            good = XdsClient(channel, envoy)
            await good.subscribe(CLUSTER)
            await good.receive_acked()
            bad = XdsClient(channel, Node(id="envoy-bad"), delta=True)
            await bad.subscribe(CLUSTER)
            await bad.nack(await bad.receive(), "no, thanks")
            await settled(channel, lambda r: len(r.config) == 2 and not all_acked(r))
            return await asyncio.to_thread(cli.main, ["clients", "--xds-address", address])

    code = asyncio.run(asyncio.wait_for(scenario(), 60))
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "CLIENT", "TYPE", "VERSION", "STATUS", "COUNT", "ERROR"]
    good_row = next(line for line in lines if line.startswith("envoy-good"))
    bad_row = next(line for line in lines if line.startswith("envoy-bad"))
    assert "(gateways)" in good_row and "CDS" in good_row and " acked " in good_row
    assert " envoy 1.33.2 " in good_row
    assert bad_row.split()[1] == "-"  # a node that names no agent
    assert " nacked " in bad_row and bad_row.endswith("no, thanks")


def test_clients_command_reports_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["clients", "--xds-address", "127.0.0.1:1", "--timeout", "1"]) == 1
    assert "cannot get client status from 127.0.0.1:1" in capsys.readouterr().err


def test_format_table_per_resource_rows() -> None:
    response = ClientStatusResponse(
        config=[
            ClientConfig(
                node=Node(id="n", user_agent_name="gRPC Go", user_agent_version="1.70.0"),
                generic_xds_configs=[
                    ClientConfig.GenericXdsConfig(
                        type_url=CLUSTER,
                        name="a",
                        version_info="0123456789abcdef0123",
                        client_status=ClientResourceStatus.ACKED,
                        config_status=ConfigStatus.SYNCED,
                    )
                ],
            )
        ]
    )
    table = format_table(client_rows(response, per_resource=True), per_resource=True)
    assert table.splitlines() == [
        "NODE      CLIENT          TYPE  RESOURCE  VERSION           STATUS  COUNT  ERROR",
        "n [gRPC]  gRPC Go 1.70.0  CDS   a         0123456789abcdef  acked   1",
    ]


def test_sotw_nack_marks_only_the_resources_that_changed() -> None:
    # A full-state response carries every cluster; only those whose content differs from
    # what the client ACKed can be what it rejected.
    stream = SotwStream()
    first = snapshot(clusters=[eds_cluster(n) for n in "abc"])
    (cds,) = stream.on_request(request(CLUSTER, node=ENVOY), first)
    stream.on_request(ack(cds), first)
    changed = [eds_cluster("a", timeout_s=99), eds_cluster("b"), eds_cluster("c"), eds_cluster("d")]
    bad = snapshot(clusters=changed)
    (pushed,) = stream.on_snapshot(bad)
    stream.on_request(nack(pushed, "a: bad", kept_version=cds.version_info), bad)
    statuses = {s.name: (s.client_status, s.config_status) for s in stream.resource_statuses()}
    assert statuses == {
        "a": (ClientStatus.NACKED, ClientConfigStatus.ERROR),
        "b": (ClientStatus.ACKED, ClientConfigStatus.SYNCED),
        "c": (ClientStatus.ACKED, ClientConfigStatus.SYNCED),
        "d": (ClientStatus.NACKED, ClientConfigStatus.ERROR),  # new: it may be the rejected one
    }


def test_sotw_eds_nack_marks_only_the_resources_that_changed() -> None:
    stream = SotwStream()
    first = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b")],
        assignments=[endpoints("a", "10.0.0.1"), endpoints("b", "10.0.0.2")],
    )
    (cds,) = stream.on_request(request(CLUSTER, node=ENVOY), first)
    (eds,) = stream.on_request(request(ENDPOINT, ["a", "b"]), first)
    stream.on_request(ack(cds), first)
    stream.on_request(ack(eds, ["a", "b"]), first)
    # Cluster "b" changes, so its CLA is resent unchanged next to the changed CLA "a".
    moved = snapshot(
        clusters=[eds_cluster("a"), eds_cluster("b", timeout_s=5)],
        assignments=[endpoints("a", "10.0.0.9"), endpoints("b", "10.0.0.2")],
    )
    cds, eds = stream.on_snapshot(moved)
    assert names_in(eds) == ["a", "b"]
    stream.on_request(ack(cds), moved)
    stream.on_request(nack(eds, "a: bad", ["a", "b"], kept_version=eds.version_info), moved)
    statuses = {
        s.name: s.client_status for s in stream.resource_statuses() if s.type_url == ENDPOINT
    }
    assert statuses == {"a": ClientStatus.NACKED, "b": ClientStatus.ACKED}


def test_client_agent_names_what_the_node_says_it_is() -> None:
    from dragoman.xds.csds.csds_client import client_agent

    envoy = Node(user_agent_name="envoy")
    envoy.user_agent_build_version.version.major_number = 1
    envoy.user_agent_build_version.version.minor_number = 34
    assert client_agent(envoy) == "envoy 1.34.0"
    assert client_agent(Node(user_agent_name="grpc-node-js", user_agent_version="1.13.0")) == (
        "grpc-node-js 1.13.0"
    )
    assert client_agent(Node()) == "-"
    assert "\n" not in client_agent(Node(user_agent_name="evil\nname"))


def test_config_command_shows_what_one_node_holds(capsys: pytest.CaptureFixture[str]) -> None:
    """`dragoman config NODE`: that node only, its client's version, when it connected and
    from where, the replica answering, and its resources by type; a node that is not
    connected is an error naming the replica."""

    async def scenario() -> tuple[int, int, int]:
        cache = cache_with(base())
        registry = StreamRegistry(replica="dragoman-7f9c")
        async with xds_endpoint(cache, registry=registry) as (address, channel):
            envoy = Node(id="envoy-one", cluster="gateways", user_agent_name="envoy")
            envoy.user_agent_build_version.version.minor_number = 40
            # What a client puts under dragoman's key is replaced, never shown.
            envoy.metadata.fields[CONNECTION_KEY].struct_value.update({"peer": "forged"})
            one = XdsClient(channel, envoy)
            await one.subscribe(CLUSTER)
            await one.receive_acked()
            await one.subscribe(ENDPOINT, ["a"])
            await one.receive_acked()
            other = XdsClient(channel, Node(id="envoy-other"))
            await other.subscribe(CLUSTER)
            await other.receive_acked()
            await settled(channel, lambda r: len(r.config) == 2 and all_acked(r))
            text = await asyncio.to_thread(
                cli.main, ["config", "envoy-one", "--xds-address", address]
            )
            yaml_code = await asyncio.to_thread(
                cli.main, ["config", "envoy-one", "--xds-address", address, "-o", "yaml"]
            )
            missing = await asyncio.to_thread(
                cli.main, ["config", "envoy-gone", "--xds-address", address]
            )
            one.cancel()
            other.cancel()
            return text, yaml_code, missing

    text, yaml_code, missing = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert (text, yaml_code, missing) == (0, 0, 1)
    out, err = capsys.readouterr()
    shown, rendered = out.split("---\n", 1)
    lines = shown.splitlines()
    assert lines[0] == "node       envoy-one (gateways)"
    assert lines[1] == "client     envoy 0.40.0"
    assert re.fullmatch(
        r"connected  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ from ipv\d:\S+ \(1 stream\)", lines[2]
    ), lines[2]
    assert "forged" not in out
    assert lines[3] == "replica    dragoman-7f9c"
    assert "CDS: 2 resources" in lines and "EDS: 1 resources" in lines
    assert any(line.split()[:1] == ["a"] and line.split()[2] == "acked" for line in lines)
    assert "envoy-other" not in out
    document = yaml.safe_load(rendered)
    assert document["replica"] == "dragoman-7f9c"
    assert [c["name"] for c in document["CDS"]] == ["a", "b"]
    assert document["CDS"][0]["resource"]["name"] == "a"
    assert document["EDS"][0]["resource"]["cluster_name"] == "a"
    assert "node 'envoy-gone' is not connected to replica dragoman-7f9c" in err
