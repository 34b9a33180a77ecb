"""The /debug graph: TCP, TLS and UDP listeners with the routes they serve (a TLS route
with its SNI) and the Services and clusters they send to; a route's edges labelled with its
matches and weight shares; endpoints that are not ready apart; policies on their Services, as
the build judged them (Accepted, or why not)."""

from __future__ import annotations

import dataclasses

from dragoman.dag.build import build
from dragoman.dag.model import RouteMatch, ValueMatch
from dragoman.dag.options import BuildOptions
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.objects import ObjectKey
from dragoman.runtime.controller import Controller
from dragoman.runtime.debug.graph import LISTENER, ROUTE, build_graph, describe_match
from dragoman.runtime.debug.pages import dot
from dragoman.runtime.debug.view import DebugView, PolicyView, take_view
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.builders import (
    backend_policy,
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    match,
    rule,
    service,
    xbackend_traffic_policy,
)
from tests.support.feature_manifests import every_feature_dag
from tests.support.status_builds import store_of


def test_tcp_tls_and_udp_listeners_lead_to_their_routes_and_clusters() -> None:
    graph = build_graph(DebugView(dag=every_feature_dag()))
    labels = {node.label for node in graph.nodes.values() if node.column == LISTENER}
    assert {"tcp-9000 (tcp, port 9000)", "udp-9000 (udp, port 9000)"} <= labels
    assert "tls-8443 (tcp, port 8443)" in labels
    tcp = "listener default/edge tcp-9000"
    assert (tcp, "TCPRoute/default/database") in graph.edges
    assert ("TCPRoute/default/database", "Service/default/database") in graph.edges
    assert ("Service/default/database", "default/database/5432/tcp") in graph.edges
    assert ("listener default/edge udp-9000", "UDPRoute/default/logs") in graph.edges
    partner = graph.nodes["TLSRoute/default/partner"]
    assert partner.column == ROUTE
    assert "SNI: *.partner.example, api.partner.example" in partner.details


def _world() -> DebugView:
    store = store_of(
        gateway("edge", 8080),
        http_route(
            "shop",
            rules=[
                rule(
                    backend_ref("web", 80, weight=3),
                    backend_ref("api", 80, weight=1),
                    matches=[match("/cart", headers={"version": "two"}, method="POST")],
                ),
                rule(backend_ref("web", 80), matches=[match("/", path_type="PathPrefix")]),
            ],
            parents=["edge"],
        ),
        service("web", 80, 8080),
        service("api", 80, 8080),
        endpoint_slice("web", 8080, "10.0.0.1", "10.0.0.2", not_ready=["10.0.0.3"]),
        endpoint_slice("api", 8080, "10.0.1.1", ready=False),
    )
    dag = build(store, BuildOptions())
    return DebugView(store=store, dag=dag)


def test_a_routes_edges_carry_its_matches_and_the_weight_shares() -> None:
    graph = build_graph(_world())
    assert graph.edge_labels[("HTTPRoute/default/shop", "Service/default/web")] == [
        "prefix /cart POST version=two · 75% (weight 3)",
        "prefix /",
    ]
    assert graph.edge_labels[("HTTPRoute/default/shop", "Service/default/api")] == [
        "prefix /cart POST version=two · 25% (weight 1)"
    ]
    # Edges that say nothing have no label.
    assert graph.edge_labels[("Gateway/default/edge", "listener default/edge http-8080")] == []


def test_endpoints_not_ready_are_listed_apart_and_a_cluster_with_none_ready_is_idle() -> None:
    graph = build_graph(_world())
    web = graph.nodes["endpoints of default/web/80"]
    assert web.label == "2 endpoints, 1 not ready"
    assert web.details == ["10.0.0.1:8080, 10.0.0.2:8080"]
    assert web.muted == ["not ready: 10.0.0.3:8080"] and not web.idle
    api = graph.nodes["endpoints of default/api/80"]
    assert api.label == "0 endpoints, 1 not ready"
    assert api.muted == ["not ready: 10.0.1.1:8080"] and api.idle


def test_policies_attached_to_a_service_are_drawn_on_it() -> None:
    view = _world()
    web = ObjectKey("Service", "default", "web")
    api = ObjectKey("Service", "default", "api")
    view = dataclasses.replace(
        view,
        service_policies={
            web: (PolicyView("BackendPolicy/default/resilient", "Accepted", accepted=True),),
            api: (PolicyView("BackendPolicy/default/broken", "Invalid: spec.x", accepted=False),),
        },
    )
    graph = build_graph(view)
    assert "BackendPolicy/default/resilient: Accepted" in graph.nodes[str(web)].details
    assert graph.nodes[str(api)].problems == ["BackendPolicy/default/broken: Invalid: spec.x"]


