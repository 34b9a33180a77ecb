"""What one added host costs Envoy to apply, with routes scoped three ways.

    python benchmarks/route_apply.py                                  # R = 0 and 1,000
    python benchmarks/route_apply.py --routes 0 --routes 1000 --routes 3000 --samples 20
    python benchmarks/route_apply.py --designs rds,srds-delta --routes 3000
    python benchmarks/route_apply.py --constraints                    # what scoped RDS does

With R hostnames served on one listener, a new hostname is added and timed from the moment
the xDS server has it until the first 200 through Envoy (`--concurrency 1`), polling every
`--poll-ms` (1 ms) on one keep-alive connection, `--samples` times per R; each design runs
with a fresh Envoy. Designs (`--designs`, every one by default):

- `rds`: plain RDS over SotW ADS, one RouteConfiguration with R+1 virtual hosts re-sent whole
  (what `dragoman serve` does today); `rds-delta`: the same resource over delta ADS.
- `srds`, `srds-delta`: scoped RDS, the scope key taken from the Host header (`:authority`,
  split on ":" and element 0 taken, so a port is dropped); one ScopedRouteConfiguration and
  one small RouteConfiguration (fetched by RDS) per hostname. Adding a host is one new scope
  and its RouteConfiguration. Over SotW the scopes are a full-state type: every change
  re-sends all R+1 scopes (but not their route tables).
- `srds-inline`, `srds-inline-delta`: as `srds` and `srds-delta` with the RouteConfiguration
  inline in the scope (one resource per host, one round trip).
- `vhds-delta`: on-demand virtual hosts (VHDS, delta ADS only, with the
  `envoy.filters.http.on_demand` filter): the RouteConfiguration names no virtual host; the
  R existing ones are sent on Envoy's first (wildcard) VHDS request; an added host is sent
  only when Envoy asks for it, which the first request for that host makes it do.
- `vhds-push-delta`: as `vhds-delta` but the server pushes the added host at once.

Beside the time to the first 200, Envoy's own side: the time until Envoy ACKed every xDS
response the change caused (measured at the server: Envoy ACKs after it applied), the CPU
its main thread spent on the change (schedstat, where it applies xDS; its worker serves the
probes), its allocated memory (admin `/memory`) and RSS once R hosts are served, and the
time it took to load the R hosts. Ratios are to `rds` at the same R in the same run.

The xDS server is a minimal one in this process (grpcio's asyncio server, SotW and delta
ADS): resources are kept encoded, a change encodes only what changed. Every host has a
virtual host shaped like the one dragoman makes of gateway-api-bench's probe route: `/N` to
the backend with a request and a response header added, `/` to a missing backend (a 500).
The backend is `gateway_bench.py`'s echo server on 127.0.0.2.

`--constraints` starts one Envoy per question and prints what it answered: wildcard and
catch-all hosts under scoped RDS, Host header case and ports, VHDS over SotW ADS, the names
VHDS asks for and unknown hosts; then a proxyless gRPC client (grpcio) is offered an API
listener with scopes and one with RDS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gateway_bench as gb
import grpc
from envoy.config.core.v3.base_pb2 import HeaderValue, HeaderValueOption
from envoy.config.core.v3.config_source_pb2 import (
    AggregatedConfigSource,
    ApiVersion,
    ConfigSource,
)
from envoy.config.route.v3.route_components_pb2 import (
    DirectResponseAction,
    Route,
    RouteAction,
    RouteMatch,
    VirtualHost,
)
from envoy.config.route.v3.route_pb2 import RouteConfiguration, Vhds
from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration
from envoy.service.discovery.v3 import ads_pb2_grpc
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DeltaDiscoveryResponse,
    DiscoveryRequest,
    DiscoveryResponse,
    Resource,
)
from google.protobuf.any_pb2 import Any as AnyMessage
from propagation import _stop_envoy, free_port, main_thread_cpu_seconds, rss_mib, stop

from dragoman.demo.envoy import EnvoyProcess

ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
SCOPE = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
VHOST = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
# SotW responses of these carry every resource (absence is deletion); RDS names resources.
FULL_STATE = frozenset({SCOPE})
ROUTE_NAME = "local_route"  # the RouteConfiguration of `rds` and the VHDS designs
BACKEND = "backend"
PROBE_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 600.0


def host_name(i: int) -> str:
    return f"{i}-route.example.com"


# --- resources --------------------------------------------------------------------------------


def virtual_host(i: int) -> VirtualHost:
    """Shaped like what dragoman makes of gateway-api-bench's probe route N (two rules, with
    header filters)."""
    host = host_name(i)
    added = [HeaderValueOption(header=HeaderValue(key="my-added-header", value="added-value"))]
    return VirtualHost(
        name=host,
        domains=[host, f"{host}:*"],
        routes=[
            Route(
                match=RouteMatch(prefix=f"/{i}"),
                route=RouteAction(cluster=BACKEND),
                request_headers_to_add=added,
                response_headers_to_add=added,
            ),
            Route(
                match=RouteMatch(prefix="/"),
                direct_response=DirectResponseAction(status=500),
                request_headers_to_add=added,
                response_headers_to_add=added,
            ),
        ],
    )


def route_table(name: str, hosts: Iterable[int]) -> bytes:
    return RouteConfiguration(
        name=name, virtual_hosts=[virtual_host(i) for i in hosts]
    ).SerializeToString(deterministic=True)


def scope(i: int, inline: bool) -> bytes:
    host = host_name(i)
    key = ScopedRouteConfiguration.Key(
        fragments=[ScopedRouteConfiguration.Key.Fragment(string_key=host)]
    )
    if inline:
        table = RouteConfiguration(name=f"route-{host}", virtual_hosts=[virtual_host(i)])
        message = ScopedRouteConfiguration(name=host, route_configuration=table, key=key)
    else:
        message = ScopedRouteConfiguration(
            name=host, route_configuration_name=f"route-{host}", key=key
        )
    return message.SerializeToString(deterministic=True)


class PlainRds:
    """One RouteConfiguration of every host, kept as encoded virtual hosts joined per change:
    the encoding of a repeated field is its elements' encodings one after another."""

    def __init__(self) -> None:
        self.head = RouteConfiguration(name=ROUTE_NAME).SerializeToString()
        self.entries: list[bytes] = []

    def add(self, i: int) -> dict[str, dict[str, bytes]]:
        entry = RouteConfiguration(virtual_hosts=[virtual_host(i)])
        self.entries.append(entry.SerializeToString(deterministic=True))
        return {ROUTE: {ROUTE_NAME: self.head + b"".join(self.entries)}}


