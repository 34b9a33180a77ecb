"""The DAG build: Services, EndpointSlices, Gateways and HTTPRoutes in; a Dag out."""

from __future__ import annotations

import random

import pytest

from dragoman.dag.model import (
    ALL_GATEWAYS,
    Backend,
    Dag,
    DirectResponse,
    DnsCluster,
    EdsCluster,
    Forward,
    LbEndpoint,
    LoadAssignment,
    Locality,
    RouteMatch,
    UpstreamTls,
)
from dragoman.dag.options import BuildOptions
from dragoman.objects import (
    BackendRef,
    HTTPRoute,
    HTTPRouteRule,
    KubeObject,
    ObjectKey,
    ObjectMeta,
    ParentRef,
)
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
    listener,
    match,
    parent_ref,
    rule,
    service,
    service_port,
)
from tests.support.status_builds import build_text, routes_of, virtual_hosts

# --- helpers: the objects come from tests.support.builders; these read the Dag ---------------


DEFAULT_OPTIONS = BuildOptions()


def dag_of(*objects: Object | KubeObject, options: BuildOptions = DEFAULT_OPTIONS) -> Dag:
    """The checked DAG of these objects; dicts (from `tests.support.builders`) are parsed."""
    return build_text(*objects, options=options)


def action(dag: Dag, domain: str = "*") -> Forward | DirectResponse:
    (only,) = routes_of(dag, domain)
    return only.action


def problems(dag: Dag) -> list[tuple[str, str, str]]:
    return [(str(p.object), p.field, p.reason) for p in dag.problems]


GW = gateway("gw", 80)
ROUTE = ObjectKey("HTTPRoute", "default", "r")
WEB = service("web", 80, 8080)
# The ports of the pods behind it.
WEB_PORTS = {"http": 8080, "metrics": 9090}

# --- clusters ------------------------------------------------------------------------------


def test_external_name_becomes_a_dns_cluster() -> None:
    dag = dag_of(GW, external_service("api", "API.Example.com.", 443), http_route("r", "api", 443))

    assert dag.clusters == {
        "default/api/443": DnsCluster(
            name="default/api/443",
            service=ObjectKey("Service", "default", "api"),
            hostname="api.example.com",
            port=443,
            # Port 443 of an external host: TLS verified against the external name.
            tls=UpstreamTls(),
        )
    }
    assert action(dag) == Forward((Backend("default/api/443", 1),), auto_host_rewrite=True)
    assert dag.load_assignments == {}  # Envoy resolves DNS clusters itself
    assert dag.problems == ()


def test_external_name_without_ports_uses_the_backend_ref_port() -> None:
    dag = dag_of(GW, external_service("api", "api.example.com", None), http_route("r", "api", 8443))
    assert list(dag.clusters) == ["default/api/8443"]
    assert dag.problems == ()


def test_selector_service_becomes_an_eds_cluster_with_ready_endpoints() -> None:
    dag = dag_of(
        GW,
        WEB,
        endpoint_slice("web", WEB_PORTS, "10.0.0.2", "10.0.0.1", not_ready=["10.0.0.3"]),
        http_route("r", "web", 80),
    )

    assert dag.clusters == {
        "default/web/80": EdsCluster(
            name="default/web/80",
            service=ObjectKey("Service", "default", "web"),
            port=80,
            target_port=8080,
            port_name="http",
        )
    }
    endpoints_ = (LbEndpoint("10.0.0.1", 8080), LbEndpoint("10.0.0.2", 8080))
    assert dag.load_assignments == {
        "default/web/80": LoadAssignment("default/web/80", (Locality("", endpoints_, 2),))
    }
    assert action(dag) == Forward((Backend("default/web/80", 1),), auto_host_rewrite=False)