def test_each_service_shows_its_backend_policies_as_the_build_judged_them() -> None:
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    controller.update(
        store_of(
            gateway("edge", 8080),
            http_route(
                "shop",
                rules=[
                    rule(backend_ref("web", 80), matches=[match("/web")]),
                    rule(backend_ref("api", 80), matches=[match("/api")]),
                    rule(backend_ref("plain", 80)),
                ],
                parents=["edge"],
            ),
            *(service(name, 80, 8080) for name in ("web", "api", "plain")),
            endpoint_slice("web", 8080, "10.0.0.1"),
            backend_policy(
                "resilient",
                "web",
                spec={"healthCheck": {"passive": {"consecutive5XxErrors": 3}}},
                created="2024-01-01T00:00:00Z",
            ),
            backend_policy(
                "latecomer",
                "web",
                spec={"loadBalancer": {"type": "Random"}},
                created="2024-02-01T00:00:00Z",
            ),
            backend_policy(
                "broken", "api", spec={"healthCheck": {"passive": {"consecutive5XxErrors": -1}}}
            ),
            backend_policy("lost", "missing", spec={"loadBalancer": {"type": "Random"}}),
        )
    )
    view = take_view(controller, None)
    web, api, plain = (ObjectKey("Service", "default", n) for n in ("web", "api", "plain"))
    missing = ObjectKey("Service", "default", "missing")
    assert set(view.service_policies) == {web, api, missing}  # plain has none
    assert view.service_policies[web] == (
        PolicyView(
            "BackendPolicy/default/latecomer",
            "Conflicted: Service default/web is taken by BackendPolicy default/resilient, "
            "which is older (or first by name)",
            accepted=False,
        ),
        PolicyView("BackendPolicy/default/resilient", "Accepted", accepted=True),
    )
    assert view.service_policies[missing][0].state.startswith("TargetNotFound: ")

    graph = build_graph(view)
    assert graph.nodes[str(web)].details.count("BackendPolicy/default/resilient: Accepted") == 1
    assert graph.nodes[str(web)].problems == [
        "BackendPolicy/default/latecomer: Conflicted: Service default/web is taken by "
        "BackendPolicy default/resilient, which is older (or first by name)"
    ]
    assert graph.nodes[str(api)].problems == [
        "BackendPolicy/default/broken: Invalid: spec.healthCheck.passive.consecutive5XxErrors: "
        "expected an integer from 0 to 4294967295, got -1"
    ]
    assert not any("BackendPolicy" in line for line in graph.nodes[str(plain)].details)
    assert not graph.nodes[str(plain)].problems


def test_a_services_traffic_policy_is_shown_beside_its_backend_policy() -> None:
    controller = Controller(SnapshotCache())
    controller.update(
        store_of(
            gateway("edge", 8080),
            http_route("shop", rules=[rule(backend_ref("web", 80))], parents=["edge"]),
            service("web", 80, 8080),
            endpoint_slice("web", 8080, "10.0.0.1"),
            backend_policy("resilient", "web", spec={"loadBalancer": {"type": "Random"}}),
            xbackend_traffic_policy(
                "budget", "web", spec={"retryConstraint": {"budget": {"percent": 20}}}
            ),
        )
    )
    web = ObjectKey("Service", "default", "web")
    shown = take_view(controller, None).service_policies[web]
    assert [(p.name, p.accepted) for p in shown] == [
        ("BackendPolicy/default/resilient", True),
        ("XBackendTrafficPolicy/default/budget", True),
    ]


def test_a_world_without_policies_shows_none() -> None:
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    assert take_view(controller, None).service_policies == {}  # nothing built yet
    store = _world().store
    assert store is not None
    controller.update(store)
    assert take_view(controller, None).service_policies == {}


def test_a_match_in_a_few_words() -> None:
    assert describe_match(RouteMatch("Exact", "/x")) == "exact /x"
    regex = RouteMatch(
        "RegularExpression",
        "/re/[a-z]+",
        headers=(ValueMatch("x-id", "[0-9]+", regex=True),),
        query_params=(ValueMatch("q", "one"),),
        grpc=True,
    )
    assert describe_match(regex) == "regex /re/[a-z]+ x-id~[0-9]+ ?q=one gRPC"


def test_the_dot_graph_carries_the_edge_labels() -> None:
    _, text = dot(_world())
    assert (
        '"HTTPRoute/default/shop" -> "Service/default/api" '
        '[label="prefix /cart POST version=two · 25% (weight 1)"];'
    ) in text
    assert '"Gateway/default/edge" -> "listener default/edge http-8080";' in text