def scoped(i: int, inline: bool) -> dict[str, dict[str, bytes]]:
    if inline:
        return {SCOPE: {host_name(i): scope(i, True)}}
    name = f"route-{host_name(i)}"
    return {SCOPE: {host_name(i): scope(i, False)}, ROUTE: {name: route_table(name, [i])}}


def on_demand(i: int) -> dict[str, dict[str, bytes]]:
    """VHDS names a virtual host `<route configuration>/<host>`."""
    name = f"{ROUTE_NAME}/{host_name(i)}"
    return {VHOST: {name: virtual_host(i).SerializeToString(deterministic=True)}}


@dataclass(frozen=True)
class Design:
    name: str
    delta: bool
    layout: str  # "rds", "srds", "srds-inline", "vhds", "vhds-push"

    def base(self) -> dict[str, dict[str, bytes]]:
        """What is there before any host: the VHDS designs' empty RouteConfiguration."""
        if self.layout.startswith("vhds"):
            table = RouteConfiguration(
                name=ROUTE_NAME, vhds=Vhds(config_source=ads_source())
            ).SerializeToString(deterministic=True)
            return {ROUTE: {ROUTE_NAME: table}}
        return {}

    def changes(self) -> Callable[[int], dict[str, dict[str, bytes]]]:
        """A function of host i to the resources that adding it sets."""
        if self.layout == "rds":
            return PlainRds().add
        if self.layout.startswith("srds"):
            inline = self.layout == "srds-inline"
            return lambda i: scoped(i, inline)
        return on_demand


DESIGNS = {
    d.name: d
    for d in (
        Design("rds", False, "rds"),
        Design("rds-delta", True, "rds"),
        Design("srds", False, "srds"),
        Design("srds-delta", True, "srds"),
        Design("srds-inline", False, "srds-inline"),
        Design("srds-inline-delta", True, "srds-inline"),
        Design("vhds-delta", True, "vhds"),
        Design("vhds-push-delta", True, "vhds-push"),
    )
}


# --- the xDS server ---------------------------------------------------------------------------


@dataclass(eq=False)
class Stream:
    """One ADS stream's state: what it asked for and what it was sent, by type."""

    delta: bool
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    names: dict[str, set[str]] = field(default_factory=dict)  # explicitly subscribed
    wildcard: set[str] = field(default_factory=set)  # types subscribed to everything
    sent: dict[str, dict[str, bytes]] = field(default_factory=dict)  # type -> name -> body
    pending: dict[str, float] = field(default_factory=dict)  # nonce -> perf_counter sent
    nonces: dict[str, str] = field(default_factory=dict)  # SotW: type -> last nonce
    answered: set[str] = field(default_factory=set)  # types sent a response


