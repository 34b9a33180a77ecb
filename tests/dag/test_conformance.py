"""Scenarios of the Gateway API v1.6 conformance suite, written afresh in its style, checking
the status (and, where the suite sends requests, the routing) its tests expect.

Namespaces: `infra` holds the Gateways, `web` and `app` hold backends; `web` carries the
label the `backend-namespaces` Gateway selects.
"""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.model import ALL_GATEWAYS, Dag, DirectResponse, Forward, RouteTable
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    DRAGOMAN_CLASS,
    GW,
    build_text,
    gateway_condition,
    listener,
    listener_condition,
    parents,
    route_condition,
    status,
)

CERT = certificate_authority().issue("secure.example.com")


def namespace(name: str, labels: str = "{}") -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {labels}}}\n---\n"


def service(name: str, ns: str) -> str:
    return (
        f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        f"spec: {{selector: {{app: {name}}}, ports: [{{port: 8080}}]}}\n---\n"
    )


def gateway(name: str, *listeners: str, ns: str = "infra", generation: int = 1) -> str:
    body = "\n".join(f"  - {item}" for item in listeners)
    return (
        f"apiVersion: {GW}\nkind: Gateway\n"
        f"metadata: {{name: {name}, namespace: {ns}, generation: {generation}}}\n"
        f"spec:\n  gatewayClassName: dragoman\n  listeners:\n{body}\n---\n"
    )


def route(
    name: str,
    parent: str,
    backends: str = "[{name: infra-v1, port: 8080}]",
    ns: str = "infra",
    extra: str = "",
    generation: int = 1,
) -> str:
    return (
        f"apiVersion: {GW}\nkind: HTTPRoute\n"
        f"metadata: {{name: {name}, namespace: {ns}, generation: {generation}}}\n"
        f"spec:\n  parentRefs: [{parent}]{extra}\n  rules: [{{backendRefs: {backends}}}]\n---\n"
    )


INFRA = (
    DRAGOMAN_CLASS
    + "---\n"
    + namespace("infra", "{conformance: infra}")
    + namespace("web", "{conformance: backend}")
    + namespace("app")
    + service("infra-v1", "infra")
    + service("infra-v2", "infra")
    + service("web-v1", "web")
    + service("app-v1", "app")
    + gateway("same-namespace", "{name: http, port: 80, protocol: HTTP}")
    + gateway(
        "all-namespaces",
        "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}",
    )
    + gateway(
        "backend-namespaces",
        "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector,"
        " selector: {matchLabels: {conformance: backend}}}}}",
    )
    + CERT.secret_yaml("secure", "infra")
    + "---\n"
    + CERT.secret_yaml("certificate", "web")
    + "---\n"
)

SAME = "{name: same-namespace, namespace: infra}"
ALL_NS = "{name: all-namespaces, namespace: infra}"
BACKEND_NS = "{name: backend-namespaces, namespace: infra}"


def dag_of(*texts: str) -> Dag:
    return build_text(INFRA, *texts)


def https(name: str, refs: str, extra: str = "") -> str:
    return (
        f"{{name: {name}, port: 443, protocol: HTTPS{extra}, allowedRoutes: "
        f"{{namespaces: {{from: All}}}}, tls: {{certificateRefs: {refs}}}}}"
    )


# --- Gateways -------------------------------------------------------------------------------


def test_gateway_listener_unsupported_protocol() -> None:
    dag = dag_of(
        gateway("only-unsupported", "{name: invalid, port: 1111, protocol: INVALID}"),
        gateway(
            "mixed",
            "{name: http, port: 80, protocol: HTTP}",
            "{name: invalid, port: 1111, protocol: INVALID}",
        ),
    )
    assert gateway_condition(dag, "only-unsupported", "Accepted", "infra") == (
        "False",
        "ListenersNotValid",
    )
    assert listener_condition(dag, "only-unsupported", "invalid", "Accepted", "infra") == (
        "False",
        "UnsupportedProtocol",
    )
    assert listener(dag, "only-unsupported", "invalid", "infra")["supportedKinds"] == []
    assert gateway_condition(dag, "mixed", "Accepted", "infra") == ("True", "ListenersNotValid")
    assert listener_condition(dag, "mixed", "http", "Accepted", "infra") == ("True", "Accepted")
    assert listener_condition(dag, "mixed", "invalid", "Accepted", "infra") == (
        "False",
        "UnsupportedProtocol",
    )


