"""Node groups: one per Gateway (what that Gateway's Envoys are served) and the group of all
Gateways, each with its listeners, route tables and the clusters its routes reach."""

from __future__ import annotations

from dragoman.dag.model import ALL_GATEWAYS
from tests.support.builders import (
    backend_ref,
    external_service,
    gateway,
    http_route,
    listener,
    match,
    parent_ref,
    rule,
    service,
)
from tests.support.status_builds import build_text, routes_of

WEB = service("web", 80, 8080)


def test_groups_per_gateway_and_all() -> None:
    gw_a = gateway("gw-a", listeners=[listener()])
    gw_b = gateway("gw-b", listeners=[listener(), listener("admin", 8080)])
    gw_c = gateway("gw-c", namespace="other", listeners=[listener("h", 9000)])
    api = external_service("api", "api.example.com", 80)
    objects = [
        gw_a,
        gw_b,
        gw_c,
        WEB,
        api,
        http_route("to-a", "web", 80, parents=[parent_ref("gw-a")], hostnames=("a.example",)),
        http_route("to-b", "api", 80, parents=[parent_ref("gw-b", section="admin")]),
        http_route(
            "to-both",
            rules=[rule(backend_ref("web", 80), matches=[match("/both")])],
            parents=[parent_ref("gw-a"), parent_ref("gw-b")],
            hostnames=("a.example",),
        ),
    ]
    dag = build_text(*objects)

    assert sorted(dag.groups) == [ALL_GATEWAYS, "default/gw-a", "default/gw-b", "other/gw-c"]
    assert {name: group.name for name, group in dag.groups.items()} == {
        name: name for name in dag.groups
    }

    everything = dag.groups[ALL_GATEWAYS]
    assert [listener.name for listener in everything.listeners] == [
        "http-80",
        "http-8080",
        "http-9000",
    ]
    assert everything.clusters == ("default/api/80", "default/web/80")
    assert [r.source.name for r in routes_of(dag, "a.example")] == ["to-both", "to-a"]
    assert [r.source.name for r in routes_of(dag, "*", port=8080)] == ["to-b"]

    group_a = dag.groups["default/gw-a"]
    assert [listener.port for listener in group_a.listeners] == [80]
    assert group_a.clusters == ("default/web/80",)
    assert [r.source.name for r in routes_of(dag, "a.example", "default/gw-a")] == [
        "to-both",
        "to-a",
    ]

    group_b = dag.groups["default/gw-b"]
    assert [listener.port for listener in group_b.listeners] == [80, 8080]
    assert group_b.clusters == ("default/api/80", "default/web/80")
    assert [r.source.name for r in routes_of(dag, "a.example", "default/gw-b")] == ["to-both"]

    group_c = dag.groups["other/gw-c"]
    assert [table.virtual_hosts for table in group_c.route_tables] == [()]
    assert group_c.clusters == ()

    assert sorted(dag.clusters) == ["default/api/80", "default/web/80"]
    assert list(dag.load_assignments) == ["default/web/80"]


def test_no_gateways_gives_an_empty_all_group() -> None:
    dag = build_text(WEB, http_route("r", "web", 80))
    assert list(dag.groups) == [ALL_GATEWAYS]
    group = dag.groups[ALL_GATEWAYS]
    assert (group.listeners, group.route_tables, group.clusters) == ((), (), ())