class Server(ads_pb2_grpc.AggregatedDiscoveryServiceServicer):
    """SotW and delta ADS over resources kept encoded, by type and name.

    `set` stores resources and queues them for the streams that want them. A change's apply
    time is when the last response it caused was ACKed (`acked_at`, once `idle()`).
    """

    def __init__(self, resources: dict[str, dict[str, bytes]], push_vhosts: bool) -> None:
        self.resources = resources
        self.push_vhosts = push_vhosts
        self.streams: set[Stream] = set()
        self.counter = itertools.count()
        self.acked_at = 0.0  # perf_counter of the last ACK
        self.nacks: list[str] = []
        self.on_demand_requests = 0
        self.asked_vhosts: list[str] = []
        self.unknown_vhosts_removed = False  # how an unknown VHDS name is answered

    def set(self, changes: dict[str, dict[str, bytes]]) -> None:
        for type_url, bodies in changes.items():
            self.resources.setdefault(type_url, {}).update(bodies)
        for stream in self.streams:
            for type_url in changes:
                if type_url == VHOST and not self.push_vhosts:
                    continue
                self.answer(stream, type_url)

    def wanted(self, stream: Stream, type_url: str) -> dict[str, bytes]:
        have = self.resources.get(type_url, {})
        if type_url in stream.wildcard:
            return dict(have)
        return {n: have[n] for n in stream.names.get(type_url, ()) if n in have}

    def answer(self, stream: Stream, type_url: str, asked: Iterable[str] = ()) -> None:
        """Sends what changed since the last response of this type (SotW full-state types:
        everything); for delta, `asked` names are answered even when unknown: as removed, or
        for VHDS as an alias without a body (unless `unknown_vhosts_removed`).

        Envoy asks VHDS for `<route configuration>/<Host>` with the Host's port: the server
        matches it to a virtual host (here: drops the port) and names it as an alias."""
        wanted = self.wanted(stream, type_url)
        sent = stream.sent.setdefault(type_url, {})
        changed = {n: b for n, b in wanted.items() if sent.get(n) != b}
        have = self.resources.get(type_url, {})
        aliases: dict[str, list[str]] = {}
        unknown = []
        for name in asked:
            matched = name.rsplit(":", 1)[0] if type_url == VHOST else name
            if name in have:
                continue
            if matched in have:
                aliases.setdefault(matched, []).append(name)
                changed[matched] = have[matched]
            else:
                unknown.append(name)
        if not changed and not unknown and type_url in stream.answered:
            return  # (a first request is answered even with nothing, or Envoy waits 15 s)
        stream.answered.add(type_url)
        nonce = str(next(self.counter))
        version = nonce
        sent.update(changed)
        if stream.delta:
            response: Any = DeltaDiscoveryResponse(
                type_url=type_url,
                system_version_info=version,
                nonce=nonce,
                removed_resources=[] if type_url == VHOST else unknown,
                resources=[
                    Resource(
                        name=n,
                        aliases=[n, *aliases.get(n, ())] if type_url == VHOST else [],
                        version=version,
                        resource=AnyMessage(type_url=type_url, value=b),
                    )
                    for n, b in changed.items()
                ],
            )
            if type_url == VHOST and not self.unknown_vhosts_removed:
                # An alias that resolves to nothing: named, without a body (Envoy then
                # routes the waiting request, to a 404; a removal leaves it waiting).
                response.resources.extend(Resource(name=n, aliases=[n]) for n in unknown)
            elif type_url == VHOST:
                response.removed_resources.extend(unknown)
        else:
            bodies = wanted if type_url in FULL_STATE else changed
            response = DiscoveryResponse(
                type_url=type_url,
                version_info=version,
                nonce=nonce,
                resources=[AnyMessage(type_url=type_url, value=b) for b in bodies.values()],
            )
            stream.nonces[type_url] = nonce
        stream.pending[nonce] = time.perf_counter()
        stream.queue.put_nowait(response)

    def acked(self, stream: Stream, nonce: str, error: str) -> None:
        if stream.pending.pop(nonce, None) is None:
            return
        if error:
            self.nacks.append(error)
            print(f"NACK: {error[:400]}", file=sys.stderr, flush=True)
        self.acked_at = time.perf_counter()

    def on_sotw(self, stream: Stream, request: DiscoveryRequest) -> None:
        type_url = request.type_url
        if request.response_nonce:
            self.acked(stream, request.response_nonce, request.error_detail.message)
            if request.response_nonce != stream.nonces.get(type_url):
                return  # about a response since superseded
        if type_url in FULL_STATE:
            stream.wildcard.add(type_url)
        else:
            stream.names[type_url] = set(request.resource_names)
        self.answer(stream, type_url)

    def on_delta(self, stream: Stream, request: DeltaDiscoveryRequest) -> None:
        type_url = request.type_url
        if request.response_nonce:
            self.acked(stream, request.response_nonce, request.error_detail.message)
        names = stream.names.setdefault(type_url, set())
        subscribe = set(request.resource_names_subscribe)
        if (type_url not in stream.answered and not subscribe) or "*" in subscribe:
            stream.wildcard.add(type_url)
        subscribe.discard("*")
        if type_url == VHOST and subscribe:
            self.on_demand_requests += 1
            self.asked_vhosts += sorted(subscribe)
        names.update(subscribe)
        names.difference_update(request.resource_names_unsubscribe)
        sent = stream.sent.setdefault(type_url, {})
        for name, version in request.initial_resource_versions.items():
            sent.setdefault(name, version.encode())  # never equal to a body: sent again
        for name in subscribe:
            sent.pop(name, None)  # asked (again): answered even if sent before
        self.answer(stream, type_url, sorted(subscribe))

    async def _serve(
        self, stream: Stream, requests: AsyncIterator[Any], handle: Callable[[Stream, Any], None]
    ) -> AsyncIterator[Any]:
        self.streams.add(stream)

        async def read() -> None:
            async for request in requests:
                handle(stream, request)

        reader = asyncio.create_task(read())
        getter: asyncio.Future[Any] | None = None
        try:
            while True:
                getter = asyncio.ensure_future(stream.queue.get())
                done, _ = await asyncio.wait({getter, reader}, return_when="FIRST_COMPLETED")
                if getter not in done:
                    return
                yield getter.result()
        finally:
            self.streams.discard(stream)
            reader.cancel()
            if getter is not None:
                getter.cancel()

    # grpcio's asyncio server serves a method as a stream only if it is an async generator.
    async def StreamAggregatedResources(
        self, request_iterator: AsyncIterator[DiscoveryRequest], context: Any
    ) -> AsyncIterator[DiscoveryResponse]:
        async for response in self._serve(Stream(delta=False), request_iterator, self.on_sotw):
            yield response

    async def DeltaAggregatedResources(
        self, request_iterator: AsyncIterator[DeltaDiscoveryRequest], context: Any
    ) -> AsyncIterator[DeltaDiscoveryResponse]:
        async for response in self._serve(Stream(delta=True), request_iterator, self.on_delta):
            yield response

    def idle(self) -> bool:
        return all(not s.pending and s.queue.empty() for s in self.streams)