def test_gateway_invalid_route_kind() -> None:
    dag = dag_of(
        gateway(
            "only-invalid-kind",
            "{name: http, port: 80, protocol: HTTP,"
            " allowedRoutes: {kinds: [{kind: InvalidRoute}]}}",
        ),
        gateway(
            "invalid-and-valid-kind",
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: "
            "{kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]}}",
        ),
    )
    only = listener(dag, "only-invalid-kind", "http", "infra")
    assert only["supportedKinds"] == []
    assert listener_condition(dag, "only-invalid-kind", "http", "ResolvedRefs", "infra") == (
        "False",
        "InvalidRouteKinds",
    )
    both = listener(dag, "invalid-and-valid-kind", "http", "infra")
    assert both["supportedKinds"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]
    assert listener_condition(dag, "invalid-and-valid-kind", "http", "ResolvedRefs", "infra") == (
        "False",
        "InvalidRouteKinds",
    )


MALFORMED = (
    "apiVersion: v1\nkind: Secret\nmetadata: {name: malformed, namespace: infra}\n"
    "type: kubernetes.io/tls\ndata: {tls.crt: SGVsbG8gd29ybGQK, tls.key: SGVsbG8gd29ybGQK}\n---\n"
)


@pytest.mark.parametrize(
    "refs",
    [
        pytest.param("[{name: nonexistent}]", id="nonexistent Secret"),
        pytest.param("[{group: wrong.group.example.com, kind: Secret, name: secure}]", id="group"),
        pytest.param("[{group: '', kind: WrongKind, name: secure}]", id="kind"),
        pytest.param("[{name: malformed}]", id="malformed Secret"),
    ],
)
def test_gateway_invalid_tls_configuration(refs: str) -> None:
    dag = dag_of(MALFORMED, gateway("gw", https("https", refs)))
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCertificateRef",
    )
    assert {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"} in listener(
        dag, "gw", "https", "infra"
    )["supportedKinds"]
    assert listener(dag, "gw", "https", "infra")["attachedRoutes"] == 0


def secret_grant(name: str, ns: str, from_: str, to: str) -> str:
    return (
        f"apiVersion: {GW}\nkind: ReferenceGrant\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        f"spec:\n  from: [{from_}]\n  to: [{to}]\n---\n"
    )


GATEWAY_FROM = "{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}"
CROSS_SECRET = https("https", "[{group: '', kind: Secret, name: certificate, namespace: web}]")


def test_gateway_secret_missing_reference_grant() -> None:
    dag = dag_of(gateway("gw", CROSS_SECRET))
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "RefNotPermitted",
    )


def test_gateway_secret_invalid_reference_grants() -> None:
    grants = [
        secret_grant(
            "wrong-namespace", "app", GATEWAY_FROM, "{group: '', kind: Secret, name: certificate}"
        ),
        secret_grant(
            "wrong-from-group",
            "web",
            "{group: not-the-group.example.com, kind: Gateway, namespace: infra}",
            "{group: '', kind: Secret, name: certificate}",
        ),
        secret_grant(
            "wrong-from-kind",
            "web",
            "{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}",
            "{group: '', kind: Secret, name: certificate}",
        ),
        secret_grant(
            "wrong-from-namespace",
            "web",
            "{group: gateway.networking.k8s.io, kind: Gateway, namespace: elsewhere}",
            "{group: '', kind: Secret, name: certificate}",
        ),
        secret_grant(
            "wrong-to-group", "web", GATEWAY_FROM, "{group: wrong.example.com, kind: Secret}"
        ),
        secret_grant("wrong-to-kind", "web", GATEWAY_FROM, "{group: '', kind: Service}"),
        secret_grant(
            "wrong-to-name", "web", GATEWAY_FROM, "{group: '', kind: Secret, name: not-this-one}"
        ),
    ]
    dag = dag_of(gateway("gw", CROSS_SECRET), *grants)
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "RefNotPermitted",
    )


@pytest.mark.parametrize(
    "to",
    [
        pytest.param("{group: '', kind: Secret}", id="all in namespace"),
        pytest.param("{group: '', kind: Secret, name: certificate}", id="specific"),
    ],
)
def test_gateway_secret_reference_grant(to: str) -> None:
    dag = dag_of(gateway("gw", CROSS_SECRET), secret_grant("grant", "web", GATEWAY_FROM, to))
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "True",
        "ResolvedRefs",
    )
    assert listener_condition(dag, "gw", "https", "Programmed", "infra") == ("True", "Programmed")


