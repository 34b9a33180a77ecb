"""The resources proxyless gRPC clients are served: API listeners, gRPC-readable routes,
LOGICAL_DNS under aggregate clusters, weighted localities; shared and made only on demand."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import (
    ALL_GATEWAYS,
    ApiListener,
    Backend,
    DirectResponse,
    Forward,
    NodeGroup,
    Retry,
    Route,
    RouteMatch,
    ValueMatch,
)
from dragoman.dag.options import BuildOptions
from dragoman.envoy.grpc import grpc_snapshots
from dragoman.envoy.grpc.grpc_messages import (
    FAILING_CLUSTER,
    grpc_route,
    grpc_route_configuration,
)
from dragoman.envoy.grpc.grpc_snapshots import GrpcSnapshots
from dragoman.envoy.grpc.grpc_targets import group_targets
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.objects import ObjectKey
from dragoman.runtime.controller import Controller
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE, Snapshot
from dragoman.xds.protocol.client_kind import grpc_group, is_grpc_client, split_group
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.envoy_checks import problems_in
from tests.support.proxyless import (
    API,
    ENVOY_NODE,
    GREETER,
    GRPC_NODE,
    HYBRID,
    ROUTES,
    SECURE,
    SERVICES,
    SHOP,
    WEB,
    decoded,
    grpc_snapshot,
    serving,
    store_of,
)

ROUTER_TYPE = "type.googleapis.com/" + router_pb2.Router.DESCRIPTOR.full_name
HCM_TYPE = "type.googleapis.com/" + hcm_pb2.HttpConnectionManager.DESCRIPTOR.full_name
SOURCE = ObjectKey("HTTPRoute", "default", "r")
FAILING = FAILING_CLUSTER.name


@pytest.fixture(scope="module")
def served() -> tuple[SnapshotCache, Snapshot]:
    _, cache = serving(SERVICES, ROUTES)
    return cache, grpc_snapshot(cache)


def manager(snapshot: Snapshot, name: str) -> hcm_pb2.HttpConnectionManager:
    listener = decoded(snapshot, LISTENER, name)
    assert isinstance(listener, listener_pb2.Listener)
    config = listener.api_listener.api_listener
    assert config.type_url == HCM_TYPE
    return hcm_pb2.HttpConnectionManager.FromString(config.value)


def cluster(snapshot: Snapshot, name: str) -> cluster_pb2.Cluster:
    message = decoded(snapshot, CLUSTER, name)
    assert isinstance(message, cluster_pb2.Cluster)
    return message


def aggregate_children(message: cluster_pb2.Cluster) -> list[str]:
    assert message.cluster_type.name == "envoy.clusters.aggregate"
    config = aggregate_pb2.ClusterConfig.FromString(message.cluster_type.typed_config.value)
    return list(config.clusters)


def route_table(snapshot: Snapshot, name: str) -> route_pb2.RouteConfiguration:
    message = decoded(snapshot, ROUTE, name)
    assert isinstance(message, route_pb2.RouteConfiguration)
    return message


# The listener a target is dialed by.


def test_every_target_is_an_api_listener_fetching_its_routes_over_ads(served) -> None:
    _, snapshot = served
    names = set(snapshot.of_type(LISTENER).resources)
    assert names == {WEB, API, SECURE, HYBRID, GREETER, SHOP}
    for name in names:
        listener = decoded(snapshot, LISTENER, name)
        assert isinstance(listener, listener_pb2.Listener)
        assert listener.name == name
        assert not listener.HasField("address")  # an API listener binds nothing
        hcm = manager(snapshot, name)
        assert hcm.rds.route_config_name == name
        assert hcm.rds.config_source.WhichOneof("config_source_specifier") == "ads"
        assert hcm.http_filters, "gRPC rejects an empty filter list"
        assert hcm.http_filters[-1].typed_config.type_url == ROUTER_TYPE


def test_the_virtual_host_matches_the_authority_the_client_dials(served) -> None:
    _, snapshot = served
    for name in (WEB, GREETER):
        [virtual_host] = route_table(snapshot, name).virtual_hosts
        assert name in virtual_host.domains
        assert name.rsplit(":", 1)[0] in virtual_host.domains


def test_a_service_target_sends_every_call_to_its_cluster(served) -> None:
    _, snapshot = served
    [virtual_host] = route_table(snapshot, WEB).virtual_hosts
    [route] = virtual_host.routes
    assert route.match.prefix == "/"
    assert route.route.cluster == "default/web/50051"


def test_no_listener_for_unsafe_names_or_udp_ports(served) -> None:
    _, snapshot = served
    names = set(snapshot.of_type(LISTENER).resources)
    assert "sneaky.default.svc.cluster.local:80" not in names  # externalName: localhost
    assert "web.default.svc.cluster.local:53" not in names  # UDP


# Clusters and endpoints.


def test_a_pod_backed_service_is_an_eds_cluster_with_weighted_localities(served) -> None:
    _, snapshot = served
    message = cluster(snapshot, "default/web/50051")
    assert message.type == cluster_pb2.Cluster.EDS
    assert message.eds_cluster_config.eds_config.WhichOneof("config_source_specifier") == "ads"
    assert message.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    assignment = decoded(snapshot, ENDPOINT, "default/web/50051")
    localities = {
        group.locality.zone: (group.load_balancing_weight.value, len(group.lb_endpoints))
        for group in assignment.endpoints  # type: ignore[attr-defined]
    }
    # gRPC skips a locality without a weight; weights follow endpoint counts.
    assert localities == {"zone-a": (2, 2), "zone-b": (1, 1)}


def test_an_external_name_is_logical_dns_under_an_aggregate(served) -> None:
    _, snapshot = served
    top = cluster(snapshot, "default/api/8000")
    assert top.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN  # gRPC NACKs CLUSTER_PROVIDED
    assert aggregate_children(top) == ["default/api/8000/logical-dns"]
    child = cluster(snapshot, "default/api/8000/logical-dns")
    assert child.type == cluster_pb2.Cluster.LOGICAL_DNS
    assert child.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    [locality] = child.load_assignment.endpoints
    [endpoint] = locality.lb_endpoints
    address = endpoint.endpoint.address.socket_address
    # Absolute: the client's resolver never tries search domains (another namespace) first.
    assert (address.address, address.port_value) == ("api.example.com.", 8000)
    assert not address.resolver_name
    assert not child.HasField("cluster_type")  # no DNS cluster extension: gRPC rejects it


def test_envoy_keeps_strict_dns_for_the_same_service(served) -> None:
    cache, _ = served
    envoy = cache.snapshot_for(cache.group_for("default/gw"))
    message = cluster_pb2.Cluster.FromString(
        envoy.of_type(CLUSTER).resources["default/api/8000/h2c"].body
    )
    assert message.cluster_type.name == "envoy.cluster.dns"
    assert "default/api/8000/h2c/logical-dns" not in envoy.of_type(CLUSTER).resources


def test_in_cluster_first_keeps_eds_first_and_falls_back_to_logical_dns(served) -> None:
    _, snapshot = served
    top = cluster(snapshot, "default/hybrid/50051")
    assert aggregate_children(top) == ["default/web/50051", "default/hybrid/50051/external"]
    assert top.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    fallback = cluster(snapshot, "default/hybrid/50051/external")
    assert fallback.type == cluster_pb2.Cluster.LOGICAL_DNS
    address = fallback.load_assignment.endpoints[0].lb_endpoints[0].endpoint.address
    assert address.socket_address.address == "legacy.example.com."
    assert "default/web/50051" in snapshot.of_type(ENDPOINT).resources


def test_only_eds_logical_dns_and_aggregate_clusters_are_served(served) -> None:
    _, snapshot = served
    for name in snapshot.of_type(CLUSTER).resources:
        message = cluster(snapshot, name)
        if message.HasField("cluster_type"):
            assert message.cluster_type.name == "envoy.clusters.aggregate", name
        else:
            assert message.type in (cluster_pb2.Cluster.EDS, cluster_pb2.Cluster.LOGICAL_DNS)
        assert message.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN, name


def test_upstream_tls_is_never_served_in_cleartext(served) -> None:
    """gRPC takes TLS certificates from its own bootstrap: a TLS cluster is left out and
    calls routed to it fail at once (routed to the failing cluster)."""
    _, snapshot = served
    assert "default/secure/443" not in snapshot.of_type(CLUSTER).resources
    [virtual_host] = route_table(snapshot, SECURE).virtual_hosts
    [route] = virtual_host.routes
    assert route.route.cluster == FAILING


def test_calls_that_must_fail_go_to_an_eds_cluster_without_endpoints(served) -> None:
    """gRPC clients fail them at once with UNAVAILABLE. A route without an action would make
    grpc-js refuse the whole RouteConfiguration; a cluster that does not exist, grpcio wait
    15 s before it fails them."""
    _, snapshot = served
    failing = cluster(snapshot, FAILING)
    assert failing.type == cluster_pb2.Cluster.EDS
    assert failing.eds_cluster_config.eds_config.WhichOneof("config_source_specifier") == "ads"
    assignment = decoded(snapshot, ENDPOINT, FAILING)
    assert isinstance(assignment, endpoint_pb2.ClusterLoadAssignment)
    assert assignment.cluster_name == FAILING and not assignment.endpoints


def test_the_failing_cluster_is_served_only_when_a_route_needs_it() -> None:
    _, cache = serving(SERVICES.split("---")[0])
    snapshot = grpc_snapshot(cache)
    assert set(snapshot.of_type(CLUSTER).resources) == {"default/web/50051"}
    assert FAILING not in snapshot.of_type(ENDPOINT).resources


# Routes in what gRPC matches on.


def test_grpc_route_methods_become_paths_and_service_prefixes(served) -> None:
    _, snapshot = served
    [virtual_host] = route_table(snapshot, GREETER).virtual_hosts
    method, service, catch_all = virtual_host.routes
    assert method.match.path == "/helloworld.Greeter/SayHello"
    assert service.match.prefix == "/helloworld.Greeter/"
    weights = {c.name: c.weight.value for c in service.route.weighted_clusters.clusters}
    assert weights == {"default/web/50051/h2c": 3, "default/api/8000/h2c": 1}
    assert catch_all.route.cluster == FAILING  # only a TLS backend


def test_http_route_rules_gRPC_cannot_match_are_left_out(served) -> None:
    _, snapshot = served
    [virtual_host] = route_table(snapshot, SHOP).virtual_hosts
    assert [route.name for route in virtual_host.routes] == [
        "default/shop/rule/0",  # the prefix of a service
        "default/shop/rule/4",  # a redirect: fails the call
        "default/shop/rule/5",  # a header match to a missing Service: fails the call
    ]
    cart, redirect, missing = virtual_host.routes
    assert cart.match.prefix == "/shop.Cart/"
    assert cart.route.max_stream_duration.max_stream_duration.seconds == 10
    # gRPC NACKs a retry policy without retries, which is how Envoy bounds one try.
    assert not cart.route.HasField("retry_policy")
    assert redirect.route.cluster == FAILING
    assert missing.match.headers[0].name == "x-tenant"
    assert missing.route.cluster == FAILING


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (RouteMatch("PathPrefix", "/"), {"prefix": "/"}),
        (RouteMatch("PathPrefix", "/pkg.Svc/"), {"prefix": "/pkg.Svc/"}),
        (RouteMatch("PathPrefix", "/pkg.Svc/Call"), {"path": "/pkg.Svc/Call"}),
        (RouteMatch("Exact", "/pkg.Svc/Call"), {"path": "/pkg.Svc/Call"}),
        (RouteMatch("RegularExpression", "/pkg\\..*/Call"), {"safe_regex": "/pkg\\..*/Call"}),
        (RouteMatch("PathPrefix", "/", method="POST"), {"prefix": "/"}),
        (RouteMatch("PathPrefix", "/a/b/c"), None),
        (RouteMatch("PathPrefix", "/", method="GET"), None),
        (RouteMatch("PathPrefix", "/", query_params=(ValueMatch("q", "1"),)), None),
    ],
)
def test_route_matches(match: RouteMatch, expected: dict[str, str] | None) -> None:
    forward = Forward(backends=(Backend("c", 1),))
    message = grpc_route(Route(match, forward, SOURCE))
    if expected is None:
        assert message is None
        return
    assert message is not None
    path = message.match.WhichOneof("path_specifier")
    value = getattr(message.match, path)
    assert {path: value.regex if path == "safe_regex" else value} == expected
    assert not message.match.headers  # a POST needs no :method matcher


def test_an_invalid_share_keeps_failing_and_all_invalid_fails_every_call() -> None:
    split = Forward(backends=(Backend("c", 1), Backend(None, 1)))
    message = grpc_route(Route(RouteMatch("PathPrefix", "/"), split, SOURCE))
    assert message is not None
    assert [c.name for c in message.route.weighted_clusters.clusters] == [
        "c",
        "dragoman:invalid-backend",
    ]
    nothing = Forward(backends=(Backend(None, 1),))
    message = grpc_route(Route(RouteMatch("PathPrefix", "/"), nothing, SOURCE))
    assert message is not None and message.route.cluster == FAILING
    direct = grpc_route(Route(RouteMatch("PathPrefix", "/"), DirectResponse(500), SOURCE))
    assert direct is not None and direct.route.cluster == FAILING


def test_retries_become_what_grpc_retries_on() -> None:
    """gRFC A44: gRPC retries on gRPC status codes. Connection errors reach it as
    UNAVAILABLE, so does an HTTP 502, 503, 504 or 429, an HTTP 400 as INTERNAL; a 500 maps
    to UNKNOWN, which gRPC cannot retry on. No per-try timeout: gRPC has none."""
    retry = Retry(attempts=3, codes=(500, 503, 400, 502), backoff_ms=250)
    forward = Forward(backends=(Backend("c", 1),), per_try_timeout_ms=100, retry=retry)
    message = grpc_route(Route(RouteMatch("PathPrefix", "/"), forward, SOURCE))
    assert message is not None
    policy = message.route.retry_policy
    assert policy.retry_on == "unavailable,internal"
    assert policy.num_retries.value == 3
    assert policy.retry_back_off.base_interval.ToMilliseconds() == 250
    assert not policy.HasField("per_try_timeout")
    assert not policy.retriable_status_codes
    bare = Forward(backends=(Backend("c", 1),), retry=Retry(attempts=1))
    message = grpc_route(Route(RouteMatch("PathPrefix", "/"), bare, SOURCE))
    assert message is not None
    assert message.route.retry_policy.retry_on == "unavailable"
    assert not message.route.retry_policy.HasField("retry_back_off")


def test_a_target_named_by_ip_keeps_one_domain() -> None:
    route = Route(RouteMatch("PathPrefix", "/"), Forward(backends=(Backend("c", 1),)), SOURCE)
    table = grpc_route_configuration(ApiListener("x:1", "x:1", (route,)))
    assert list(table.virtual_hosts[0].domains) == ["x:1"]


def test_nothing_deprecated_is_emitted(served) -> None:
    _, snapshot = served
    for type_url, type_snapshot in snapshot.types.items():
        for name in type_snapshot.resources:
            assert list(problems_in(decoded(snapshot, type_url, name), name)) == []


# Who gets what, made when.


def test_grpc_nodes_are_told_apart_from_envoy() -> None:
    assert is_grpc_client(GRPC_NODE)
    assert not is_grpc_client(ENVOY_NODE)
    go = type(GRPC_NODE)(user_agent_name="gRPC Go")
    assert is_grpc_client(go)
    assert split_group(grpc_group("default/gw")) == ("default/gw", True)
    assert split_group("default/gw") == ("default/gw", False)


def test_a_grpc_client_of_a_gateway_gets_that_gateways_route_targets(served) -> None:
    cache, everything = served
    assert cache.group_for("default/gw", grpc=True) == grpc_group("default/gw")
    assert cache.group_for("checkout", grpc=True) == grpc_group(ALL_GATEWAYS)
    own = grpc_snapshot(cache, "default/gw")
    assert set(own.of_type(LISTENER).resources) == set(everything.of_type(LISTENER).resources)


def test_identical_resources_are_shared_with_envoy_and_between_groups(served) -> None:
    cache, snapshot = served
    envoy = cache.snapshot_for(ALL_GATEWAYS)
    name = "default/web/50051/h2c"
    assert snapshot.of_type(CLUSTER).resources[name] is envoy.of_type(CLUSTER).resources[name]
    assert snapshot.of_type(ENDPOINT).resources[name] is envoy.of_type(ENDPOINT).resources[name]
    other = grpc_snapshot(cache, "default/gw")
    assert other.of_type(LISTENER).resources[WEB] is snapshot.of_type(LISTENER).resources[WEB]
    assert grpc_snapshot(cache) is snapshot  # memoized until the next change


def test_nothing_is_translated_until_a_grpc_client_asks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def counted(group: NodeGroup, services: Iterable[ApiListener]) -> tuple[ApiListener, ...]:
        calls.append(group.name)
        return group_targets(group, services)

    monkeypatch.setattr(grpc_snapshots, "group_targets", counted)
    snapshots = GrpcSnapshots(build(store_of(SERVICES, ROUTES)), {})
    assert calls == []
    snapshot = snapshots.snapshot(ALL_GATEWAYS)
    assert WEB in snapshot.of_type(LISTENER).resources
    assert snapshots.snapshot(ALL_GATEWAYS) is snapshot
    assert calls == [ALL_GATEWAYS]


def test_an_update_reserializes_only_what_changed() -> None:
    controller, cache = serving(SERVICES, ROUTES)
    before = grpc_snapshot(cache)
    moved = SERVICES.replace("api.example.com.", "api2.example.com.")
    controller.update(store_of(moved, ROUTES))
    after = grpc_snapshot(cache)
    assert after is not before
    for type_url, name in ((LISTENER, WEB), (ROUTE, WEB), (CLUSTER, "default/web/50051")):
        assert after.of_type(type_url).resources[name] is before.of_type(type_url).resources[name]
    changed = "default/api/8000/logical-dns"
    assert after.of_type(CLUSTER).resources[changed] != before.of_type(CLUSTER).resources[changed]


def test_endpoint_changes_take_the_fast_path_to_grpc_clients_too() -> None:
    controller, cache = serving(SERVICES, ROUTES)
    before = grpc_snapshot(cache)
    result = controller.update(store_of(SERVICES.replace("10.0.1.1", "10.0.1.9"), ROUTES))
    assert result.kind == "endpoints"
    after = grpc_snapshot(cache)
    assignment = decoded(after, ENDPOINT, "default/web/50051")
    addresses = {
        e.endpoint.address.socket_address.address
        for group in assignment.endpoints  # type: ignore[attr-defined]
        for e in group.lb_endpoints
    }
    assert addresses == {"10.0.0.1", "10.0.0.2", "10.0.1.9"}
    assert after.of_type(LISTENER) == before.of_type(LISTENER)
    assert after.of_type(CLUSTER) == before.of_type(CLUSTER)
    assert controller.dag is not None
    assert (
        controller.dag.service_targets.load_assignments["default/web/50051"]
        == (controller.dag.load_assignments["default/web/50051"])
    )


def test_without_a_grpc_translation_grpc_clients_get_the_group_as_it_is() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    plain = Snapshot()
    cache.set_snapshots({ALL_GATEWAYS: plain})
    assert cache.snapshot_for(cache.group_for("", grpc=True)) is plain


def test_with_the_dns_check_grpc_clients_get_the_checked_addresses_over_eds() -> None:
    """No LOGICAL_DNS: the client connects only to what dragoman checked, as Envoy does."""
    cache = SnapshotCache()
    controller = Controller(cache, BuildOptions(dns_check=True))
    controller.dns = {
        "api.example.com": DnsObservation(("203.0.113.8",)),
        "legacy.example.com": DnsObservation(("203.0.113.9",)),
    }
    controller.update(store_of(SERVICES, ROUTES))
    snapshot = grpc_snapshot(cache)

    api = cluster(snapshot, "default/api/8000")
    assert api.type == cluster_pb2.Cluster.EDS
    assert not any(name.endswith("/logical-dns") for name in snapshot.of_type(CLUSTER).resources)
    cla = decoded(snapshot, ENDPOINT, "default/api/8000")
    [locality] = cla.endpoints  # type: ignore[attr-defined]
    assert locality.HasField("locality")  # gRPC requires one, zone or not
    [host] = locality.lb_endpoints
    assert host.endpoint.address.socket_address.address == "203.0.113.8"
    assert host.endpoint.hostname == "api.example.com"
    # In-cluster first: the EDS child first, the checked external addresses after it.
    top = cluster(snapshot, "default/hybrid/50051")
    assert aggregate_children(top) == ["default/web/50051", "default/hybrid/50051/external"]
    assert cluster(snapshot, "default/hybrid/50051/external").type == cluster_pb2.Cluster.EDS
    fallback = decoded(snapshot, ENDPOINT, "default/hybrid/50051/external")
    assert [
        h.endpoint.address.socket_address.address
        for p in fallback.endpoints  # type: ignore[attr-defined]
        for h in p.lb_endpoints
    ] == ["203.0.113.9"]