@pytest.mark.parametrize(
    ("declared", "target_port", "endpoint_port"),
    [
        pytest.param(service_port(80, 9090, name="web"), 9090, 9090, id="numeric targetPort"),
        pytest.param(
            service_port(80, "metrics", name="web"), "metrics", 9090, id="named targetPort"
        ),
        pytest.param(
            service_port(80, "metrics", name="http"), "metrics", 8080, id="port name wins"
        ),
        pytest.param(service_port(8080, name="web"), 8080, 8080, id="targetPort defaults to port"),
    ],
)
def test_target_port_selects_the_endpoint_port(
    declared: Object, target_port: int | str, endpoint_port: int
) -> None:
    dag = dag_of(
        GW,
        service("web", ports=[declared]),
        endpoint_slice("web", WEB_PORTS, "10.0.0.1"),
        http_route("r", "web", declared["port"]),
    )
    (cluster,) = dag.clusters.values()
    assert isinstance(cluster, EdsCluster)
    assert cluster.target_port == target_port
    (assignment,) = dag.load_assignments.values()
    assert assignment.localities[0].endpoints == (LbEndpoint("10.0.0.1", endpoint_port),)


# --- weights -------------------------------------------------------------------------------

API = external_service("api", "api.example.com", 80)

WEIGHTS = [
    pytest.param(
        [backend_ref("web", 80, weight=3), backend_ref("api", 80, weight=1)],
        Forward((Backend("default/web/80", 3), Backend("default/api/80", 1)), True),
        id="pod-backed and external mixed",
    ),
    pytest.param(
        [backend_ref("web", 80, weight=1), backend_ref("missing", 80, weight=2)],
        Forward((Backend("default/web/80", 1), Backend(None, 2)), False),
        id="invalid backend keeps its weight",
    ),
    pytest.param(
        [backend_ref("web", 80, weight=1), backend_ref("api", 80, weight=0)],
        Forward((Backend("default/web/80", 1),), False),
        id="weight 0 dropped, so no host rewrite",
    ),
    pytest.param(
        [backend_ref("api", 80, weight=2), backend_ref("localhost-svc", 80, weight=1)],
        Forward((Backend("default/api/80", 2), Backend(None, 1)), True),
        id="unsafe external keeps its weight",
    ),
    pytest.param(
        [backend_ref("missing", 80), backend_ref("web", 81)], DirectResponse(500), id="all invalid"
    ),
    pytest.param([backend_ref("web", 80, weight=0)], DirectResponse(500), id="all weight 0"),
    pytest.param([], DirectResponse(500), id="no backendRefs"),
]


@pytest.mark.parametrize(("refs", "expected"), WEIGHTS)
def test_backend_weights(refs: list[Object], expected: Forward | DirectResponse) -> None:
    localhost = external_service("localhost-svc", "localhost", 80)
    dag = dag_of(GW, WEB, API, localhost, http_route("r", rules=[rule(*refs)]))
    assert action(dag) == expected
    referenced = sorted(
        b.cluster for b in getattr(expected, "backends", ()) if b.cluster is not None
    )
    assert sorted(dag.clusters) == referenced
    assert dag.groups[ALL_GATEWAYS].clusters == tuple(referenced)


# --- route precedence ----------------------------------------------------------------------


def test_path_precedence_across_routes() -> None:
    old, new = "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"
    objects = [
        GW,
        WEB,
        http_route(
            "b-new",
            rules=[rule(backend_ref("web", 80), matches=[match("/"), match("/api")])],
            created=new,
        ),
        http_route(
            "a-new", rules=[rule(backend_ref("web", 80), matches=[match("/api")])], created=new
        ),
        http_route(
            "z-old",
            rules=[
                rule(backend_ref("web", 80), matches=[match("/api"), match("/", path_type="Exact")])
            ],
            created=old,
        ),
        http_route(
            "long",
            rules=[
                rule(backend_ref("web", 80), matches=[match("/api/v1")]),
                rule(
                    backend_ref("web", 80),
                    matches=[match("/api/v1/x", path_type="Exact"), match("/api/v1")],
                ),
            ],
            created=new,
        ),
        http_route(
            "m",
            rules=[rule(backend_ref("web", 80), matches=[match("/zz"), match("/aa")])],
            created=new,
        ),
    ]
    dag = dag_of(*objects)
    order = [(r.source.name, r.rule_index, r.match.path_type, r.match.path) for r in routes_of(dag)]
    assert order == [
        ("long", 1, "Exact", "/api/v1/x"),
        ("z-old", 0, "Exact", "/"),
        ("long", 0, "PathPrefix", "/api/v1"),  # first rule before the second
        ("long", 1, "PathPrefix", "/api/v1"),
        ("z-old", 0, "PathPrefix", "/api"),  # oldest route first
        ("a-new", 0, "PathPrefix", "/api"),  # then namespace/name
        ("b-new", 0, "PathPrefix", "/api"),
        ("m", 0, "PathPrefix", "/zz"),  # matches of one rule in list order
        ("m", 0, "PathPrefix", "/aa"),
        ("b-new", 0, "PathPrefix", "/"),
    ]