def test_gateway_with_attached_routes() -> None:
    selector = (
        "allowedRoutes: {kinds: [{kind: HTTPRoute}], namespaces: {from: Selector, selector: "
        "{matchLabels: {kubernetes.io/metadata.name: infra}}}}"
    )
    one = "{name: one, namespace: infra}"
    two = "{name: two, namespace: infra}"
    dag = dag_of(
        gateway("one", f"{{name: http, port: 80, protocol: HTTP, {selector}}}"),
        route("route-1", one),
        gateway(
            "two",
            f"{{name: http, port: 80, protocol: HTTP, hostname: foo.example.com, {selector}}}",
        ),
        route("route-2", two),
        route("route-3", two),
        route("not-accepted", two, extra="\n  hostnames: [not-accepted.example.com]"),
        gateway(
            "unresolved",
            "{name: tls, port: 443, protocol: HTTPS, "
            f"{selector}, tls: {{certificateRefs: [{{name: does-not-exist}}], mode: Terminate}}}}",
        ),
        route(
            "route-4",
            "{name: unresolved, namespace: infra, sectionName: tls}",
            backends="[{name: does-not-exist, port: 8080}]",
        ),
    )
    for name, count in (("one", 1), ("two", 2)):
        assert listener(dag, name, "http", "infra")["attachedRoutes"] == count
        assert listener_condition(dag, name, "http", "Accepted", "infra")[0] == "True"
        assert listener_condition(dag, name, "http", "ResolvedRefs", "infra")[0] == "True"
    assert route_condition(dag, "not-accepted", "Accepted", "infra") == (
        "False",
        "NoMatchingListenerHostname",
    )
    assert listener(dag, "unresolved", "tls", "infra")["attachedRoutes"] == 1
    assert listener_condition(dag, "unresolved", "tls", "Programmed", "infra")[0] == "False"
    assert listener_condition(dag, "unresolved", "tls", "ResolvedRefs", "infra")[0] == "False"
    assert route_condition(dag, "route-4", "ResolvedRefs", "infra")[0] == "False"


def test_gateway_modify_listeners() -> None:
    before = gateway(
        "gw", "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}"
    )
    after = gateway(
        "gw",
        "{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}",
        https("https", "[{name: secure}]", ", hostname: secure.example.com"),
        generation=2,
    )
    attached = route("r", "{name: gw, namespace: infra}")
    dag = dag_of(before, attached)
    assert [entry["name"] for entry in status(dag, "Gateway", "gw", "infra")["listeners"]] == [
        "http"
    ]
    dag = dag_of(after, attached)
    entries = status(dag, "Gateway", "gw", "infra")["listeners"]
    assert [(e["name"], e["attachedRoutes"]) for e in entries] == [("http", 1), ("https", 1)]
    assert listener_condition(dag, "gw", "https", "Programmed", "infra") == ("True", "Programmed")


def test_gateway_and_gateway_class_observed_generation_bump() -> None:
    for generation in (1, 2):
        dag = dag_of(gateway("gw", "{name: http, port: 80, protocol: HTTP}", generation=generation))
        gateway_status = status(dag, "Gateway", "gw", "infra")
        observed = {c["observedGeneration"] for c in gateway_status["conditions"]}
        observed |= {
            c["observedGeneration"] for e in gateway_status["listeners"] for c in e["conditions"]
        }
        assert observed == {generation}


# --- HTTPRoutes -----------------------------------------------------------------------------


def test_httproute_simple_and_cross_namespace() -> None:
    dag = dag_of(route("cross", BACKEND_NS, "[{name: web-v1, port: 8080}]", ns="web"))
    assert route_condition(dag, "cross", "Accepted", "web") == ("True", "Accepted")
    assert route_condition(dag, "cross", "ResolvedRefs", "web") == ("True", "ResolvedRefs")
    assert backends_for(dag, "backend-namespaces", "/") == ["web/web-v1/8080"]


def test_httproute_invalid_cross_namespace_parent_ref() -> None:
    dag = dag_of(route("r", SAME, "[{name: web-v1, port: 8080}]", ns="web"))
    assert route_condition(dag, "r", "Accepted", "web") == ("False", "NotAllowedByListeners")
    assert route_condition(dag, "r", "ResolvedRefs", "web") == ("True", "ResolvedRefs")
    assert listener(dag, "same-namespace", "http", "infra")["attachedRoutes"] == 0


