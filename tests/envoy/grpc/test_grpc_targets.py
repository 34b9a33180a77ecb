"""What a node group's proxyless gRPC clients can dial: the build's Service targets and the
exact route hostnames of the group's ports."""

from __future__ import annotations

from dragoman.dag.build import build
from dragoman.dag.model import (
    MISDIRECTED,
    ApiListener,
    Backend,
    Forward,
    HttpsListener,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    ServiceTargets,
    TlsFilterChain,
    VirtualHost,
)
from dragoman.envoy.grpc.grpc_targets import group_targets, route_targets, service_listener
from dragoman.objects import ObjectKey
from tests.support.proxyless import API, GREETER, ROUTES, SERVICES, SHOP, WEB, store_of

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


def _service_listeners(targets: ServiceTargets) -> list[ApiListener]:
    return [service_listener(target) for target in targets.targets]


def test_a_service_target_sends_every_call_to_its_ports_cluster() -> None:
    targets = build(store_of(SERVICES)).service_targets
    by_name = {listener.name: listener for listener in _service_listeners(targets)}
    [route] = by_name[WEB].routes
    assert route.action == Forward(backends=(Backend("default/web/50051", 1),))
    assert route.source == ObjectKey("Service", "default", "web")
    assert by_name[WEB].host == "web.default.svc.cluster.local"
    # An external name's clients may rewrite the authority to it (gRFC A81).
    [external] = by_name[API].routes
    assert isinstance(external.action, Forward) and external.action.auto_host_rewrite


def forward(cluster: str) -> Route:
    return Route(RouteMatch("PathPrefix", "/"), Forward(backends=(Backend(cluster, 1),)), SOURCE)


def test_exact_route_hostnames_on_each_port_are_targets() -> None:
    dag = build(store_of(SERVICES, ROUTES))
    names = [target.name for target in route_targets(dag.groups["default/gw"])]
    # *.wild.example.com is not one name a client can dial.
    assert names == [GREETER, SHOP]


def test_each_gateway_group_dials_its_own_hostnames_and_a_route_wins_over_a_service() -> None:
    dag = build(store_of(SERVICES, ROUTES, SECOND_GATEWAY))
    services = _service_listeners(build(store_of(SERVICES)).service_targets)
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
    services = _service_listeners(build(store_of(SERVICES)).service_targets)
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
