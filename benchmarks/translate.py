"""Translation benchmark: typed objects in a Store → serialized xDS resources.

Prints figures; it is not a test. For each size N it times `dag.build.build(store)` and
`envoy.translation.translator.translate(dag)` as the controller runs them (cyclic GC paused)
against a floor measured in the same run: the same protobuf messages (same shapes, same field
values, byte-identical output, checked) built and serialized directly, with no DAG and no
dragoman code. It also times the EDS fast path for the largest N.

With --l4, half the routes are TCPRoutes and TLSRoutes instead of HTTPRoutes: a quarter of
them a TCPRoute on a TCP listener of its own (to a pod-backed Service), a quarter a
TLSRoute on the one TLS passthrough listener (SNI, to an ExternalName).

    python benchmarks/translate.py [--sizes 1000,10000] [--repeat 3] [--l4] [--profile] [--check]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import gc
import hashlib
import io
import json
import pstats
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import (
    address_pb2,
    base_pb2,
    config_source_pb2,
    substitution_format_string_pb2,
)
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.clusters.common.dns.v3 import dns_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from google.protobuf import any_pb2, duration_pb2, struct_pb2, wrappers_pb2
from google.protobuf.message import Message

from dragoman.dag.build import build
from dragoman.dag.incremental.changes import store_changes
from dragoman.dag.upstreams.endpoints import refresh_load_assignments
from dragoman.envoy.resources.access_log import JSON_FIELDS as ACCESS_LOG_JSON_FIELDS
from dragoman.envoy.resources.access_log import L4_JSON_FIELDS as L4_ACCESS_LOG_JSON_FIELDS
from dragoman.envoy.translation.translator import translate, translate_endpoints
from dragoman.objects import (
    BackendRef,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Gateway,
    GatewayListener,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRule,
    KubeObject,
    L4RouteRule,
    ListenerTLS,
    ObjectMeta,
    ParentRef,
    PathMatch,
    Service,
    ServicePort,
    TCPRoute,
    TLSRoute,
)
from dragoman.objects.endpoint_slice import SERVICE_NAME_LABEL
from dragoman.snapshots.gc_pause import cyclic_gc_paused
from dragoman.snapshots.resources import ENDPOINT, Snapshot
from dragoman.store import Store

NAMESPACE = "bench"
GATEWAY = "gw"
LISTENER_PORT = 8080
TLS_PORT = 8443
TCP_BASE_PORT = 20000  # TCPRoute i gets a TCP listener on TCP_BASE_PORT + i
SERVICE_PORT = 80
SERVICE_PORT_NAME = "http"
TARGET_PORT = 8080
ENDPOINTS_PER_SLICE = 3
TARGET_RATIO = 3.0
MIB = 1024 * 1024

# What the figures are measured with: wall time, or this process's CPU time with --cpu (on
# a machine other work keeps busy, wall time counts the waits for a core on both sides).
clock: Callable[[], float] = time.perf_counter


# --- the synthetic cluster ------------------------------------------------------------------


def pod_service_name(i: int) -> str:
    return f"svc-pod-{i}"


def external_service_name(i: int) -> str:
    return f"svc-ext-{i}"


def external_host(i: int) -> str:
    return f"svc-{i}.example.com"


def route_hostname(i: int) -> str:
    return f"route-{i}.example.org"


def endpoint_addresses(i: int, generation: int = 0) -> tuple[str, ...]:
    # One /24 per Service; `generation` moves the endpoints so a changed slice differs.
    base = ENDPOINTS_PER_SLICE * generation
    return tuple(
        f"10.{(i >> 8) & 255}.{i & 255}.{base + j + 1}" for j in range(ENDPOINTS_PER_SLICE)
    )


def endpoint_slice(i: int, generation: int = 0) -> EndpointSlice:
    return EndpointSlice(
        meta=ObjectMeta(
            name=f"{pod_service_name(i)}-abcde",
            namespace=NAMESPACE,
            labels={SERVICE_NAME_LABEL: pod_service_name(i)},
        ),
        endpoints=tuple(
            Endpoint(addresses=(address,)) for address in endpoint_addresses(i, generation)
        ),
        ports=(EndpointPort(port=TARGET_PORT, name="http"),),
    )


def route_kind(i: int, l4: bool) -> str:
    """Which kind route i is: every other one a TCPRoute or TLSRoute with --l4."""
    if not l4 or i % 2 == 0:
        return "HTTPRoute"
    return "TCPRoute" if i % 4 == 1 else "TLSRoute"


def synthesize(n: int, l4: bool = False) -> list[KubeObject]:
    """N Services (half pod-backed with a 3-endpoint slice, half ExternalName), N/2 routes."""
    half = n // 2
    listeners = [GatewayListener(name="http", port=LISTENER_PORT, protocol="HTTP")]
    if l4:
        listeners.append(
            GatewayListener(
                name="tls", port=TLS_PORT, protocol="TLS", tls=ListenerTLS(mode="Passthrough")
            )
        )
        listeners.extend(
            GatewayListener(name=f"tcp-{i}", port=TCP_BASE_PORT + i, protocol="TCP")
            for i in range(half)
            if route_kind(i, l4) == "TCPRoute"
        )
    objects: list[KubeObject] = [
        Gateway(
            meta=ObjectMeta(name=GATEWAY, namespace=NAMESPACE),
            gateway_class_name="dragoman",
            listeners=tuple(listeners),
        )
    ]
    for i in range(half):
        objects.append(
            Service(
                meta=ObjectMeta(name=pod_service_name(i), namespace=NAMESPACE),
                ports=(
                    ServicePort(port=SERVICE_PORT, name=SERVICE_PORT_NAME, target_port=TARGET_PORT),
                ),
                selector={"app": pod_service_name(i)},
            )
        )
        objects.append(endpoint_slice(i))
        objects.append(
            Service(
                meta=ObjectMeta(name=external_service_name(i), namespace=NAMESPACE),
                type="ExternalName",
                external_name=external_host(i),
                ports=(ServicePort(port=SERVICE_PORT, name=SERVICE_PORT_NAME),),
            )
        )
        kind = route_kind(i, l4)
        if kind == "TCPRoute":
            objects.append(
                TCPRoute(
                    meta=ObjectMeta(name=f"route-{i}", namespace=NAMESPACE),
                    parent_refs=(ParentRef(name=GATEWAY, section_name=f"tcp-{i}"),),
                    rules=(
                        L4RouteRule(
                            backend_refs=(BackendRef(name=pod_service_name(i), port=SERVICE_PORT),)
                        ),
                    ),
                )
            )
            continue
        if kind == "TLSRoute":
            objects.append(
                TLSRoute(
                    meta=ObjectMeta(name=f"route-{i}", namespace=NAMESPACE),
                    parent_refs=(ParentRef(name=GATEWAY, section_name="tls"),),
                    hostnames=(route_hostname(i),),
                    rules=(
                        L4RouteRule(
                            backend_refs=(
                                BackendRef(name=external_service_name(i), port=SERVICE_PORT),
                            )
                        ),
                    ),
                )
            )
            continue
        objects.append(
            HTTPRoute(
                meta=ObjectMeta(name=f"route-{i}", namespace=NAMESPACE),
                parent_refs=(ParentRef(name=GATEWAY),),
                hostnames=(route_hostname(i),),
                rules=(
                    HTTPRouteRule(
                        matches=(HTTPRouteMatch(PathMatch("PathPrefix", "/api")),),
                        backend_refs=(BackendRef(name=pod_service_name(i), port=SERVICE_PORT),),
                    ),
                    HTTPRouteRule(
                        matches=(HTTPRouteMatch(PathMatch("Exact", "/ext")),),
                        backend_refs=(
                            BackendRef(name=external_service_name(i), port=SERVICE_PORT),
                        ),
                    ),
                ),
            )
        )
    return objects


# --- dragoman --------------------------------------------------------------------------------


def dragoman_phases(store: Store) -> tuple[float, float, dict[str, Snapshot]]:
    """(build seconds, translate seconds, snapshots), as the controller runs a full build."""
    with cyclic_gc_paused():
        start = clock()
        dag = build(store)
        built = clock()
        snapshots = translate(dag)
        done = clock()
    return built - start, done - built, snapshots


def dragoman_digests(snapshots: Mapping[str, Snapshot]) -> dict[tuple[str, str], str]:
    """(type URL, name) → digest over every node group (groups share their resources)."""
    digests: dict[tuple[str, str], str] = {}
    for snapshot in snapshots.values():
        for type_url, type_snapshot in snapshot.types.items():
            for name, res in type_snapshot.resources.items():
                digests[(type_url, name)] = res.digest
    return digests


# --- the floor: the same messages, built directly --------------------------------------------
# Mirrors dragoman/envoy/*.py field for field; `verify_floor` checks the bytes are identical.

TYPE_PREFIX = "type.googleapis.com/"


def _pack(message: Message) -> any_pb2.Any:
    return any_pb2.Any(
        type_url=TYPE_PREFIX + message.DESCRIPTOR.full_name,
        value=message.SerializeToString(deterministic=True),
    )


def _ads() -> config_source_pb2.ConfigSource:
    return config_source_pb2.ConfigSource(
        ads=config_source_pb2.AggregatedConfigSource(), resource_api_version=config_source_pb2.V3
    )


def _address(host: str, port: int) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(
            address=host, port_value=port, protocol=address_pb2.SocketAddress.TCP
        )
    )


def _lb_endpoint(host: str, port: int, hostname: str = "") -> endpoint_components_pb2.LbEndpoint:
    return endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(address=_address(host, port), hostname=hostname)
    )


def floor(n: int, l4: bool = False) -> tuple[float, dict[tuple[str, str], str]]:
    """Seconds to build, serialize and sha256 every resource; and the digests, for checking."""
    half = n // 2
    digests: dict[tuple[str, str], str] = {}
    cluster_url = TYPE_PREFIX + cluster_pb2.Cluster.DESCRIPTOR.full_name
    cla_url = TYPE_PREFIX + endpoint_pb2.ClusterLoadAssignment.DESCRIPTOR.full_name
    listener_url = TYPE_PREFIX + listener_pb2.Listener.DESCRIPTOR.full_name
    route_url = TYPE_PREFIX + route_pb2.RouteConfiguration.DESCRIPTOR.full_name
    listener_name = f"http-{LISTENER_PORT}"

    def emit(type_url: str, name: str, message: Message) -> None:
        body = message.SerializeToString(deterministic=True)
        digests[(type_url, name)] = hashlib.sha256(body).hexdigest()

    start = clock()
    tls_chains: list[tuple[str, listener_components_pb2.FilterChain]] = []
    for i in range(half):
        kind = route_kind(i, l4)
        # TCP and TLS routes use one Service each, through a cluster named for the protocol.
        suffix = "" if kind == "HTTPRoute" else "/tcp"
        if kind == "TCPRoute":
            port = TCP_BASE_PORT + i
            name = f"tcp-{port}"
            emit(
                listener_url,
                name,
                listener_pb2.Listener(
                    name=name,
                    address=_address("0.0.0.0", port),
                    filter_chains=[
                        listener_components_pb2.FilterChain(
                            name=name,
                            filters=[_tcp_proxy(name, f"{NAMESPACE}/{pod_service_name(i)}/80/tcp")],
                        )
                    ],
                ),
            )
        elif kind == "TLSRoute":
            chain = listener_components_pb2.FilterChain(
                name=f"tls-{TLS_PORT}/tls/{NAMESPACE}/route-{i}",
                filter_chain_match=listener_components_pb2.FilterChainMatch(
                    server_names=[route_hostname(i)]
                ),
                filters=[
                    _tcp_proxy(
                        f"tls-{TLS_PORT}",
                        f"{NAMESPACE}/{external_service_name(i)}/{SERVICE_PORT_NAME}/tcp",
                    )
                ],
            )
            tls_chains.append((f"route-{i}", chain))
        if kind != "TLSRoute":
            _emit_eds(emit, cluster_url, cla_url, i, suffix)
        if kind != "TCPRoute":
            _emit_dns(emit, cluster_url, i, suffix)
    if tls_chains:
        # Routes in name order, as the DAG serves them; the TLS inspector reads the SNI.
        emit(
            listener_url,
            f"tls-{TLS_PORT}",
            listener_pb2.Listener(
                name=f"tls-{TLS_PORT}",
                address=_address("0.0.0.0", TLS_PORT),
                filter_chains=[chain for _, chain in sorted(tls_chains, key=lambda c: c[0])],
                listener_filters=[
                    listener_components_pb2.ListenerFilter(
                        name="envoy.filters.listener.tls_inspector",
                        typed_config=_pack(tls_inspector_pb2.TlsInspector()),
                    )
                ],
            ),
        )
    _emit_http(emit, listener_url, route_url, listener_name, half, l4)
    return clock() - start, digests


def _tcp_proxy(stat_prefix: str, cluster: str) -> listener_components_pb2.Filter:
    log_fields = struct_pb2.Struct()
    log_fields.update(L4_ACCESS_LOG_JSON_FIELDS)
    stdout = stream_pb2.StdoutAccessLog(
        log_format=substitution_format_string_pb2.SubstitutionFormatString(json_format=log_fields)
    )
    access_log = accesslog_pb2.AccessLog(
        name="envoy.access_loggers.stdout", typed_config=_pack(stdout)
    )
    proxy = tcp_proxy_pb2.TcpProxy(
        stat_prefix=stat_prefix, cluster=cluster, access_log=[access_log]
    )
    return listener_components_pb2.Filter(
        name="envoy.filters.network.tcp_proxy", typed_config=_pack(proxy)
    )


def _emit_eds(
    emit: Callable[[str, str, Message], None], cluster_url: str, cla_url: str, i: int, suffix: str
) -> None:
    # EDS cluster over ADS, and its CLA (3 ready endpoints, no zone, weight 3).
    eds_name = f"{NAMESPACE}/{pod_service_name(i)}/{SERVICE_PORT}{suffix}"
    emit(
        cluster_url,
        eds_name,
        cluster_pb2.Cluster(
            name=eds_name,
            type=cluster_pb2.Cluster.EDS,
            eds_cluster_config=cluster_pb2.Cluster.EdsClusterConfig(eds_config=_ads()),
            lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        ),
    )
    addresses = endpoint_addresses(i)
    emit(
        cla_url,
        eds_name,
        endpoint_pb2.ClusterLoadAssignment(
            cluster_name=eds_name,
            endpoints=[
                endpoint_components_pb2.LocalityLbEndpoints(
                    # An empty locality, always present (gRPC clients require it).
                    locality=base_pb2.Locality(),
                    load_balancing_weight=wrappers_pb2.UInt32Value(value=len(addresses)),
                    lb_endpoints=[_lb_endpoint(a, TARGET_PORT) for a in addresses],
                )
            ],
        ),
    )


def _emit_dns(
    emit: Callable[[str, str, Message], None], cluster_url: str, i: int, suffix: str
) -> None:
    # STRICT_DNS through the envoy.cluster.dns extension, with an inline load assignment.
    # Named for the Service's port name, which survives a change of the port's number.
    dns_name = f"{NAMESPACE}/{external_service_name(i)}/{SERVICE_PORT_NAME}{suffix}"
    host = external_host(i)
    settings = dns_cluster_pb2.DnsCluster(
        dns_refresh_rate=duration_pb2.Duration(seconds=30),
        respect_dns_ttl=True,
        dns_lookup_family=dns_pb2.V4_PREFERRED,
        all_addresses_in_single_endpoint=False,
    )
    emit(
        cluster_url,
        dns_name,
        cluster_pb2.Cluster(
            name=dns_name,
            cluster_type=cluster_pb2.Cluster.CustomClusterType(
                name="envoy.cluster.dns", typed_config=_pack(settings)
            ),
            lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
            load_assignment=endpoint_pb2.ClusterLoadAssignment(
                cluster_name=dns_name,
                endpoints=[
                    endpoint_components_pb2.LocalityLbEndpoints(
                        # Resolved as an absolute name (trailing dot): no search list.
                        lb_endpoints=[_lb_endpoint(f"{host}.", SERVICE_PORT, hostname=host)]
                    )
                ],
            ),
        ),
    )


def _emit_http(
    emit: Callable[[str, str, Message], None],
    listener_url: str,
    route_url: str,
    listener_name: str,
    half: int,
    l4: bool,
) -> None:
    # The one listener: HTTP connection manager fetching its routes over ADS, with the
    # default access log (JSON lines on standard output).
    log_fields = struct_pb2.Struct()
    log_fields.update(ACCESS_LOG_JSON_FIELDS)
    stdout = stream_pb2.StdoutAccessLog(
        log_format=substitution_format_string_pb2.SubstitutionFormatString(json_format=log_fields)
    )
    manager = hcm_pb2.HttpConnectionManager(
        access_log=[
            accesslog_pb2.AccessLog(name="envoy.access_loggers.stdout", typed_config=_pack(stdout))
        ],
        stat_prefix=listener_name,
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        rds=hcm_pb2.Rds(config_source=_ads(), route_config_name=listener_name),
        http_filters=[
            hcm_pb2.HttpFilter(name="envoy.filters.http.cors", typed_config=_pack(cors_pb2.Cors())),
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.router", typed_config=_pack(router_pb2.Router())
            ),
        ],
        upgrade_configs=[hcm_pb2.HttpConnectionManager.UpgradeConfig(upgrade_type="websocket")],
        strip_any_host_port=True,
        normalize_path=wrappers_pb2.BoolValue(value=True),
        merge_slashes=True,
    )
    emit(
        listener_url,
        listener_name,
        listener_pb2.Listener(
            name=listener_name,
            address=_address("0.0.0.0", LISTENER_PORT),
            filter_chains=[
                listener_components_pb2.FilterChain(
                    filters=[
                        listener_components_pb2.Filter(
                            name="envoy.filters.network.http_connection_manager",
                            typed_config=_pack(manager),
                        )
                    ]
                )
            ],
        ),
    )

    # One route table: a virtual host per route hostname (sorted), Exact before PathPrefix.
    virtual_hosts = []
    http = (i for i in range(half) if route_kind(i, l4) == "HTTPRoute")
    for domain, i in sorted((route_hostname(i), i) for i in http):
        source = f"{NAMESPACE}/route-{i}/rule"
        virtual_hosts.append(
            route_components_pb2.VirtualHost(
                name=domain,
                domains=[domain],
                routes=[
                    route_components_pb2.Route(
                        name=f"{source}/1",
                        match=route_components_pb2.RouteMatch(path="/ext"),
                        route=route_components_pb2.RouteAction(
                            cluster=f"{NAMESPACE}/{external_service_name(i)}/{SERVICE_PORT_NAME}",
                            auto_host_rewrite=wrappers_pb2.BoolValue(value=True),
                        ),
                    ),
                    route_components_pb2.Route(
                        name=f"{source}/0",
                        match=route_components_pb2.RouteMatch(path_separated_prefix="/api"),
                        route=route_components_pb2.RouteAction(
                            cluster=f"{NAMESPACE}/{pod_service_name(i)}/{SERVICE_PORT}"
                        ),
                    ),
                ],
            )
        )
    emit(
        route_url,
        listener_name,
        route_pb2.RouteConfiguration(
            name=listener_name,
            virtual_hosts=virtual_hosts,
            validate_clusters=wrappers_pb2.BoolValue(value=False),
        ),
    )


def floor_mismatch(
    n: int, floor_digests: Mapping[tuple[str, str], str], snapshots: Mapping[str, Snapshot]
) -> str | None:
    """None when the floor produced exactly dragoman's bytes; else what differs.

    The floor only means something if it does the same work: a mismatch means dragoman's
    output changed shape and `floor` must follow it.
    """
    ours = dragoman_digests(snapshots)
    if ours != floor_digests:
        missing = sorted(set(ours) - set(floor_digests))[:3]
        extra = sorted(set(floor_digests) - set(ours))[:3]
        differ = sorted(k for k in set(ours) & set(floor_digests) if ours[k] != floor_digests[k])
        return (
            f"N={n}: the floor does not mirror dragoman's output: only in dragoman {missing}, "
            f"only in the floor {extra}, different bytes {differ[:3]} ({len(differ)} in all)"
        )
    return None


# --- measurement helpers ---------------------------------------------------------------------


@dataclass
class Timings:
    samples: list[float] = dataclasses.field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


@dataclass
class SizeResult:
    n: int
    floor: Timings
    build: Timings
    translate: Timings
    total: Timings
    tracemalloc_peak_mib: float
    floor_peak_mib: float  # the floor's own tracemalloc peak, for the same N
    rss_growth_mib: float
    floor_mismatch: str | None


def traced_peak_mib(phase: Callable[[], object]) -> float:
    """tracemalloc peak of one call, above what was allocated before it."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    baseline, _ = tracemalloc.get_traced_memory()
    result = phase()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return (peak - baseline) / MIB