async def start_server(server: Server) -> tuple[grpc.aio.Server, int]:
    grpc_server = grpc.aio.server(options=[("grpc.max_receive_message_length", 1 << 28)])
    ads_pb2_grpc.add_AggregatedDiscoveryServiceServicer_to_server(server, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    await grpc_server.start()
    return grpc_server, port


# --- Envoy --------------------------------------------------------------------------------------


def ads_source() -> ConfigSource:
    return ConfigSource(ads=AggregatedConfigSource(), resource_api_version=ApiVersion.V3)


UPSTREAM_HTTP = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
ADS = {"ads": {}, "resource_api_version": "V3"}
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."


def connection_manager(layout: str, scope_header: str = ":authority") -> dict[str, Any]:
    router = {
        "name": "envoy.filters.http.router",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
        },
    }
    filters = [router]
    config: dict[str, Any] = {"@type": HCM + "HttpConnectionManager", "stat_prefix": "bench"}
    if layout.startswith("srds"):
        config["scoped_routes"] = {
            "name": "hosts",
            "scope_key_builder": {
                "fragments": [
                    {
                        "header_value_extractor": {
                            "name": scope_header,
                            "element_separator": ":",
                            "index": 0,
                        }
                    }
                ]
            },
            "rds_config_source": ADS,
            "scoped_rds": {"scoped_rds_config_source": ADS},
        }
    else:
        config["rds"] = {"config_source": ADS, "route_config_name": ROUTE_NAME}
    if layout.startswith("vhds"):
        on_demand_filter = {
            "name": "envoy.filters.http.on_demand",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand"
            },
        }
        filters = [on_demand_filter, router]
    config["http_filters"] = filters
    return config


