"""ListenerSets: the status the listenerset-* conformance scenarios expect, written afresh
in their style, and their listeners served to the parent Gateway's Envoys."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.model import ALL_GATEWAYS, Dag, Forward
from tests.support.status_builds import DRAGOMAN_CLASS, GW, build_text, condition, status


def namespace(name: str, labels: str = "{}") -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {labels}}}\n---\n"


def gateway(allowed: str | None, *listeners: str) -> str:
    allow = f"  allowedListeners: {{namespaces: {allowed}}}\n" if allowed else ""
    body = "\n".join(f"  - {item}" for item in listeners)
    return (
        f"apiVersion: {GW}\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\n"
        f"spec:\n  gatewayClassName: dragoman\n{allow}  listeners:\n{body}\n---\n"
    )


def listener_set(
    name: str, *listeners: str, ns: str = "infra", created: str = "2024-01-01T00:00:00Z"
) -> str:
    body = "\n".join(f"  - {item}" for item in listeners)
    return (
        f"apiVersion: {GW}\nkind: ListenerSet\n"
        f"metadata: {{name: {name}, namespace: {ns}, generation: 2, "
        f"creationTimestamp: '{created}'}}\n"
        f"spec:\n  parentRef: {{name: gw, namespace: infra}}\n  listeners:\n{body}\n---\n"
    )


def route(name: str, parents: str, path: str, ns: str = "infra") -> str:
    return (
        f"apiVersion: {GW}\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        f"spec:\n  parentRefs: {parents}\n  rules:\n"
        f"  - matches: [{{path: {{value: {path}}}}}]\n"
        "    backendRefs: [{name: web, port: 8080}]\n---\n"
    )


WEB = (
    "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: infra}\n"
    "spec: {selector: {app: web}, ports: [{port: 8080}]}\n---\n"
    "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: apps}\n"
    "spec: {selector: {app: web}, ports: [{port: 8080}]}\n---\n"
)
HTTP = "{name: gateway-listener, port: 80, protocol: HTTP, hostname: gateway.example.com}"


def build(*texts: str) -> Dag:
    return build_text(
        DRAGOMAN_CLASS, namespace("infra"), namespace("apps", "{team: apps}"), WEB, *texts
    )


def conditions(dag: Dag, kind: str, name: str, ns: str = "infra") -> dict[str, Any]:
    return {c["type"]: c for c in status(dag, kind, name, ns)["conditions"]}


def accepted(dag: Dag, name: str, ns: str = "infra") -> tuple[str, str]:
    found = conditions(dag, "ListenerSet", name, ns)["Accepted"]
    return found["status"], found["reason"]


LS_HTTP = "{name: ls-listener, port: 80, protocol: HTTP, hostname: ls.example.com}"


@pytest.mark.parametrize(
    ("allowed", "ns", "expected"),
    [
        (None, "infra", ("False", "NotAllowed")),  # listenerset-default-not-allowed
        ("{from: None}", "infra", ("False", "NotAllowed")),  # ...-allowed-namespace-none
        ("{from: Same}", "infra", ("True", "Accepted")),  # ...-allowed-namespace-same
        ("{from: Same}", "apps", ("False", "NotAllowed")),
        ("{from: All}", "apps", ("True", "Accepted")),
        # listenerset-allowed-namespace-selector
        ("{from: Selector, selector: {matchLabels: {team: apps}}}", "apps", ("True", "Accepted")),
        (
            "{from: Selector, selector: {matchLabels: {team: apps}}}",
            "infra",
            ("False", "NotAllowed"),
        ),
    ],
)
def test_the_gateway_decides_which_listener_sets_it_takes(
    allowed: str | None, ns: str, expected: tuple[str, str]
) -> None:
    dag = build(gateway(allowed, HTTP), listener_set("ls", LS_HTTP, ns=ns))
    assert accepted(dag, "ls", ns) == expected
    gw = status(dag, "Gateway", "gw", "infra")
    count = 1 if expected[0] == "True" else 0
    if allowed is None or "None" in allowed:
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
    dag = build(
        gateway(
            "{from: Same}",
            HTTP,
            "{name: taken, port: 80, protocol: HTTP, hostname: taken.example.com}",
        ),
        listener_set(
            "first",
            "{name: fine, port: 80, protocol: HTTP, hostname: first.example.com}",
            "{name: tcp-on-http-port, port: 80, protocol: TCP}",
            "{name: same-host, port: 80, protocol: HTTP, hostname: taken.example.com}",
        ),
        listener_set(
            "only-conflicts",
            "{name: fine, port: 80, protocol: HTTP, hostname: first.example.com}",
            created="2024-02-01T00:00:00Z",
        ),
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
    ls_ref = "{group: gateway.networking.k8s.io, kind: ListenerSet, name: ls}"
    dag = build(
        gateway("{from: All}", HTTP),
        listener_set(
            "ls",
            "{name: one, port: 80, protocol: HTTP, hostname: one.example.com,"
            " allowedRoutes: {namespaces: {from: All}}}",
            "{name: other-port, port: 8080, protocol: HTTP}",
        ),
        route("both", f"[{{name: gw}}, {ls_ref}]", "/both"),
        route("ls-only", f"[{ls_ref}]", "/ls-only"),
        route("ls-section", "[{kind: ListenerSet, name: ls, sectionName: one}]", "/section"),
        route("via-gateway", "[{name: gw, sectionName: one}]", "/via-gateway"),
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
        gateway("{from: All}", HTTP),
        listener_set(
            "ls", "{name: l, port: 80, protocol: HTTP, hostname: l.example.com}", ns="apps"
        ),
        route("here", "[{kind: ListenerSet, name: ls}]", "/x", ns="apps"),
        route("there", "[{kind: ListenerSet, name: ls, namespace: apps}]", "/y", ns="infra"),
    )
    [here] = status(dag, "HTTPRoute", "here", "apps")["parents"]
    assert condition(here["conditions"], "Accepted") == ("True", "Accepted")
    [there] = status(dag, "HTTPRoute", "there", "infra")["parents"]
    assert condition(there["conditions"], "Accepted") == ("False", "NotAllowedByListeners")


def test_a_listener_set_of_a_missing_gateway_is_not_accepted() -> None:
    dag = build(listener_set("ls", LS_HTTP))
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