def test_namespace_breaks_ties_before_name() -> None:
    objects = [
        gateway("gw", listeners=[listener(allowed_routes=allowed_routes("All"))]),
        service("web", ports=[service_port(80)]),
        service("web", ports=[service_port(80)], namespace="a"),
        http_route("z", "web", 80, namespace="a", parents=[parent_ref("gw", namespace="default")]),
        http_route("a", "web", 80),
    ]
    assert [(r.source.namespace, r.source.name) for r in routes_of(dag_of(*objects))] == [
        ("a", "z"),
        ("default", "a"),
    ]


@pytest.mark.parametrize(
    "route",
    [
        pytest.param(
            http_route("r", rules=[rule(backend_ref("web", 80), matches=[])]), id="manifest"
        ),
        # The parser reads `matches: []` as the CRD defaults it (one PathPrefix "/" match); a
        # source that does not hands the build a rule with no matches, which means the same.
        pytest.param(
            HTTPRoute(
                ObjectMeta("r"),
                (ParentRef("gw"),),
                rules=(HTTPRouteRule(matches=(), backend_refs=(BackendRef("web", port=80),)),),
            ),
            id="typed rule without matches",
        ),
    ],
)
def test_empty_match_list_matches_everything(route: Object | HTTPRoute) -> None:
    dag = dag_of(GW, WEB, route)
    assert [r.match for r in routes_of(dag)] == [RouteMatch("PathPrefix", "/")]


def test_regular_expression_matches_rank_after_exact_and_before_prefix() -> None:
    regex = match("/v[0-9]+", path_type="RegularExpression")
    matches = [match("/keep/"), regex, match("/x", path_type="Exact")]
    dag = dag_of(GW, WEB, http_route("r", rules=[rule(backend_ref("web", 80), matches=matches)]))
    assert [r.match for r in routes_of(dag)] == [
        RouteMatch("Exact", "/x"),
        RouteMatch("RegularExpression", "/v[0-9]+"),
        RouteMatch("PathPrefix", "/keep/"),
    ]
    assert problems(dag) == []


def test_invalid_regular_expression_match_is_skipped_with_a_problem() -> None:
    regex = match("/v(?!1)", path_type="RegularExpression")
    dag = dag_of(
        GW,
        WEB,
        http_route("r", rules=[rule(backend_ref("web", 80), matches=[regex, match("/keep/")])]),
    )
    assert [r.match for r in routes_of(dag)] == [RouteMatch("PathPrefix", "/keep/")]
    assert problems(dag) == [
        (str(ROUTE), "spec.rules[0].matches[0].path.value", "UnsupportedValue")
    ]


# --- problems ------------------------------------------------------------------------------

GW_KEY = "Gateway/default/gw"
R = str(ROUTE)
TCP = listener("tcp", 443, protocol="example.com/sctp")
UDP_DNS = service("dns", ports=[service_port(53, name="dns", protocol="UDP")], selector={"a": "b"})