def static_cluster(name: str, address: str, port: int, http2: bool = False) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [
                {
                    "lb_endpoints": [
                        {
                            "endpoint": {
                                "address": {
                                    "socket_address": {"address": address, "port_value": port}
                                }
                            }
                        }
                    ]
                }
            ],
        },
    }
    if http2:
        cluster["typed_extension_protocol_options"] = {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": UPSTREAM_HTTP,
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        }
    return cluster


def bootstrap(
    admin: Path,
    xds_port: int,
    listener_port: int,
    backend_port: int,
    manager: dict[str, Any],
    delta: bool,
) -> str:
    """Static listener and clusters; only the route tables come over ADS. JSON is YAML."""
    listener = {
        "name": "http",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": listener_port}},
        "filter_chains": [
            {
                "filters": [
                    {
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": manager,
                    }
                ]
            }
        ],
    }
    config = {
        "node": {"id": "route-apply", "cluster": "bench"},
        "admin": {"address": {"pipe": {"path": str(admin)}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC" if delta else "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds"}}],
                "set_node_on_first_message_only": True,
            }
        },
        "static_resources": {
            "listeners": [listener],
            "clusters": [
                static_cluster("xds", "127.0.0.1", xds_port, http2=True),
                static_cluster(BACKEND, gb.BACKEND_A, backend_port),
            ],
        },
    }
    return json.dumps(config, indent=1)


# --- one design at one R ------------------------------------------------------------------------


@dataclass
class Figures:
    design: str
    routes: int
    load_s: float = 0.0
    allocated_mib: float = 0.0
    rss_mib: float = 0.0
    first_200_ms: list[float] = field(default_factory=list)
    acked_ms: list[float] = field(default_factory=list)  # until every response was ACKed
    main_cpu_ms: list[float] = field(default_factory=list)
    non_404: int = 0  # answers other than 404 and 200 while waiting
    timeouts: int = 0
    nacks: int = 0
    on_demand_requests: int = 0

    def median(self, values: str) -> float:
        figures: list[float] = getattr(self, values)
        return statistics.median(figures) if figures else float("nan")