@pytest.mark.parametrize(
    ("parent", "gateway_text"),
    [
        pytest.param("{name: same-namespace, namespace: infra, port: 81}", "", id="port"),
        pytest.param(
            "{name: same-namespace, namespace: infra, sectionName: nope}", "", id="sectionName"
        ),
        pytest.param(
            "{name: two-listeners, namespace: infra, sectionName: http, port: 8080}",
            gateway(
                "two-listeners",
                "{name: http, port: 80, protocol: HTTP}",
                "{name: other, port: 8080, protocol: HTTP}",
            ),
            id="sectionName not on that port",
        ),
    ],
)
def test_httproute_invalid_parent_ref_not_matching(parent: str, gateway_text: str) -> None:
    dag = dag_of(gateway_text, route("r", parent))
    assert route_condition(dag, "r", "Accepted", "infra") == ("False", "NoMatchingParent")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    name = parent.split(",")[0].removeprefix("{name: ")
    assert all(e["attachedRoutes"] == 0 for e in status(dag, "Gateway", name, "infra")["listeners"])


@pytest.mark.parametrize(
    ("backends", "reason"),
    [
        pytest.param("[{name: nonexistent, port: 8080}]", "BackendNotFound", id="nonexistent"),
        pytest.param(
            "[{group: unknownkind.example.com, kind: NonExistent, name: infra-v1, port: 8080}]",
            "InvalidKind",
            id="unknown kind",
        ),
        pytest.param(
            "[{name: web-v1, namespace: web, port: 8080}]", "RefNotPermitted", id="cross-namespace"
        ),
    ],
)
def test_httproute_invalid_backend_refs_answer_500(backends: str, reason: str) -> None:
    dag = dag_of(route("r", SAME, backends))
    assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", reason)
    assert served_action(dag, "same-namespace", "/") == DirectResponse(status=500)


ROUTE_FROM = "{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: infra}"


def test_httproute_reference_grant_and_its_deletion() -> None:
    text = route("r", SAME, "[{name: web-v1, namespace: web, port: 8080}]")
    grant = secret_grant("grant", "web", ROUTE_FROM, "{group: '', kind: Service, name: web-v1}")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    assert backends_for(dag, "same-namespace", "/") == ["web/web-v1/8080"]
    dag = dag_of(text)  # the grant deleted
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")
    assert served_action(dag, "same-namespace", "/") == DirectResponse(status=500)


def test_httproute_invalid_reference_grant() -> None:
    text = route("r", SAME, "[{name: web-v1, namespace: web, port: 8080}]")
    grant = secret_grant("grant", "web", ROUTE_FROM, "{group: '', kind: Service, name: other}")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")


def test_httproute_partially_invalid_via_invalid_reference_grant() -> None:
    text = route(
        "r",
        SAME,
        "[{name: app-v1, namespace: app, port: 8080}, {name: web-v1, namespace: web, port: 8080}]",
    )
    grant = secret_grant("grant", "app", ROUTE_FROM, "{group: '', kind: Service, name: app-v1}")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")
    action = served_action(dag, "same-namespace", "/")
    assert isinstance(action, Forward)
    # The valid backend keeps its share; the invalid one's share answers 500.
    assert [b.cluster for b in action.backends] == ["app/app-v1/8080", None]


def test_httproute_disallowed_kind() -> None:
    dag = dag_of(
        gateway(
            "tlsroutes-only",
            "{name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}, "
            "allowedRoutes: {namespaces: {from: Same}, kinds: [{kind: TLSRoute}]}}",
        ),
        route("disallowed-kind", "{name: tlsroutes-only, namespace: infra}"),
    )
    assert route_condition(dag, "disallowed-kind", "Accepted", "infra") == (
        "False",
        "NotAllowedByListeners",
    )
    assert route_condition(dag, "disallowed-kind", "ResolvedRefs", "infra") == (
        "True",
        "ResolvedRefs",
    )


def test_httproute_observed_generation_bump() -> None:
    for generation, backend in ((1, "infra-v1"), (2, "infra-v2")):
        dag = dag_of(route("r", SAME, f"[{{name: {backend}, port: 8080}}]", generation=generation))
        [entry] = parents(dag, "r", "infra")
        assert {c["observedGeneration"] for c in entry["conditions"]} == {generation}
        assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")


