"""What proxyless gRPC clients can dial: Service names and exact route hostnames."""

from __future__ import annotations

from dragoman.dag.build import build
from dragoman.dag.model import (
    AggregateCluster,
    Backend,
    DnsCluster,
    EdsCluster,
    Forward,
    HttpsListener,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    TlsFilterChain,
    VirtualHost,
)
from dragoman.dag.node_groups.groups import MISDIRECTED
from dragoman.dag.options import BuildOptions
from dragoman.dag.proxyless.targets import (
    group_targets,
    refreshed_service_targets,
    route_targets,
    service_host,
    service_targets,
)
from dragoman.objects import ObjectKey
from tests.support.proxyless import API, GREETER, HYBRID, ROUTES, SERVICES, SHOP, WEB
from tests.support.status_builds import store_of

SOURCE = ObjectKey("HTTPRoute", "default", "r")
SECOND_GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: other, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 9090}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: other, namespace: default}
spec:
  parentRefs: [{name: other}]
  hostnames: [web.default.svc.cluster.local, other.example.com]
  rules: [{backendRefs: [{name: api, port: 8000}]}]
"""


def forward(cluster: str) -> Route:
    return Route(RouteMatch("PathPrefix", "/"), Forward(backends=(Backend(cluster, 1),)), SOURCE)


def test_every_tcp_port_of_a_service_that_resolves_is_a_target() -> None:
    targets = service_targets(store_of(SERVICES), BuildOptions())
    by_name = {listener.name: listener for listener in targets.listeners}
    assert set(by_name) == {
        WEB,
        API,
        HYBRID,
        "secure.default.svc.cluster.local:443",
    }
    [route] = by_name[WEB].routes
    assert route.action == Forward(backends=(Backend("default/web/50051", 1),))
    assert by_name[WEB].host == "web.default.svc.cluster.local"
    external = targets.clusters["default/api/8000"]
    assert isinstance(external, DnsCluster)
    assert (external.hostname, external.port) == ("api.example.com", 8000)


def test_aggregates_bring_their_children_and_eds_clusters_their_endpoints() -> None:
    targets = service_targets(store_of(SERVICES), BuildOptions())
    hybrid = targets.clusters["default/hybrid/50051"]
    assert isinstance(hybrid, AggregateCluster)
    assert {child.name for child in hybrid.children} <= set(targets.clusters)
    assert isinstance(targets.clusters["default/web/50051"], EdsCluster)
    assignment = targets.load_assignments["default/web/50051"]
    assert sum(len(locality.endpoints) for locality in assignment.localities) == 3


def test_the_cluster_domain_names_the_targets() -> None:
    options = BuildOptions(cluster_domain="corp.internal.")
    targets = service_targets(store_of(SERVICES), options)
    assert "web.default.svc.corp.internal:50051" in {t.name for t in targets.listeners}
    assert service_host("ns", "svc", "Cluster.Local") == "svc.ns.svc.cluster.local"


def test_refreshing_endpoints_keeps_everything_else() -> None:
    before = store_of(SERVICES)
    targets = service_targets(before, BuildOptions())
    assert refreshed_service_targets(targets, before, before, BuildOptions()) is targets
    after = store_of(SERVICES.replace("10.0.0.2", "10.0.0.3"))
    refreshed = refreshed_service_targets(targets, after, before, BuildOptions())
    assert refreshed.listeners is targets.listeners
    assert refreshed.clusters is targets.clusters
    addresses = {
        endpoint.address
        for locality in refreshed.load_assignments["default/web/50051"].localities
        for endpoint in locality.endpoints
    }
    assert addresses == {"10.0.0.1", "10.0.0.3", "10.0.1.1"}


def test_exact_route_hostnames_on_each_port_are_targets() -> None:
    dag = build(store_of(SERVICES, ROUTES))
    names = [target.name for target in route_targets(dag.groups["default/gw"])]
    # *.wild.example.com is not one name a client can dial.
    assert names == [GREETER, SHOP]


def test_each_gateway_group_dials_its_own_hostnames_and_a_route_wins_over_a_service() -> None:
    dag = build(store_of(SERVICES, ROUTES, SECOND_GATEWAY))
    services = service_targets(store_of(SERVICES), BuildOptions())
    other = {t.name: t for t in group_targets(dag.groups["default/other"], services)}
    assert "other.example.com:9090" in other and GREETER not in other
    # The route's hostname on port 9090 is not the Service's port 50051: both stay.
    assert WEB in other
    clash = "web.default.svc.cluster.local:9090"
    assert clash in other
    [route] = other[clash].routes
    assert isinstance(route.action, Forward)
    assert route.action.backends[0].cluster == "default/api/8000"


def test_a_route_hostname_spelled_like_a_service_target_replaces_it() -> None:
    services = service_targets(store_of(SERVICES), BuildOptions())
    table = RouteTable(
        "http-50051",
        (VirtualHost("web.default.svc.cluster.local", ("x",), (forward("elsewhere"),)),),
    )
    group = NodeGroup(
        "g",
        (HttpsListener("https-50051", 50051, (TlsFilterChain((), (), "http-50051"),)),),
        (table,),
        (),
    )
    [replaced] = [t for t in group_targets(group, services) if t.name == WEB]
    assert replaced.routes == (forward("elsewhere"),)


def test_an_https_port_takes_the_hostnames_own_chain_not_the_421_ones() -> None:
    misdirected = Route(RouteMatch("PathPrefix", "/"), MISDIRECTED, SOURCE)
    tables = (
        RouteTable(
            "https-443/a.example.com", (VirtualHost("a.example.com", ("a",), (forward("a"),)),)
        ),
        RouteTable("https-443", (VirtualHost("a.example.com", ("a",), (misdirected,)),)),
    )
    listener = HttpsListener(
        "https-443",
        443,
        (
            TlsFilterChain(("a.example.com",), (), "https-443/a.example.com"),
            TlsFilterChain((), (), "https-443"),
        ),
    )
    [target] = route_targets(NodeGroup("g", (listener,), tables, ()))
    assert target.name == "a.example.com:443"
    assert target.routes == (forward("a"),)
    only_misdirected = NodeGroup("g", (listener,), tables[1:], ())
    assert route_targets(only_misdirected) == ()
