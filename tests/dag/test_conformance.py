"""Scenarios of the Gateway API v1.6 conformance suite, written afresh in its style, checking
the status (and, where the suite sends requests, the routing) its tests expect.

Namespaces: `infra` holds the Gateways, `web` and `app` hold backends; `web` carries the
label the `backend-namespaces` Gateway selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest

from dragoman.dag.model import ALL_GATEWAYS, Dag, DirectResponse, Forward, RouteTable
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    gateway,
    gateway_class,
    http_route,
    listener,
    local_ref,
    match,
    namespace_object,
    parent_ref,
    reference_grant,
    rule,
    service,
    service_port,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    build_text,
    gateway_condition,
    listener_condition,
    parents,
    route_condition,
    status,
)
from tests.support.status_builds import listener as listener_status

CERT = certificate_authority().issue("secure.example.com")

# This file's world: objects in namespace `infra` at generation 1 unless told otherwise.
infra_gateway = partial(gateway, namespace="infra", generation=1)
route = partial(http_route, namespace="infra", generation=1)
HTTP = listener()
ALL = allowed_routes("All")
HTTP_FROM_ALL = listener(allowed_routes=ALL)
https_listener = partial(listener, port=443, protocol="HTTPS", allowed_routes=ALL)

INFRA = [
    gateway_class(),
    namespace_object("infra", {"conformance": "infra"}),
    namespace_object("web", {"conformance": "backend"}),
    namespace_object("app"),
    service("infra-v1", namespace="infra", ports=[service_port(8080)]),
    service("infra-v2", namespace="infra", ports=[service_port(8080)]),
    service("web-v1", namespace="web", ports=[service_port(8080)]),
    service("app-v1", namespace="app", ports=[service_port(8080)]),
    infra_gateway("same-namespace", listeners=[HTTP]),
    infra_gateway("all-namespaces", listeners=[HTTP_FROM_ALL]),
    infra_gateway(
        "backend-namespaces",
        listeners=[
            listener(
                allowed_routes=allowed_routes(
                    "Selector", selector={"matchLabels": {"conformance": "backend"}}
                )
            )
        ],
    ),
    tls_secret("secure", CERT.certificate, CERT.private_key, namespace="infra"),
    tls_secret("certificate", CERT.certificate, CERT.private_key, namespace="web"),
]

SAME = parent_ref("same-namespace", namespace="infra")
WEB_V1 = backend_ref("web-v1", 8080, namespace="web")
ALL_NS = parent_ref("all-namespaces", namespace="infra")
BACKEND_NS = parent_ref("backend-namespaces", namespace="infra")


def dag_of(*documents: Object) -> Dag:
    return build_text(*INFRA, *documents)


# --- Gateways -------------------------------------------------------------------------------


def test_gateway_listener_unsupported_protocol() -> None:
    invalid = listener("invalid", 1111, "INVALID")
    dag = dag_of(
        infra_gateway("only-unsupported", listeners=[invalid]),
        infra_gateway("mixed", listeners=[HTTP, invalid]),
    )
    assert gateway_condition(dag, "only-unsupported", "Accepted", "infra") == (
        "False",
        "ListenersNotValid",
    )
    assert listener_condition(dag, "only-unsupported", "invalid", "Accepted", "infra") == (
        "False",
        "UnsupportedProtocol",
    )
    assert listener_status(dag, "only-unsupported", "invalid", "infra")["supportedKinds"] == []
    assert gateway_condition(dag, "mixed", "Accepted", "infra") == ("True", "ListenersNotValid")
    assert listener_condition(dag, "mixed", "http", "Accepted", "infra") == ("True", "Accepted")
    assert listener_condition(dag, "mixed", "invalid", "Accepted", "infra") == (
        "False",
        "UnsupportedProtocol",
    )


def test_gateway_invalid_route_kind() -> None:
    only = allowed_routes(kinds=["InvalidRoute"])
    both = allowed_routes(kinds=["InvalidRoute", "HTTPRoute"])
    dag = dag_of(
        infra_gateway("only-invalid-kind", listeners=[listener(allowed_routes=only)]),
        infra_gateway("invalid-and-valid-kind", listeners=[listener(allowed_routes=both)]),
    )
    only = listener_status(dag, "only-invalid-kind", "http", "infra")
    assert only["supportedKinds"] == []
    assert listener_condition(dag, "only-invalid-kind", "http", "ResolvedRefs", "infra") == (
        "False",
        "InvalidRouteKinds",
    )
    both = listener_status(dag, "invalid-and-valid-kind", "http", "infra")
    assert both["supportedKinds"] == [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]
    assert listener_condition(dag, "invalid-and-valid-kind", "http", "ResolvedRefs", "infra") == (
        "False",
        "InvalidRouteKinds",
    )


MALFORMED = tls_secret("malformed", b"Hello world\n", b"Hello world\n", namespace="infra")


@pytest.mark.parametrize(
    "ref",
    [
        pytest.param({"name": "nonexistent"}, id="nonexistent Secret"),
        pytest.param(local_ref("Secret", "secure", "wrong.group.example.com"), id="group"),
        pytest.param(local_ref("WrongKind", "secure"), id="kind"),
        pytest.param({"name": "malformed"}, id="malformed Secret"),
    ],
)
def test_gateway_invalid_tls_configuration(ref: Object) -> None:
    https = https_listener("https", tls={"certificateRefs": [ref]})
    dag = dag_of(MALFORMED, infra_gateway("gw", listeners=[https]))
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCertificateRef",
    )
    assert {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"} in listener_status(
        dag, "gw", "https", "infra"
    )["supportedKinds"]
    assert listener_status(dag, "gw", "https", "infra")["attachedRoutes"] == 0


CROSS_SECRET = https_listener(
    "https",
    tls={
        "certificateRefs": [
            {"group": "", "kind": "Secret", "name": "certificate", "namespace": "web"}
        ]
    },
)
secret_grant = partial(reference_grant, to_kind="Secret")
from_gateways = partial(secret_grant, from_kind="Gateway", from_namespace="infra")


def test_gateway_secret_missing_reference_grant() -> None:
    dag = dag_of(infra_gateway("gw", listeners=[CROSS_SECRET]))
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "RefNotPermitted",
    )


def test_gateway_secret_invalid_reference_grants() -> None:
    grants = [
        from_gateways("wrong-namespace", "app", to_name="certificate"),
        from_gateways(
            "wrong-from-group", "web", from_group="not-the-group.example.com", to_name="certificate"
        ),
        secret_grant(
            "wrong-from-kind",
            "web",
            from_kind="HTTPRoute",
            from_namespace="infra",
            to_name="certificate",
        ),
        secret_grant(
            "wrong-from-namespace",
            "web",
            from_kind="Gateway",
            from_namespace="elsewhere",
            to_name="certificate",
        ),
        from_gateways("wrong-to-group", "web", to_group="wrong.example.com"),
        from_gateways("wrong-to-kind", "web", to_kind="Service"),
        from_gateways("wrong-to-name", "web", to_name="not-this-one"),
    ]
    dag = dag_of(infra_gateway("gw", listeners=[CROSS_SECRET]), *grants)
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "RefNotPermitted",
    )


@pytest.mark.parametrize(
    "to_name",
    [
        pytest.param(None, id="all in namespace"),
        pytest.param("certificate", id="specific"),
    ],
)
def test_gateway_secret_reference_grant(to_name: str | None) -> None:
    grant = from_gateways("grant", "web", to_name=to_name)
    dag = dag_of(infra_gateway("gw", listeners=[CROSS_SECRET]), grant)
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "True",
        "ResolvedRefs",
    )
    assert listener_condition(dag, "gw", "https", "Programmed", "infra") == ("True", "Programmed")


def test_gateway_with_attached_routes() -> None:
    selector = allowed_routes(
        "Selector",
        selector={"matchLabels": {"kubernetes.io/metadata.name": "infra"}},
        kinds=["HTTPRoute"],
    )
    one = parent_ref("one", namespace="infra")
    two = parent_ref("two", namespace="infra")
    unresolved_tls = {"certificateRefs": [{"name": "does-not-exist"}], "mode": "Terminate"}
    dag = dag_of(
        infra_gateway("one", listeners=[listener(allowed_routes=selector)]),
        route("route-1", "infra-v1", 8080, parents=[one]),
        infra_gateway(
            "two", listeners=[listener(hostname="foo.example.com", allowed_routes=selector)]
        ),
        route("route-2", "infra-v1", 8080, parents=[two]),
        route("route-3", "infra-v1", 8080, parents=[two]),
        route(
            "not-accepted",
            "infra-v1",
            8080,
            parents=[two],
            hostnames=["not-accepted.example.com"],
        ),
        infra_gateway(
            "unresolved",
            listeners=[listener("tls", 443, "HTTPS", allowed_routes=selector, tls=unresolved_tls)],
        ),
        route(
            "route-4",
            "does-not-exist",
            8080,
            parents=[parent_ref("unresolved", namespace="infra", section="tls")],
        ),
    )
    for name, count in (("one", 1), ("two", 2)):
        assert listener_status(dag, name, "http", "infra")["attachedRoutes"] == count
        assert listener_condition(dag, name, "http", "Accepted", "infra")[0] == "True"
        assert listener_condition(dag, name, "http", "ResolvedRefs", "infra")[0] == "True"
    assert route_condition(dag, "not-accepted", "Accepted", "infra") == (
        "False",
        "NoMatchingListenerHostname",
    )
    assert listener_status(dag, "unresolved", "tls", "infra")["attachedRoutes"] == 1
    assert listener_condition(dag, "unresolved", "tls", "Programmed", "infra")[0] == "False"
    assert listener_condition(dag, "unresolved", "tls", "ResolvedRefs", "infra")[0] == "False"
    assert route_condition(dag, "route-4", "ResolvedRefs", "infra")[0] == "False"


def test_gateway_modify_listeners() -> None:
    before = infra_gateway("gw", listeners=[HTTP_FROM_ALL])
    secure = https_listener(
        "https", hostname="secure.example.com", tls={"certificateRefs": [{"name": "secure"}]}
    )
    after = infra_gateway("gw", listeners=[HTTP_FROM_ALL, secure], generation=2)
    attached = route("r", "infra-v1", 8080, parents=[parent_ref("gw", namespace="infra")])
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
        dag = dag_of(infra_gateway("gw", listeners=[HTTP], generation=generation))
        gateway_status = status(dag, "Gateway", "gw", "infra")
        observed = {c["observedGeneration"] for c in gateway_status["conditions"]}
        observed |= {
            c["observedGeneration"] for e in gateway_status["listeners"] for c in e["conditions"]
        }
        assert observed == {generation}


# --- HTTPRoutes -----------------------------------------------------------------------------


def test_httproute_simple_and_cross_namespace() -> None:
    dag = dag_of(route("cross", "web-v1", 8080, parents=[BACKEND_NS], namespace="web"))
    assert route_condition(dag, "cross", "Accepted", "web") == ("True", "Accepted")
    assert route_condition(dag, "cross", "ResolvedRefs", "web") == ("True", "ResolvedRefs")
    assert backends_for(dag, "backend-namespaces", "/") == ["web/web-v1/8080"]


def test_httproute_invalid_cross_namespace_parent_ref() -> None:
    dag = dag_of(route("r", "web-v1", 8080, parents=[SAME], namespace="web"))
    assert route_condition(dag, "r", "Accepted", "web") == ("False", "NotAllowedByListeners")
    assert route_condition(dag, "r", "ResolvedRefs", "web") == ("True", "ResolvedRefs")
    assert listener_status(dag, "same-namespace", "http", "infra")["attachedRoutes"] == 0


@pytest.mark.parametrize(
    ("parent", "gateways"),
    [
        pytest.param(parent_ref("same-namespace", namespace="infra", port=81), [], id="port"),
        pytest.param(
            parent_ref("same-namespace", namespace="infra", section="nope"), [], id="sectionName"
        ),
        pytest.param(
            parent_ref("two-listeners", namespace="infra", section="http", port=8080),
            [infra_gateway("two-listeners", listeners=[HTTP, listener("other", 8080)])],
            id="sectionName not on that port",
        ),
    ],
)
def test_httproute_invalid_parent_ref_not_matching(parent: Object, gateways: list[Object]) -> None:
    dag = dag_of(*gateways, route("r", "infra-v1", 8080, parents=[parent]))
    assert route_condition(dag, "r", "Accepted", "infra") == ("False", "NoMatchingParent")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    name = parent["name"]
    assert all(e["attachedRoutes"] == 0 for e in status(dag, "Gateway", name, "infra")["listeners"])


@pytest.mark.parametrize(
    ("backend", "reason"),
    [
        pytest.param(backend_ref("nonexistent", 8080), "BackendNotFound", id="nonexistent"),
        pytest.param(
            backend_ref("infra-v1", 8080, group="unknownkind.example.com", kind="NonExistent"),
            "InvalidKind",
            id="unknown kind",
        ),
        pytest.param(WEB_V1, "RefNotPermitted", id="cross-namespace"),
    ],
)
def test_httproute_invalid_backend_refs_answer_500(backend: Object, reason: str) -> None:
    dag = dag_of(route("r", rules=[rule(backend)], parents=[SAME]))
    assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", reason)
    assert served_action(dag, "same-namespace", "/") == DirectResponse(status=500)


from_routes = partial(reference_grant, from_kind="HTTPRoute", from_namespace="infra")


def test_httproute_reference_grant_and_its_deletion() -> None:
    text = route("r", rules=[rule(WEB_V1)], parents=[SAME])
    grant = from_routes("grant", "web", to_name="web-v1")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    assert backends_for(dag, "same-namespace", "/") == ["web/web-v1/8080"]
    dag = dag_of(text)  # the grant deleted
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")
    assert served_action(dag, "same-namespace", "/") == DirectResponse(status=500)


def test_httproute_invalid_reference_grant() -> None:
    text = route("r", rules=[rule(WEB_V1)], parents=[SAME])
    grant = from_routes("grant", "web", to_name="other")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")


def test_httproute_partially_invalid_via_invalid_reference_grant() -> None:
    app_v1 = backend_ref("app-v1", 8080, namespace="app")
    text = route("r", rules=[rule(app_v1, WEB_V1)], parents=[SAME])
    grant = from_routes("grant", "app", to_name="app-v1")
    dag = dag_of(text, grant)
    assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")
    assert route_condition(dag, "r", "ResolvedRefs", "infra") == ("False", "RefNotPermitted")
    action = served_action(dag, "same-namespace", "/")
    assert isinstance(action, Forward)
    # The valid backend keeps its share; the invalid one's share answers 500.
    assert [b.cluster for b in action.backends] == ["app/app-v1/8080", None]


def test_httproute_disallowed_kind() -> None:
    tls_only = listener(
        "tls",
        443,
        "TLS",
        tls={"mode": "Passthrough"},
        allowed_routes=allowed_routes("Same", kinds=["TLSRoute"]),
    )
    dag = dag_of(
        infra_gateway("tlsroutes-only", listeners=[tls_only]),
        route(
            "disallowed-kind",
            "infra-v1",
            8080,
            parents=[parent_ref("tlsroutes-only", namespace="infra")],
        ),
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
        dag = dag_of(route("r", backend, 8080, parents=[SAME], generation=generation))
        [entry] = parents(dag, "r", "infra")
        assert {c["observedGeneration"] for c in entry["conditions"]} == {generation}
        assert route_condition(dag, "r", "Accepted", "infra") == ("True", "Accepted")


# --- listener isolation ---------------------------------------------------------------------

ISOLATION = infra_gateway(
    "isolation",
    listeners=[
        listener("empty-hostname", allowed_routes=ALL),
        listener("wildcard-example-com", hostname="*.example.com", allowed_routes=ALL),
        listener("wildcard-foo-example-com", hostname="*.foo.example.com", allowed_routes=ALL),
        listener("abc-foo-example-com", hostname="abc.foo.example.com", allowed_routes=ALL),
    ],
)
LISTENERS = (
    "empty-hostname",
    "wildcard-example-com",
    "wildcard-foo-example-com",
    "abc-foo-example-com",
)


def isolation_routes(hostnames: Sequence[str] = ()) -> list[Object]:
    """A route attached to each listener, on a path named after it."""
    return [
        route(
            f"attaches-to-{name}",
            rules=[rule(backend_ref("infra-v1", 8080), matches=[match(f"/{name}")])],
            parents=[parent_ref("isolation", namespace="infra", section=name)],
            hostnames=hostnames,
        )
        for name in LISTENERS
    ]


HOSTS = {
    "bar.com": "empty-hostname",
    "bar.example.com": "wildcard-example-com",
    "bar.foo.example.com": "wildcard-foo-example-com",
    "abc.foo.example.com": "abc-foo-example-com",
}


@pytest.mark.parametrize(
    "hostnames",
    [
        pytest.param((), id="routes without hostnames"),
        pytest.param(
            ("bar.com", "*.example.com", "*.foo.example.com", "abc.foo.example.com"),
            id="with hostname intersection",
        ),
    ],
)
def test_gateway_http_listener_isolation(hostnames: tuple[str, ...]) -> None:
    dag = dag_of(ISOLATION, *isolation_routes(hostnames))
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
    dag = dag_of(ISOLATION, *isolation_routes())
    assert all(
        listener_status(dag, "isolation", name, "infra")["attachedRoutes"] == 1
        for name in LISTENERS
    )
    assert dag.groups[ALL_GATEWAYS].route_tables