# --- listener isolation ---------------------------------------------------------------------

ISOLATION = gateway(
    "isolation",
    "{name: empty-hostname, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}",
    "{name: wildcard-example-com, port: 80, protocol: HTTP, hostname: '*.example.com',"
    " allowedRoutes: {namespaces: {from: All}}}",
    "{name: wildcard-foo-example-com, port: 80, protocol: HTTP, hostname: '*.foo.example.com',"
    " allowedRoutes: {namespaces: {from: All}}}",
    "{name: abc-foo-example-com, port: 80, protocol: HTTP, hostname: abc.foo.example.com,"
    " allowedRoutes: {namespaces: {from: All}}}",
)
LISTENERS = (
    "empty-hostname",
    "wildcard-example-com",
    "wildcard-foo-example-com",
    "abc-foo-example-com",
)


def isolation_routes(hostnames: str = "") -> str:
    return "".join(
        route(
            f"attaches-to-{name}",
            f"{{name: isolation, namespace: infra, sectionName: {name}}}",
            extra=hostnames,
        ).replace(
            "rules: [{backendRefs:",
            f"rules: [{{matches: [{{path: {{type: PathPrefix, value: /{name}}}}}], backendRefs:",
        )
        for name in LISTENERS
    )


HOSTS = {
    "bar.com": "empty-hostname",
    "bar.example.com": "wildcard-example-com",
    "bar.foo.example.com": "wildcard-foo-example-com",
    "abc.foo.example.com": "abc-foo-example-com",
}


@pytest.mark.parametrize(
    "hostnames",
    [
        pytest.param("", id="routes without hostnames"),
        pytest.param(
            "\n  hostnames: [bar.com, '*.example.com', '*.foo.example.com', abc.foo.example.com]",
            id="with hostname intersection",
        ),
    ],
)
def test_gateway_http_listener_isolation(hostnames: str) -> None:
    dag = dag_of(ISOLATION, isolation_routes(hostnames))
    table = dag.groups["infra/isolation"].route_tables[0]
    for host, owner in HOSTS.items():
        for path_listener in LISTENERS:
            found = route_for(table, host, f"/{path_listener}")
            # Only the most specific listener matching the host answers it, whatever the
            # hostnames of the routes attached to less specific listeners say.
            expected = f"attaches-to-{path_listener}" if path_listener == owner else None
            assert found == expected, (host, path_listener)


# --- helpers: Envoy's virtual host and route selection, in brief ----------------------------


def route_table(dag: Dag, gateway_name: str) -> RouteTable:
    [table] = dag.groups[f"infra/{gateway_name}"].route_tables
    return table


def served_action(dag: Dag, gateway_name: str, path: str) -> Any:
    table = route_table(dag, gateway_name)
    [vhost] = table.virtual_hosts
    return next(r.action for r in vhost.routes if path.startswith(r.match.path))


def backends_for(dag: Dag, gateway_name: str, path: str) -> list[str | None]:
    action = served_action(dag, gateway_name, path)
    assert isinstance(action, Forward), action
    return [backend.cluster for backend in action.backends]


def route_for(table: RouteTable, host: str, path: str) -> str | None:
    """The route object Envoy would pick for host and path (None: 404)."""
    domains = {d: v for v in table.virtual_hosts for d in v.domains}
    vhost = domains.get(host)
    if vhost is None:
        wildcards = [d for d in domains if d.startswith("*.") and host.endswith(d[1:])]
        if wildcards:
            vhost = domains[max(wildcards, key=len)]
    if vhost is None:
        vhost = domains.get("*")
    if vhost is None:
        return None
    for candidate in vhost.routes:
        match = candidate.match
        if (match.path_type == "Exact" and path == match.path) or (
            match.path_type == "PathPrefix"
            and (path == match.path or path.startswith(match.path.rstrip("/") + "/"))
        ):
            return candidate.source.name
    return None


def test_isolation_helper_sees_every_listener() -> None:
    dag = dag_of(ISOLATION, isolation_routes())
    assert all(
        listener(dag, "isolation", name, "infra")["attachedRoutes"] == 1 for name in LISTENERS
    )
    assert dag.groups[ALL_GATEWAYS].route_tables