PROBLEMS = [
    pytest.param(
        [gateway("gw", listeners=[listener(), TCP]), http_route("r", "web", 80)],
        [(GW_KEY, "spec.listeners[1].protocol", "UnsupportedProtocol")],
        id="unsupported listener protocol",
    ),
    pytest.param(
        [GW, http_route("r", "web", 80, parents=[parent_ref("nope")])],
        [(R, "spec.parentRefs[0]", "NoMatchingParent")],
        id="missing Gateway",
    ),
    pytest.param(
        [
            GW,
            http_route(
                "r", "web", 80, parents=[parent_ref("gw"), parent_ref("gw", namespace="other")]
            ),
        ],
        [(R, "spec.parentRefs[1]", "NoMatchingParent")],
        id="Gateway in another namespace missing",
    ),
    pytest.param(
        [GW, http_route("r", "web", 80, parents=[parent_ref("gw", section="nope")])],
        [(R, "spec.parentRefs[0].sectionName", "NoMatchingParent")],
        id="no listener with that sectionName",
    ),
    pytest.param(
        [GW, http_route("r", "web", 80, parents=[parent_ref("gw", port=8080)])],
        [(R, "spec.parentRefs[0].port", "NoMatchingParent")],
        id="no listener on that port",
    ),
    pytest.param(
        [
            GW,
            http_route("r", "web", 80, parents=[parent_ref("gw", section="http", port=81)]),
        ],
        [(R, "spec.parentRefs[0].port", "NoMatchingParent")],
        id="named listener on another port",
    ),
    pytest.param(
        [
            gateway("gw", listeners=[listener(), TCP]),
            http_route("r", "web", 80, parents=[parent_ref("gw", section="tcp")]),
        ],
        [
            (GW_KEY, "spec.listeners[1].protocol", "UnsupportedProtocol"),
            (R, "spec.parentRefs[0]", "NotAllowedByListeners"),
        ],
        id="only an unsupported listener selected",
    ),
    pytest.param(
        [GW, http_route("r", "web", 80, parents=[parent_ref("gw", kind="Service")])],
        [(R, "spec.parentRefs[0].kind", "UnsupportedValue")],
        id="parentRef kind",
    ),
    pytest.param(
        [GW, http_route("r", "web", 80, parents=[parent_ref("gw", group="example.com")])],
        [(R, "spec.parentRefs[0].group", "UnsupportedValue")],
        id="parentRef group",
    ),
    pytest.param(
        [
            GW,
            service("web", ports=[service_port(80)], namespace="team"),
            http_route(
                "r", "web", 80, namespace="team", parents=[parent_ref("gw", namespace="default")]
            ),
        ],
        [("HTTPRoute/team/r", "spec.parentRefs[0]", "NotAllowedByListeners")],
        id="namespace not allowed",
    ),
    pytest.param(
        [
            gateway("gw", listeners=[listener(hostname="foo.example.com")]),
            http_route("r", "web", 80, hostnames=("bar.example.com",)),
        ],
        [(R, "spec.hostnames", "NoMatchingListenerHostname")],
        id="hostnames do not intersect",
    ),
    pytest.param(
        [
            GW,
            http_route(
                "r",
                rules=[rule(backend_ref("web", 80, group="gateway.envoyproxy.io", kind="Backend"))],
            ),
        ],
        [(R, "spec.rules[0].backendRefs[0].group", "InvalidKind")],
        id="backendRef group",
    ),
    pytest.param(
        [GW, http_route("r", rules=[rule(backend_ref("web", 80, kind="ConfigMap"))])],
        [(R, "spec.rules[0].backendRefs[0].kind", "InvalidKind")],
        id="backendRef kind",
    ),
    pytest.param(
        [
            GW,
            service("web", ports=[service_port(80)], namespace="other"),
            http_route("r", rules=[rule(backend_ref("web", 80, namespace="other"))]),
        ],
        [(R, "spec.rules[0].backendRefs[0].namespace", "RefNotPermitted")],
        id="cross-namespace backendRef",
    ),
    pytest.param(
        [GW, http_route("r", "nope", 80)],
        [(R, "spec.rules[0].backendRefs[0]", "BackendNotFound")],
        id="missing Service",
    ),
    pytest.param(
        # The CRD, and so the parser, refuses a Service backendRef without a port; the build
        # refuses it too, whatever its source.
        [
            GW,
            HTTPRoute(
                ObjectMeta("r"),
                (ParentRef("gw"),),
                rules=(HTTPRouteRule(backend_refs=(BackendRef("web", port=None),)),),
            ),
        ],
        [(R, "spec.rules[0].backendRefs[0].port", "BackendNotFound")],
        id="backendRef without port",
    ),
    pytest.param(
        [GW, http_route("r", "web", 81)],
        [(R, "spec.rules[0].backendRefs[0].port", "BackendNotFound")],
        id="port the Service does not declare",
    ),
    pytest.param(
        [GW, external_service("api", "api.example.com", 443), http_route("r", "api", 80)],
        [(R, "spec.rules[0].backendRefs[0].port", "BackendNotFound")],
        id="port an ExternalName Service does not declare",
    ),
    pytest.param(
        [GW, UDP_DNS, http_route("r", "dns", 53)],
        [(R, "spec.rules[0].backendRefs[0].port", "UnsupportedProtocol")],
        id="UDP Service port",
    ),
    pytest.param(
        [GW, external_service("x", "127.0.0.1", 80), http_route("r", "x", 80)],
        [(R, "spec.rules[0].backendRefs[0]", "UnsafeExternalName")],
        id="unsafe external name",
    ),
    pytest.param(
        [
            GW,
            http_route(
                "r",
                rules=[
                    rule(backend_ref("web", 80)),
                    rule(
                        backend_ref("web", 80),
                        backend_ref("web", 80, weight=0),
                        backend_ref("nope", 80),
                    ),
                ],
            ),
        ],
        [(R, "spec.rules[1].backendRefs[2]", "BackendNotFound")],
        id="indexes in the field path",
    ),
]