def rss_growth_mib(n: int, l4: bool = False) -> float:
    """ru_maxrss growth over build+translate, in a fresh process so earlier runs do not mask it.

    Linux carries ru_maxrss across fork and exec, so call this before this process grows.
    """
    completed = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(n), *(["--l4"] if l4 else [])],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(completed.stdout)["rss_growth_mib"])


def rss_child(n: int, l4: bool = False) -> None:
    store = Store.from_objects(synthesize(n, l4))
    gc.collect()
    # Linux reports ru_maxrss in KiB.
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _, _, snapshots = dragoman_phases(store)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del snapshots
    print(json.dumps({"rss_growth_mib": (after - before) / 1024}))


def measure_size(n: int, repeat: int, rss_mib: float, l4: bool = False) -> SizeResult:
    store = Store.from_objects(synthesize(n, l4))
    mismatch: str | None = None
    floor_t, build_t, translate_t, total_t = Timings(), Timings(), Timings(), Timings()
    for attempt in range(repeat):
        # Interleaved, so drift on a shared machine hits both sides alike.
        gc.collect()
        seconds, digests = floor(n, l4)
        floor_t.samples.append(seconds)
        del digests
        gc.collect()
        build_s, translate_s, snapshots = dragoman_phases(store)
        build_t.samples.append(build_s)
        translate_t.samples.append(translate_s)
        total_t.samples.append(build_s + translate_s)
        if attempt == 0:
            mismatch = floor_mismatch(n, floor(n, l4)[1], snapshots)
        del snapshots
    peak = traced_peak_mib(lambda: dragoman_phases(store))
    floor_peak = traced_peak_mib(lambda: floor(n, l4))
    return SizeResult(
        n, floor_t, build_t, translate_t, total_t, peak, floor_peak, rss_mib, mismatch
    )


