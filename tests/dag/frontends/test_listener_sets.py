"""ListenerSets: the status the listenerset-* conformance scenarios expect, written afresh
in their style, and their listeners served to the parent Gateway's Envoys."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from dragoman.dag.model import ALL_GATEWAYS, Dag, Forward
from tests.support.builders import (
    GATEWAY_GROUP,
    Object,
    allowed_routes,
    backend_ref,
    gateway,
    gateway_class,
    http_route,
    listener,
    listener_set,
    match,
    namespace_object,
    parent_ref,
    rule,
    service,
    service_port,
)
from tests.support.status_builds import build_text, condition, status

# This file's world: the Gateway infra/gw, its ListenerSets at generation 2, routes to the
# Service `web` of their namespace.
infra_gateway = partial(gateway, namespace="infra")
infra_listener_set = partial(
    listener_set,
    parent_namespace="infra",
    namespace="infra",
    generation=2,
    created="2024-01-01T00:00:00Z",
)
WEB = backend_ref("web", 8080)
HTTP = listener("gateway-listener", hostname="gateway.example.com")


def build(*documents: Object) -> Dag:
    return build_text(
        gateway_class(),
        namespace_object("infra"),
        namespace_object("apps", {"team": "apps"}),
        service("web", namespace="infra", ports=[service_port(8080)]),
        service("web", namespace="apps", ports=[service_port(8080)]),
        *documents,
    )


def conditions(dag: Dag, kind: str, name: str, ns: str = "infra") -> dict[str, Any]:
    return {c["type"]: c for c in status(dag, kind, name, ns)["conditions"]}


def accepted(dag: Dag, name: str, ns: str = "infra") -> tuple[str, str]:
    found = conditions(dag, "ListenerSet", name, ns)["Accepted"]
    return found["status"], found["reason"]


LS_HTTP = listener("ls-listener", hostname="ls.example.com")


TEAM_APPS = {"from": "Selector", "selector": {"matchLabels": {"team": "apps"}}}


@pytest.mark.parametrize(
    ("allowed", "ns", "expected"),
    [
        (None, "infra", ("False", "NotAllowed")),  # listenerset-default-not-allowed
        ("None", "infra", ("False", "NotAllowed")),  # ...-allowed-namespace-none
        ("Same", "infra", ("True", "Accepted")),  # ...-allowed-namespace-same
        ("Same", "apps", ("False", "NotAllowed")),
        ("All", "apps", ("True", "Accepted")),
        # listenerset-allowed-namespace-selector
        (TEAM_APPS, "apps", ("True", "Accepted")),
        (TEAM_APPS, "infra", ("False", "NotAllowed")),
    ],
)
def test_the_gateway_decides_which_listener_sets_it_takes(
    allowed: str | Object | None, ns: str, expected: tuple[str, str]
) -> None:
    dag = build(
        infra_gateway(allowed_listeners=allowed, listeners=[HTTP]),
        infra_listener_set("ls", [LS_HTTP], namespace=ns),
    )
    assert accepted(dag, "ls", ns) == expected
    gw = status(dag, "Gateway", "gw", "infra")
    count = 1 if expected[0] == "True" else 0
    if allowed is None or allowed == "None":
        assert "attachedListenerSets" not in gw
    else:
        assert gw["attachedListenerSets"] == count
    programmed = conditions(dag, "ListenerSet", "ls", ns)["Programmed"]["status"]
    assert programmed == expected[0]
    assert {
        c["observedGeneration"] for c in status(dag, "ListenerSet", "ls", ns)["conditions"]
    } == {2}


def test_conflicting_listeners_are_rejected_and_the_oldest_wins() -> None:
    # listenerset-protocol-conflict and listenerset-hostname-conflict
    fine = listener("fine", hostname="first.example.com")
    dag = build(
        infra_gateway(
            allowed_listeners="Same",
            listeners=[HTTP, listener("taken", hostname="taken.example.com")],
        ),
        infra_listener_set(
            "first",
            [
                fine,
                listener("tcp-on-http-port", protocol="TCP"),
                listener("same-host", hostname="taken.example.com"),
            ],
        ),
        infra_listener_set("only-conflicts", [fine], created="2024-02-01T00:00:00Z"),
    )
    first = {e["name"]: e for e in status(dag, "ListenerSet", "first", "infra")["listeners"]}
    assert condition(first["fine"]["conditions"], "Conflicted") == ("False", "NoConflicts")
    assert condition(first["tcp-on-http-port"]["conditions"], "Conflicted") == (
        "True",
        "ProtocolConflict",
    )
    assert condition(first["same-host"]["conditions"], "Conflicted") == ("True", "HostnameConflict")
    assert accepted(dag, "first") == ("True", "ListenersNotValid")
    # Its only listener lost to an older ListenerSet's: not accepted.
    assert accepted(dag, "only-conflicts") == ("False", "ListenersNotValid")
    assert status(dag, "Gateway", "gw", "infra")["attachedListenerSets"] == 1


def test_routes_attach_to_a_listener_set_and_are_served_with_its_gateway() -> None:
    # listenerset-http-routing, listenerset-route-status-scoped-to-parentref,
    # listenerset-gateway-parent-section-name-not-found
    ls_ref = parent_ref("ls", group=GATEWAY_GROUP, kind="ListenerSet")
    one = listener("one", hostname="one.example.com", allowed_routes=allowed_routes("All"))
    dag = build(
        infra_gateway(allowed_listeners="All", listeners=[HTTP]),
        infra_listener_set("ls", [one, listener("other-port", 8080)]),
        http_route(
            "both",
            rules=[rule(WEB, matches=[match("/both")])],
            parents=[parent_ref("gw"), ls_ref],
            namespace="infra",
        ),
        http_route(
            "ls-only",
            rules=[rule(WEB, matches=[match("/ls-only")])],
            parents=[ls_ref],
            namespace="infra",
        ),
        http_route(
            "ls-section",
            rules=[rule(WEB, matches=[match("/section")])],
            parents=[parent_ref("ls", kind="ListenerSet", section="one")],
            namespace="infra",
        ),
        http_route(
            "via-gateway",
            rules=[rule(WEB, matches=[match("/via-gateway")])],
            parents=[parent_ref("gw", section="one")],
            namespace="infra",
        ),
    )
    [gateway_parent, ls_parent] = status(dag, "HTTPRoute", "both", "infra")["parents"]
    assert gateway_parent["parentRef"]["kind"] == "Gateway"
    assert ls_parent["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "ListenerSet",
        "name": "ls",
    }
    for parent in (gateway_parent, ls_parent):
        assert condition(parent["conditions"], "Accepted") == ("True", "Accepted")
    [via_gateway] = status(dag, "HTTPRoute", "via-gateway", "infra")["parents"]
    assert condition(via_gateway["conditions"], "Accepted") == ("False", "NoMatchingParent")
    listeners = {e["name"]: e for e in status(dag, "ListenerSet", "ls", "infra")["listeners"]}
    assert listeners["one"]["attachedRoutes"] == 3
    assert listeners["other-port"]["attachedRoutes"] == 2

    for group in (ALL_GATEWAYS, "infra/gw"):
        served = _paths_by_domain(dag, group)
        assert served["gateway.example.com"] == {"/both"}  # the Gateway's own listener
        assert served["one.example.com"] == {"/both", "/ls-only", "/section"}
        assert served["*"] == {"/both", "/ls-only"}  # port 8080, no hostname
        assert "/via-gateway" not in set().union(*served.values())


def test_allowed_routes_same_means_the_listener_sets_namespace() -> None:
    # listenerset-allowed-routes-namespaces
    dag = build(
        infra_gateway(allowed_listeners="All", listeners=[HTTP]),
        infra_listener_set("ls", [listener("l", hostname="l.example.com")], namespace="apps"),
        http_route(
            "here",
            rules=[rule(WEB, matches=[match("/x")])],
            parents=[parent_ref("ls", kind="ListenerSet")],
            namespace="apps",
        ),
        http_route(
            "there",
            rules=[rule(WEB, matches=[match("/y")])],
            parents=[parent_ref("ls", kind="ListenerSet", namespace="apps")],
            namespace="infra",
        ),
    )
    [here] = status(dag, "HTTPRoute", "here", "apps")["parents"]
    assert condition(here["conditions"], "Accepted") == ("True", "Accepted")
    [there] = status(dag, "HTTPRoute", "there", "infra")["parents"]
    assert condition(there["conditions"], "Accepted") == ("False", "NotAllowedByListeners")


def test_a_listener_set_of_a_missing_gateway_is_not_accepted() -> None:
    dag = build(infra_listener_set("ls", [LS_HTTP]))
    assert accepted(dag, "ls") == ("False", "ParentNotAccepted")


def _paths_by_domain(dag: Dag, group: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for table in dag.groups[group].route_tables:
        for host in table.virtual_hosts:
            for r in host.routes:
                if isinstance(r.action, Forward):
                    for domain in host.domains:
                        found.setdefault(domain, set()).add(r.match.path)
    return found