@pytest.mark.parametrize(("objects", "expected"), PROBLEMS)
def test_problems(objects: list[Object | KubeObject], expected: list[tuple[str, str, str]]) -> None:
    dag = dag_of(WEB, *objects)
    assert problems(dag) == expected
    assert all(p.message for p in dag.problems)


def test_a_route_that_attaches_nowhere_adds_no_clusters_but_reports_its_backends() -> None:
    dag = dag_of(
        GW,
        WEB,
        http_route(
            "r",
            rules=[rule(backend_ref("web", 80), backend_ref("nope", 80))],
            parents=[parent_ref("x")],
        ),
    )
    assert dag.clusters == {}
    assert virtual_hosts(dag) == {}
    assert problems(dag) == [
        (R, "spec.parentRefs[0]", "NoMatchingParent"),
        (R, "spec.rules[0].backendRefs[1]", "BackendNotFound"),
    ]


def test_allowed_routes_all_accepts_other_namespaces() -> None:
    objects = [
        gateway("gw", listeners=[listener(allowed_routes=allowed_routes("All"))]),
        service("web", ports=[service_port(80)], namespace="team"),
        http_route(
            "r", "web", 80, namespace="team", parents=[parent_ref("gw", namespace="default")]
        ),
    ]
    dag = dag_of(*objects)
    assert dag.problems == ()
    assert list(dag.clusters) == ["team/web/80"]


# --- ExternalName safety and aliases -------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "LOCALHOST.",
        "127.0.0.1",
        "::1",
        "[::ffff:127.0.0.1]",
        "169.254.169.254",
        "0.0.0.0",
        "kubernetes",
        "10.1.2.3",
        "pod.web.default.svc.cluster.local",  # cluster-local, but not a Service name
        "cluster.local",
    ],
)
def test_unsafe_external_names_are_never_built(name: str) -> None:
    dag = dag_of(GW, external_service("x", name, 80), http_route("r", "x", 80))
    assert action(dag) == DirectResponse(500)
    assert dag.clusters == {}
    (problem,) = dag.problems
    assert (problem.field, problem.reason) == ("spec.rules[0].backendRefs[0]", "UnsafeExternalName")
    assert "default/x" in problem.message


WEB_EDS = EdsCluster(
    "default/web/80", ObjectKey("Service", "default", "web"), 80, target_port=8080, port_name="http"
)

ALIASES = [
    pytest.param(
        [external_service("a", "web.default.svc.cluster.local", None)], WEB_EDS, id="full name"
    ),
    pytest.param(
        [external_service("a", "WEB.default.svc.cluster.local.", None)], WEB_EDS, id="normalised"
    ),
    pytest.param([external_service("a", "web.default.svc", None)], WEB_EDS, id="short name"),
    pytest.param(
        [external_service("a", "web.default.svc", 80)], WEB_EDS, id="alias declaring the port"
    ),
    pytest.param(
        [
            external_service("a", "b.default.svc.cluster.local", None),
            external_service("b", "web.default.svc", None),
        ],
        WEB_EDS,
        id="two hops",
    ),
    pytest.param(
        [
            external_service("a", "b.default.svc", None),
            external_service("b", "c.default.svc", None),
            external_service("c", "web.default.svc", None),
        ],
        WEB_EDS,
        id="three hops",
    ),
    pytest.param(
        [
            external_service("a", "b.default.svc", None),
            external_service("b", "api.example.com", None),
        ],
        DnsCluster("default/b/80", ObjectKey("Service", "default", "b"), "api.example.com", 80),
        id="alias of an external host",
    ),
]