def measure_eds(n: int, repeat: int, l4: bool = False) -> tuple[Timings, Timings, int]:
    """One EndpointSlice changes: refresh the DAG's load assignments, re-translate endpoints."""
    store = Store.from_objects(synthesize(n, l4))
    dag = build(store)
    previous = translate(dag)
    changed = endpoint_slice(0, generation=1)
    slices = dict(store.endpoint_slices)
    slices[(changed.meta.namespace, changed.meta.name)] = changed
    store2 = dataclasses.replace(store, endpoint_slices=slices)
    assert set(store_changes(store, store2)) == {"endpoint_slices"}  # the EDS fast path

    refresh_t, translate_t = Timings(), Timings()
    changed_clas = 0
    for _ in range(repeat):
        gc.collect()
        start = clock()
        dag2 = refresh_load_assignments(dag, store2, store)
        refreshed = clock()
        snapshots = translate_endpoints(dag2, previous)
        done = clock()
        refresh_t.samples.append(refreshed - start)
        translate_t.samples.append(done - refreshed)
        changed_clas = _changed_resources(previous, snapshots, ENDPOINT)
    return refresh_t, translate_t, changed_clas


def _changed_resources(
    before: Mapping[str, Snapshot], after: Mapping[str, Snapshot], type_url: str
) -> int:
    old, new = dragoman_digests(before), dragoman_digests(after)
    return sum(1 for key, digest in new.items() if key[0] == type_url and old.get(key) != digest)