async def wait_until_idle(server: Server, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while not server.idle():
        if time.perf_counter() > deadline:
            raise TimeoutError("Envoy did not ACK every response")
        await asyncio.sleep(0.001)


def allocated_mib(envoy: EnvoyProcess) -> float:
    return int(json.loads(envoy.admin.get("/memory"))["allocated"]) / (1 << 20)


async def load_hosts(
    envoy: EnvoyProcess, server: Server, client: gb.Client, design: Design, routes: int
) -> float:
    """Seconds from Envoy's start until the last of the R hosts answers 200."""
    began = time.perf_counter()
    envoy.start()
    envoy.wait_admin(60)
    if routes:
        await gb.until_status(client, host_name(routes - 1), f"/{routes - 1}", 200, LOAD_TIMEOUT_S)
        if design.layout.startswith("srds"):
            await gb.until_status(client, host_name(0), "/0", 200, LOAD_TIMEOUT_S)
    else:
        deadline = time.perf_counter() + 60
        while not server.streams and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
    await wait_until_idle(server, LOAD_TIMEOUT_S)
    return time.perf_counter() - began


async def sample(
    server: Server, client: gb.Client, change: dict[str, dict[str, bytes]], i: int, poll_s: float
) -> tuple[float, float, int] | None:
    """(ms to the first 200, ms until every response was ACKed, non-404 answers) or None."""
    began = time.perf_counter()
    server.set(change)
    others = 0
    while time.perf_counter() - began < PROBE_TIMEOUT_S:
        status, _ = await client.ask(host_name(i), f"/{i}")
        if status == 200:
            served = time.perf_counter()
            await wait_until_idle(server, PROBE_TIMEOUT_S)
            acked = max(server.acked_at, began)
            return (served - began) * 1000, (acked - began) * 1000, others
        if status not in (0, 404):
            others += 1
        await asyncio.sleep(poll_s)
    return None


@dataclass
class Rig:
    """The xDS server, one Envoy connected to it and a client of its listener."""

    server: Server
    envoy: EnvoyProcess
    client: gb.Client


@contextlib.asynccontextmanager
async def rig(
    layout: str,
    delta: bool,
    resources: dict[str, dict[str, bytes]],
    args: argparse.Namespace,
    workdir: Path,
    scope_header: str = ":authority",
) -> AsyncIterator[Rig]:
    """A server holding `resources` and an Envoy not yet started (`load_hosts` starts it)."""
    server = Server(resources, push_vhosts=layout != "vhds")
    grpc_server, xds_port = await start_server(server)
    directory = Path(tempfile.mkdtemp(prefix="ra-", dir=workdir))
    admin = directory / "admin.sock"
    listener_port = free_port()
    config = bootstrap(
        admin,
        xds_port,
        listener_port,
        args.backend_port,
        connection_manager(layout, scope_header),
        delta,
    )
    envoy = EnvoyProcess(config, directory, admin, concurrency=1, log_level=args.log_level)
    client = gb.Client(listener_port)
    try:
        yield Rig(server, envoy, client)
    finally:
        client.close()
        _stop_envoy(envoy)
        await grpc_server.stop(None)
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


async def measure(design: Design, routes: int, args: argparse.Namespace, workdir: Path) -> Figures:
    figures = Figures(design.name, routes)
    add = design.changes()
    resources = design.base()
    for i in range(routes):
        for type_url, bodies in add(i).items():
            resources.setdefault(type_url, {}).update(bodies)
    async with rig(design.layout, design.delta, resources, args, workdir) as made:
        server, envoy, client = made.server, made.envoy, made.client
        try:
            figures.load_s = await load_hosts(envoy, server, client, design, routes)
            await asyncio.sleep(args.settle)
            figures.allocated_mib = allocated_mib(envoy)
            assert envoy.pid is not None
            figures.rss_mib = rss_mib(envoy.pid)
            for i in range(routes, routes + args.samples):
                change = add(i)
                cpu = main_thread_cpu_seconds(envoy.pid)
                result = await sample(server, client, change, i, args.poll_ms / 1000)
                if result is None:
                    figures.timeouts += 1
                    print(f"{design.name} R={routes}: host {i} not served", file=sys.stderr)
                    break
                await asyncio.sleep(args.gap)
                figures.main_cpu_ms.append((main_thread_cpu_seconds(envoy.pid) - cpu) * 1000)
                first, acked, others = result
                figures.first_200_ms.append(first)
                figures.acked_ms.append(acked)
                figures.non_404 += others
        finally:
            figures.nacks = len(server.nacks)
            figures.on_demand_requests = server.on_demand_requests
    return figures


# --- what scoped RDS and VHDS do with the hosts a Gateway has -----------------------------------


def wildcard_scope(key: str, i: int) -> dict[str, dict[str, bytes]]:
    """A scope keyed `key` whose one virtual host serves host i's route for any host."""
    table = RouteConfiguration(name=f"route-{key}", virtual_hosts=[virtual_host(i)])
    table.virtual_hosts[0].domains[:] = ["*"]
    message = ScopedRouteConfiguration(
        name=f"scope-{key}",
        route_configuration=table,
        key=ScopedRouteConfiguration.Key(
            fragments=[ScopedRouteConfiguration.Key.Fragment(string_key=key)]
        ),
    )
    return {SCOPE: {f"scope-{key}": message.SerializeToString(deterministic=True)}}


@dataclass
class Check:
    """What one Envoy answered to each (Host, path), what it rejected, what it asked for."""

    title: str
    answers: list[tuple[str, str, int]] = field(default_factory=list)
    nacks: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # VHDS names asked on demand

    def status(self, host: str, path: str) -> int:
        return next(s for h, p, s in self.answers if (h, p) == (host, path))

    def lines(self) -> list[str]:
        lines = [self.title]
        lines += [f"  Host {h!r:32} {p:4} -> {s}" for h, p, s in self.answers]
        lines += [f"  NACK: {n[:300]}" for n in self.nacks] or ["  no NACK"]
        if self.asked:
            lines.append(f"  on-demand names asked: {self.asked}")
        return lines


async def ask_all(
    client: gb.Client, asked: Sequence[tuple[str, str]]
) -> list[tuple[str, str, int]]:
    return [(host, path, (await client.ask(host, path))[0]) for host, path in asked]


async def scoped_checks(args: argparse.Namespace, workdir: Path, header: str) -> Check:
    """Scopes: host 1 (exact), `*.example.com`, `*` and the empty key (no scope for the rest)."""
    resources = scoped(1, inline=True)
    for key, i in (("*.example.com", 2), ("*", 3), ("", 4)):
        resources[SCOPE].update(wildcard_scope(key, i)[SCOPE])
    asked = [
        (host_name(1), "/1"),
        (host_name(1).upper(), "/1"),
        ("1-Route.Example.Com", "/1"),
        (f"{host_name(1)}:8080", "/1"),
        (f"{host_name(1)}.", "/1"),
        ("other.example.com", "/2"),
        ("*.example.com", "/2"),
        ("unknown.test", "/3"),
        ("*", "/3"),
        ("unknown.test", "/4"),
        ("[::1]:8080", "/3"),
    ]
    async with rig("srds-inline", True, resources, args, workdir, header) as made:
        made.envoy.start()
        made.envoy.wait_admin(60)
        await gb.until_status(made.client, host_name(1), "/1", 200, 60)
        return Check(
            f"scoped RDS, scope key from header {header!r} (':' element 0):",
            await ask_all(made.client, asked),
            made.server.nacks,
        )


async def plain_checks(args: argparse.Namespace, workdir: Path) -> Check:
    """The same hosts with plain RDS, for comparison: domain matching ignores case."""
    resources = {ROUTE: {ROUTE_NAME: route_table(ROUTE_NAME, [1])}}
    asked = [(host_name(1), "/1"), (host_name(1).upper(), "/1"), (f"{host_name(1)}:8080", "/1")]
    async with rig("rds", False, resources, args, workdir) as made:
        made.envoy.start()
        made.envoy.wait_admin(60)
        await gb.until_status(made.client, host_name(1), "/1", 200, 60)
        title = "plain RDS, domains [host, host:*]:"
        return Check(title, await ask_all(made.client, asked), made.server.nacks)


async def vhds_checks(args: argparse.Namespace, workdir: Path) -> list[Check]:
    """VHDS over SotW ADS; over delta, what names Envoy asks for when a host is not loaded
    (hosts 5 and 6, held by the server but not pushed), in another case or with a port."""
    checks = []
    for delta in (False, True):
        resources = Design("vhds", delta, "vhds").base()
        resources.update(on_demand(1))
        async with rig("vhds", delta, resources, args, workdir) as made:
            made.envoy.start()
            made.envoy.wait_admin(60)
            deadline = time.perf_counter() + 20
            while not made.server.nacks and time.perf_counter() < deadline:
                status, _ = await made.client.ask(host_name(1), "/1")
                if status == 200:
                    break
                await asyncio.sleep(0.1)
            # One host at a time: an answer to a wildcard stream carries every host it lacks.
            answers = await ask_all(
                made.client, [(host_name(1), "/1"), (host_name(1).upper(), "/1")]
            )
            made.server.set(on_demand(5))
            answers += await ask_all(made.client, [(host_name(5).upper(), "/5")])
            made.server.set(on_demand(6))
            answers += await ask_all(
                made.client, [(f"{host_name(6)}:8080", "/6"), (host_name(6), "/6")]
            )
            # Hosts the server has not: answered as an alias without a body (7), then as a
            # removed name (8), which leaves the request waiting (0: no answer in 2 s).
            answers += await ask_all(made.client, [(host_name(7), "/7")])
            made.server.unknown_vhosts_removed = True
            answers.append((host_name(8), "/8", (await made.client.ask(host_name(8), "/8", 2))[0]))
            checks.append(
                Check(
                    f"VHDS over {'delta' if delta else 'SotW'} ADS:",
                    answers,
                    made.server.nacks,
                    made.server.asked_vhosts,
                )
            )
    return checks


GRPC_CLIENT = """
import sys, grpc
for target in sys.argv[1:]:
    channel = grpc.insecure_channel("xds:///" + target)
    try:
        grpc.channel_ready_future(channel).result(timeout=3)
    except grpc.FutureTimeoutError:
        pass
    channel.close()
"""


def api_listener(name: str, layout: str) -> bytes:
    """A gRPC client's API listener whose connection manager has `layout`'s route source."""
    from envoy.config.listener.v3.api_listener_pb2 import ApiListener
    from envoy.config.listener.v3.listener_pb2 import Listener
    from envoy.extensions.filters.http.router.v3 import router_pb2  # noqa: F401 (the Any)
    from envoy.extensions.filters.network.http_connection_manager.v3 import (  # noqa: F401
        http_connection_manager_pb2,
    )
    from google.protobuf import json_format

    manager = json_format.ParseDict(connection_manager(layout), AnyMessage())
    listener = Listener(name=name, api_listener=ApiListener(api_listener=manager))
    return listener.SerializeToString(deterministic=True)


async def grpc_checks(args: argparse.Namespace, workdir: Path) -> Check:
    """A proxyless gRPC client (grpcio) asks for two API listeners: one whose connection
    manager takes its routes from scopes, one from RDS. What it rejects is in `nacks`."""
    listener = "type.googleapis.com/envoy.config.listener.v3.Listener"
    targets = {"scoped.test:80": "srds", "plain.test:80": "rds"}
    resources = {listener: {name: api_listener(name, how) for name, how in targets.items()}}
    server = Server(resources, push_vhosts=False)
    grpc_server, xds_port = await start_server(server)
    bootstrap = {
        "xds_servers": [
            {
                "server_uri": f"127.0.0.1:{xds_port}",
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }
        ],
        "node": {"id": "grpc-client", "cluster": "bench"},
    }
    env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP_CONFIG": json.dumps(bootstrap)}
    try:
        client = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            GRPC_CLIENT,
            *targets,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.wait_for(client.wait(), 30)
    finally:
        await grpc_server.stop(None)
    named = ", ".join(f"{target} ({how})" for target, how in targets.items())
    return Check(f"proxyless gRPC client, API listeners {named}:", nacks=server.nacks)


async def run_checks(args: argparse.Namespace, workdir: Path) -> list[Check]:
    return [
        await scoped_checks(args, workdir, ":authority"),
        await scoped_checks(args, workdir, "host"),
        await plain_checks(args, workdir),
        *await vhds_checks(args, workdir),
        await grpc_checks(args, workdir),
    ]


# --- printing -----------------------------------------------------------------------------------


def ratio(value: float, floor: float) -> str:
    if floor != floor or value != value or floor <= 0:  # NaN
        return "-"
    return f"{value / floor:.2f}"


def table(results: Sequence[Figures]) -> str:
    head = (
        f"{'design':<18} {'R':>5} {'200 med':>8} {'p90':>7} {'ACK med':>8} {'x rds':>6} "
        f"{'CPU ms':>7} {'alloc MiB':>9} {'RSS MiB':>8} {'load s':>7} {'errors':>6}"
    )
    lines = [head, "-" * len(head)]
    floors = {f.routes: f for f in results if f.design == "rds"}
    for f in results:
        floor = floors.get(f.routes)
        p90 = gb.quantile(f.first_200_ms, 0.9)
        errors = f.non_404 + f.timeouts + f.nacks
        lines.append(
            f"{f.design:<18} {f.routes:>5} {f.median('first_200_ms'):>8.1f} {p90:>7.1f} "
            f"{f.median('acked_ms'):>8.1f} "
            f"{ratio(f.median('first_200_ms'), floor.median('first_200_ms')) if floor else '-':>6} "
            f"{f.median('main_cpu_ms'):>7.2f} {f.allocated_mib:>9.1f} {f.rss_mib:>8.1f} "
            f"{f.load_s:>7.2f} {errors:>6}"
        )
    return "\n".join(lines)


# --- main ---------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--routes", type=int, action="append", help="R (repeatable; 0 and 1000)")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--designs", default=",".join(DESIGNS), help="comma-separated")
    p.add_argument("--poll-ms", type=float, default=1.0)
    p.add_argument("--gap", type=float, default=0.05, help="seconds between samples")
    p.add_argument("--settle", type=float, default=1.0, help="seconds before the samples")
    p.add_argument("--log-level", default="warning", help="Envoy's")
    p.add_argument("--keep", action="store_true", help="leave Envoy's logs behind")
    p.add_argument("--json", type=Path, help="write the figures here too")
    p.add_argument("--constraints", action="store_true", help="answer the scoped RDS questions")
    return p


async def run_all(args: argparse.Namespace, workdir: Path) -> list[Figures]:
    results = []
    for routes in args.routes:
        for name in args.designs.split(","):
            figures = await measure(DESIGNS[name], routes, args, workdir)
            print(
                f"{name} R={routes}: first 200 median {figures.median('first_200_ms'):.1f} ms, "
                f"ACKed {figures.median('acked_ms'):.1f} ms ({gb.load_average()})",
                flush=True,
            )
            results.append(figures)
    return results


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.routes = args.routes or [0, 1000]
    unknown = set(args.designs.split(",")) - set(DESIGNS)
    if unknown:
        raise SystemExit(f"unknown designs {sorted(unknown)}; known: {', '.join(DESIGNS)}")
    workdir = Path(tempfile.mkdtemp(prefix="ra-"))  # short: Envoy's admin socket lives below
    args.backend_port = free_port(("127.0.0.1", gb.BACKEND_A))
    backends = gb.start_backends({"backend": (gb.BACKEND_A, args.backend_port)})
    try:
        if args.constraints:
            for check in asyncio.run(run_checks(args, workdir)):
                print("\n".join(check.lines()), flush=True)
            return 0
        print(f"before: {gb.load_average()}", flush=True)
        results = asyncio.run(run_all(args, workdir))
        print(f"after: {gb.load_average()}")
        print(table(results))
        if args.json:
            args.json.write_text(json.dumps([f.__dict__ for f in results], indent=1))
    finally:
        stop(backends)
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
