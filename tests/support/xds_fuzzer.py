"""Hostile xDS and CSDS clients against a live server, and a well-behaved one timed meanwhile.

Hostile clients send seeded random `DiscoveryRequest`s, `DeltaDiscoveryRequest`s (ADS and
per type), CSDS requests with random and pathological matchers, and raw bytes that decode
to no message, on streams they open and drop at random. The well-behaved client meanwhile
connects the way a fresh Envoy does (a new ADS stream, a CDS request, the response) and asks
CSDS, and every probe's latency is recorded: the server must keep answering it promptly.

Used by tests/fuzz (a few seconds, seeded) and benchmarks/fuzz.py (minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
)
from envoy.service.status.v3.csds_pb2 import ClientStatusRequest, ClientStatusResponse
from envoy.type.matcher.v3.node_pb2 import NodeMatcher
from envoy.type.matcher.v3.string_pb2 import StringMatcher
from google.protobuf import struct_pb2
from google.rpc.status_pb2 import Status

from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE

SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
TYPES = (CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET)
ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/"
METHODS = {
    "ads": (ADS + "StreamAggregatedResources", False),
    "ads-delta": (ADS + "DeltaAggregatedResources", True),
    "cds": ("/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters", False),
    "eds-delta": ("/envoy.service.endpoint.v3.EndpointDiscoveryService/DeltaEndpoints", True),
    "lds": ("/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners", False),
    "rds-delta": ("/envoy.service.route.v3.RouteDiscoveryService/DeltaRoutes", True),
}
CSDS = "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus"
HOSTILE_TEXT = (
    "",
    "a" * 28,  # with `(a+)+b`, seconds of backtracking for a regex engine that backtracks
    "\n",
    "a\r\nFORGED: log line",
    "\x00\x1b[2J",
    "\u202e\u2028",
    "(a+)+b",
    "x" * 100_000,
    "é" * 10_000,
    "*",
    "default/edge",
    "type.googleapis.com/",
    "type.googleapis.com/google.protobuf.Empty",
)
HOSTILE_REGEXES = (
    "(a+)+b",
    "(a|aa)+$",
    "(",
    "a{1000}",
    "(?=a)",
    "\\",
    "[",
    ".*" * 200,
    "x" * 5_000,
    "é+",
)


@dataclass
class XdsFuzzReport:
    requests: int = 0  # hostile messages sent
    streams: int = 0  # hostile streams opened
    errors: dict[str, int] = field(default_factory=dict)  # status codes the server answered
    baseline: list[float] = field(default_factory=list)  # probe latencies before the fuzz
    during: list[float] = field(default_factory=list)  # probe latencies during the fuzz
    failed_probes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        def figures(values: list[float]) -> str:
            if not values:
                return "no probes"
            ordered = sorted(values)
            p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
            return (
                f"{len(values)} probes, median {statistics.median(values) * 1000:.1f} ms, "
                f"p99 {p99 * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"
            )

        return (
            f"{self.requests} hostile messages on {self.streams} streams "
            f"(answers: {dict(sorted(self.errors.items()))}); well-behaved client: "
            f"before {figures(self.baseline)}; during {figures(self.during)}; "
            f"{len(self.failed_probes)} failed probes"
        )


def _identity(data: bytes) -> bytes:
    return data


def _random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return rng.choice(HOSTILE_TEXT)
    return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(0, 64)))


def _random_node(rng: random.Random) -> Node:
    node = Node(id=_random_text(rng), cluster=_random_text(rng))
    if rng.random() < 0.3:
        node.user_agent_name = rng.choice(("envoy", "grpc-python", "gRPC Go", _random_text(rng)))
    if rng.random() < 0.2:
        value = struct_pb2.Value()
        for _ in range(rng.choice((1, 10, 30))):  # nested Struct values
            outer = struct_pb2.Value()
            outer.list_value.values.append(value)
            value = outer
        node.metadata.fields["k"].CopyFrom(value)
    return node


def _names(rng: random.Random) -> list[str]:
    count = rng.choice((0, 1, 3, 100, 5_000))
    return [_random_text(rng)[:200] for _ in range(count)]


def _type_url(rng: random.Random) -> str:
    return rng.choice(TYPES) if rng.random() < 0.8 else _random_text(rng)[:300]


def sotw_request(rng: random.Random) -> DiscoveryRequest:
    request = DiscoveryRequest(type_url=_type_url(rng), resource_names=_names(rng))
    if rng.random() < 0.7:
        request.node.CopyFrom(_random_node(rng))
    if rng.random() < 0.5:
        request.version_info = _random_text(rng)[:1000]
        request.response_nonce = rng.choice(("1", "2", "0", _random_text(rng)[:1000]))
    if rng.random() < 0.3:
        request.error_detail.CopyFrom(Status(code=rng.randrange(-5, 20), message=_random_text(rng)))
    return request


def delta_request(rng: random.Random) -> DeltaDiscoveryRequest:
    request = DeltaDiscoveryRequest(
        type_url=_type_url(rng),
        resource_names_subscribe=_names(rng),
        resource_names_unsubscribe=_names(rng) if rng.random() < 0.3 else [],
    )
    if rng.random() < 0.7:
        request.node.CopyFrom(_random_node(rng))
    if rng.random() < 0.3:
        for name in _names(rng)[:100]:
            request.initial_resource_versions[name] = _random_text(rng)[:100]
    if rng.random() < 0.5:
        request.response_nonce = rng.choice(("1", "2", _random_text(rng)[:1000]))
    if rng.random() < 0.3:
        request.error_detail.CopyFrom(Status(code=rng.randrange(0, 20), message=_random_text(rng)))
    return request


def csds_request(rng: random.Random) -> ClientStatusRequest:
    request = ClientStatusRequest(exclude_resource_contents=rng.random() < 0.5)
    for _ in range(rng.choice((0, 1, 2, 65))):
        matcher = StringMatcher(ignore_case=rng.random() < 0.3)
        kind = rng.choice(("exact", "prefix", "suffix", "contains", "safe_regex", "safe_regex"))
        if kind == "safe_regex":
            matcher.safe_regex.regex = rng.choice(HOSTILE_REGEXES)
        else:
            setattr(matcher, kind, _random_text(rng))
        node_matcher = NodeMatcher(node_id=matcher)
        if rng.random() < 0.05:
            node_matcher.node_metadatas.add()
        request.node_matchers.append(node_matcher)
    return request


async def _hostile_stream(
    channel: grpc.aio.Channel, rng: random.Random, report: XdsFuzzReport
) -> None:
    kind = rng.choice((*METHODS, "raw", "csds", "csds"))
    report.streams += 1
    try:
        if kind == "csds":
            fetch = channel.unary_unary(
                CSDS,
                request_serializer=ClientStatusRequest.SerializeToString,
                response_deserializer=ClientStatusResponse.FromString,
            )
            report.requests += 1
            await fetch(csds_request(rng), timeout=10)
            _count(report, "OK")
            return
        method, delta = METHODS.get(kind, METHODS["ads"])
        if kind == "raw":
            call = channel.stream_stream(
                method, request_serializer=_identity, response_deserializer=_identity
            )()
            messages: list[object] = [
                rng.randbytes(rng.choice((1, 16, 1000, 100_000))) for _ in range(rng.randint(1, 3))
            ]
        else:
            response_type = DeltaDiscoveryResponse if delta else DiscoveryResponse
            request_type = DeltaDiscoveryRequest if delta else DiscoveryRequest
            call = channel.stream_stream(
                method,
                request_serializer=request_type.SerializeToString,
                response_deserializer=response_type.FromString,
            )()
            make = delta_request if delta else sotw_request
            messages = [make(rng) for _ in range(rng.randint(1, 6))]
        for message in messages:
            report.requests += 1
            await call.write(message)
            if rng.random() < 0.5:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(call.read(), 0.2)
        if rng.random() < 0.5:
            await call.done_writing()
            while await asyncio.wait_for(call.read(), 5) is not grpc.aio.EOF:
                pass
        else:
            call.cancel()
        _count(report, "OK")
    except grpc.aio.AioRpcError as error:
        _count(report, error.code().name)
    except asyncio.InvalidStateError:  # written to after the server ended the stream
        _count(report, "ended-by-server")
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        _count(report, "CANCELLED")  # grpc.aio reads a server-side cancel as this


def _count(report: XdsFuzzReport, code: str) -> None:
    report.errors[code] = report.errors.get(code, 0) + 1


async def probe(channel: grpc.aio.Channel, node: Node) -> float:
    """How long a fresh ADS stream takes to get its CDS response, plus a CSDS answer."""
    started = time.perf_counter()
    call = channel.stream_stream(
        METHODS["ads"][0],
        request_serializer=DiscoveryRequest.SerializeToString,
        response_deserializer=DiscoveryResponse.FromString,
    )()
    try:
        await call.write(DiscoveryRequest(type_url=CLUSTER, node=node))
        response = await asyncio.wait_for(call.read(), 10)
        assert isinstance(response, DiscoveryResponse) and response.resources, response
    finally:
        call.cancel()
    fetch = channel.unary_unary(
        CSDS,
        request_serializer=ClientStatusRequest.SerializeToString,
        response_deserializer=ClientStatusResponse.FromString,
    )
    await fetch(ClientStatusRequest(exclude_resource_contents=True), timeout=10)
    return time.perf_counter() - started


async def attack(address: str, *, seed: int, seconds: float, clients: int) -> XdsFuzzReport:
    """`clients` hostile clients on channels of their own, for `seconds`."""
    report = XdsFuzzReport()
    channels = [
        grpc.aio.insecure_channel(address, options=[("grpc.max_send_message_length", 64 << 20)])
        for _ in range(clients)
    ]
    deadline = time.monotonic() + seconds

    async def attacker(index: int) -> None:
        rng = random.Random(f"{seed}/{index}")
        while time.monotonic() < deadline:
            try:
                await asyncio.wait_for(_hostile_stream(channels[index], rng, report), 15)
            except TimeoutError:
                _count(report, "client-timeout")

    # One stream stays connected all along with the node id a backtracking regex chokes on,
    # so every `(a+)+b` CSDS matcher meets it.
    stayer = channels[0].stream_stream(
        METHODS["ads"][0],
        request_serializer=DiscoveryRequest.SerializeToString,
        response_deserializer=DiscoveryResponse.FromString,
    )()
    try:
        await stayer.write(DiscoveryRequest(type_url=CLUSTER, node=Node(id="a" * 28)))
        await asyncio.gather(*(attacker(i) for i in range(clients)))
    finally:
        stayer.cancel()
        for channel in channels:
            await channel.close()
    return report


async def fuzz_xds(
    address: str,
    *,
    seed: int,
    seconds: float,
    hostile_clients: int = 6,
    baseline_probes: int = 20,
    probe_interval: float = 0.1,
) -> XdsFuzzReport:
    """Baseline probes first, then `seconds` of hostile traffic with probes meanwhile.

    The hostile clients run in a process of their own, so making their messages does not
    delay the well-behaved client's probes: what is measured is the server.
    """
    node = Node(id="well-behaved", cluster="default/edge")
    good = grpc.aio.insecure_channel(address)
    baseline: list[float] = []
    during: list[float] = []
    failed: list[str] = []
    try:
        for _ in range(baseline_probes):
            baseline.append(await probe(good, node))
            await asyncio.sleep(probe_interval)
        attackers = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.xds_fuzzer",
            address,
            str(seed),
            str(seconds),
            str(hostile_clients),
            stdout=asyncio.subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        try:
            while attackers.returncode is None:
                try:
                    during.append(await probe(good, node))
                except Exception as error:  # a probe that fails is the finding
                    failed.append(repr(error)[:500])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(attackers.wait(), probe_interval)
            output, _ = await attackers.communicate()
        finally:
            if attackers.returncode is None:
                attackers.kill()
                await attackers.wait()
    finally:
        await good.close()
    if attackers.returncode != 0:
        raise RuntimeError(f"the hostile clients failed (exit {attackers.returncode})")
    report = XdsFuzzReport(**json.loads(output))
    report.baseline, report.during, report.failed_probes = baseline, during, failed
    return report


def main() -> None:
    address, seed, seconds, clients = sys.argv[1:5]
    report = asyncio.run(
        attack(address, seed=int(seed), seconds=float(seconds), clients=int(clients))
    )
    print(
        json.dumps(
            {"requests": report.requests, "streams": report.streams, "errors": report.errors}
        )
    )


if __name__ == "__main__":
    main()