def profile(n: int, l4: bool = False) -> None:
    """cProfile to stderr, then the cyclic GC's share, which cProfile charges to whatever ran."""
    store = Store.from_objects(synthesize(n, l4))
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    dragoman_phases(store)
    profiler.disable()
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(15)
        print(f"--- cProfile of build+translate, N={n:,}, top 15 by {order} ---", file=sys.stderr)
        print(out.getvalue(), file=sys.stderr)
    print(f"--- cyclic GC during build+translate, N={n:,} ---", file=sys.stderr)
    for label, setup in (
        ("gc enabled", lambda: None),
        ("store gc.freeze()d", gc.freeze),
        ("gc disabled", gc.disable),
    ):
        pauses = _gc_pauses(store, setup)
        print(
            f"{label:>18}: build {pauses.build:.3f} s, translate {pauses.translate:.3f} s, "
            f"{pauses.count} collections ({pauses.full} full) taking {pauses.seconds:.3f} s",
            file=sys.stderr,
        )


@dataclass
class GcPauses:
    build: float = 0.0
    translate: float = 0.0
    count: int = 0
    full: int = 0
    seconds: float = 0.0


def _gc_pauses(store: Store, setup: Callable[[], None]) -> GcPauses:
    pauses = GcPauses()
    started = 0.0

    def on_gc(phase: str, info: dict[str, int]) -> None:
        nonlocal started
        if phase == "start":
            started = time.perf_counter()
            return
        pauses.count += 1
        pauses.full += info["generation"] == 2
        pauses.seconds += time.perf_counter() - started

    gc.collect()
    setup()
    gc.callbacks.append(on_gc)
    try:
        pauses.build, pauses.translate, _ = dragoman_phases(store)
    finally:
        gc.callbacks.remove(on_gc)
        gc.enable()
        gc.unfreeze()
    return pauses