@pytest.mark.parametrize(("services", "cluster"), ALIASES)
def test_in_cluster_external_name_is_an_alias(
    services: list[Object], cluster: EdsCluster | DnsCluster
) -> None:
    dag = dag_of(
        GW, WEB, *services, endpoint_slice("web", WEB_PORTS, "10.0.0.1"), http_route("r", "a", 80)
    )
    assert dag.problems == ()
    assert dag.clusters == {cluster.name: cluster}
    assert action(dag) == Forward(
        (Backend(cluster.name, 1),), auto_host_rewrite=isinstance(cluster, DnsCluster)
    )
    assert list(dag.load_assignments) == ([cluster.name] if isinstance(cluster, EdsCluster) else [])


def test_alias_uses_the_configured_cluster_domain() -> None:
    options = BuildOptions(cluster_domain="corp.internal")
    alias = external_service("a", "web.default.svc.corp.internal", None)
    dag = dag_of(GW, WEB, alias, http_route("r", "a", 80), options=options)
    assert dag.clusters == {"default/web/80": WEB_EDS}


BAD_ALIASES = [
    pytest.param(
        [external_service("a", "web.other.svc.cluster.local", None)],
        "RefNotPermitted",
        id="cross-ns",
    ),
    pytest.param(
        [external_service("a", "nope.default.svc", None)], "BackendNotFound", id="missing target"
    ),
    pytest.param(
        [external_service("a", "a.default.svc", None)], "BackendNotFound", id="loop to itself"
    ),
    pytest.param(
        [
            external_service("a", "b.default.svc", None),
            external_service("b", "a.default.svc", None),
        ],
        "BackendNotFound",
        id="loop of two",
    ),
    pytest.param(
        [
            external_service("a", "b.default.svc", None),
            external_service("b", "c.default.svc", None),
            external_service("c", "d.default.svc", None),
            external_service("d", "web.default.svc", None),
        ],
        "BackendNotFound",
        id="four hops",
    ),
    pytest.param(
        [external_service("a", "web.default.svc", 81)],
        "BackendNotFound",
        id="target lacks the port",
    ),
    pytest.param(
        [external_service("a", "b.default.svc", None), external_service("b", "localhost", None)],
        "UnsafeExternalName",
        id="alias of an unsafe name",
    ),
]


@pytest.mark.parametrize(("services", "reason"), BAD_ALIASES)
def test_bad_aliases_are_rejected(services: list[Object], reason: str) -> None:
    web_elsewhere = service("web", 80, 8080, namespace="other")
    declared = services[0]["spec"].get("ports", [{"port": 80}])
    port = declared[0]["port"]
    dag = dag_of(GW, WEB, web_elsewhere, *services, http_route("r", "a", port))
    assert action(dag) == DirectResponse(500)
    assert dag.clusters == {}
    assert problems(dag) == [(R, "spec.rules[0].backendRefs[0]", reason)]


# --- determinism ---------------------------------------------------------------------------


def test_equal_inputs_give_equal_output_in_any_order() -> None:
    objects: list[KubeObject] = [
        gateway("gw", listeners=[listener(), listener("other", 80, hostname="*.example.com"), TCP]),
        gateway("gw2", listeners=[listener("x", 8080)]),
        WEB,
        API,
        endpoint_slice("web", WEB_PORTS, "10.0.0.2", "10.0.0.1"),
        http_route(
            "r",
            rules=[rule(backend_ref("web", 80), backend_ref("api", 80))],
            hostnames=("b.example.com", "a.example.com"),
        ),
        http_route(
            "s",
            rules=[rule(backend_ref("nope", 80)), rule(backend_ref("web", 80))],
            parents=[parent_ref("gw2"), parent_ref("x")],
        ),
        http_route("t", "api", 1, namespace="z", parents=[parent_ref("gw", namespace="default")]),
    ]
    expected = dag_of(*objects)
    shuffled = list(objects)
    for seed in range(5):
        random.Random(seed).shuffle(shuffled)
        again = dag_of(*shuffled)
        assert again == expected
        assert list(again.groups) == list(expected.groups)
        assert list(again.clusters) == list(expected.clusters)
        assert again.problems == expected.problems
    assert [p.object for p in expected.problems] == sorted(p.object for p in expected.problems)