# --- report ----------------------------------------------------------------------------------


def print_table(results: list[SizeResult], repeat: int) -> None:
    header = (
        f"{'N':>7} {'stat':>6} {'floor s':>8} {'build s':>8} {'transl s':>9} {'total s':>8} "
        f"{'ratio':>6} {'tm peak MiB':>11} {'floor MiB':>9} {'RSS MiB':>8}"
    )
    what = "CPU time" if clock is time.process_time else "wall time"
    print(f"build+translate vs the protobuf floor ({what}, best and median of {repeat})")
    print(header)
    print("-" * len(header))
    for r in results:
        for stat in ("best", "median"):
            floor_s = getattr(r.floor, stat)
            total_s = getattr(r.total, stat)
            print(
                f"{r.n:>7,} {stat:>6} {floor_s:>8.3f} {getattr(r.build, stat):>8.3f} "
                f"{getattr(r.translate, stat):>9.3f} {total_s:>8.3f} {total_s / floor_s:>6.2f} "
                f"{r.tracemalloc_peak_mib:>11.1f} {r.floor_peak_mib:>9.1f} {r.rss_growth_mib:>8.1f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated Service counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (best and median)")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest size")
    parser.add_argument("--check", action="store_true", help="exit 1 if the target is missed")
    parser.add_argument("--l4", action="store_true", help="half the routes TCPRoutes and TLSRoutes")
    parser.add_argument(
        "--cpu", action="store_true", help="time with this process's CPU time, not wall time"
    )
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child is not None:
        rss_child(args.rss_child, args.l4)
        return 0

    if args.cpu:
        global clock
        clock = time.process_time
    sizes = sorted(int(s.replace("_", "")) for s in args.sizes.split(","))
    repeat = max(1, args.repeat)
    # First, while this process is small: a child inherits its ru_maxrss.
    rss = {n: rss_growth_mib(n, args.l4) for n in sizes}
    results = [measure_size(n, repeat, rss[n], args.l4) for n in sizes]
    if args.l4:
        print("routes: half HTTPRoutes, a quarter TCPRoutes, a quarter TLSRoutes (--l4)")
    print_table(results, repeat)
    mismatches = [r.floor_mismatch for r in results if r.floor_mismatch is not None]
    print(
        "floor: the same Cluster/CLA/Listener/RouteConfiguration messages built with protobuf\n"
        "       directly, serialized deterministically and sha256'd: "
        + ("WARNING, NOT the bytes dragoman emits" if mismatches else "bytes identical (checked)")
    )
    for mismatch in mismatches:
        print(f"WARNING: {mismatch}")
    print(
        "ratio: total/floor; tm peak: tracemalloc peak of build+translate (floor MiB: of the\n"
        "       floor, same N); RSS: ru_maxrss growth over build+translate in a fresh process"
    )

    largest = sizes[-1]
    refresh_t, eds_t, changed = measure_eds(largest, repeat, args.l4)
    full = next(r for r in results if r.n == largest).total
    print(
        f"EDS fast path, N={largest:,}, one EndpointSlice changed ({changed} CLA re-serialized): "
        f"refresh {refresh_t.best * 1e3:.1f} ms + translate_endpoints {eds_t.best * 1e3:.1f} ms "
        f"= {(refresh_t.best + eds_t.best) * 1e3:.1f} ms best, "
        f"{(refresh_t.median + eds_t.median) * 1e3:.1f} ms median "
        f"(full rebuild {full.best * 1e3:.0f} ms)"
    )

    if args.profile:
        profile(largest, args.l4)

    target = next((r for r in results if r.n == 10_000), results[-1])
    ratio = target.total.best / target.floor.best
    verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    print(
        f"target: total within {TARGET_RATIO:g}x the floor -> {verdict} (ratio {ratio:.2f}"
        f"{'' if target.n == 10_000 else f', N={target.n:,}'})"
    )
    return 1 if args.check and (verdict == "FAIL" or mismatches) else 0


if __name__ == "__main__":
    sys.exit(main())
