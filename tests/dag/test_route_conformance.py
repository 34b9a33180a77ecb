"""Gateway API conformance scenarios for HTTPRoute and GRPCRoute routing, as unit tests.

Each test builds the DAG from manifests shaped like the upstream conformance suite's (written
here, not copied), then asks tests/support/routing_sim.py which route Envoy would pick for each
request the upstream test sends, and checks the backend the upstream test expects.
"""

from __future__ import annotations

from functools import partial

import pytest

from dragoman.dag.frontends.kind_conflicts import KIND_CONFLICT
from dragoman.dag.model import Dag, DirectResponse, Forward, Redirect, Route
from tests.support.builders import (
    Object,
    backend_ref,
    gateway,
    grpc_match,
    grpc_route,
    http_route,
    listener,
    match,
    parent_ref,
    rule,
    service,
    service_port,
)
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import build_text, condition, parents

NS = "infra"
V1, V2, V3 = (backend_ref(name, 8080) for name in ("v1", "v2", "v3"))
BACKENDS = [
    service(
        name,
        namespace=NS,
        ports=[
            service_port(8080, name="http"),
            service_port(9000, name="grpc", app_protocol="kubernetes.io/h2c"),
        ],
    )
    for name in ("v1", "v2", "v3")
]
ONE_LISTENER = gateway(namespace=NS, listeners=[listener()])

JAN, FEB, MAR = (f"2024-{month:02}-01T00:00:00Z" for month in (1, 2, 3))

# This file's world: routes in namespace `infra` attached to its Gateway `gw`.
infra_route = partial(http_route, namespace=NS, parents=[parent_ref("gw")])
infra_grpc_route = partial(grpc_route, namespace=NS, parents=[parent_ref("gw")])


def dag_of(*documents: Object) -> Dag:
    return build_text(*documents, *BACKENDS)


def backend(dag: Dag, request: Request, port: int = 80) -> str:
    """The backend (v1, v2, v3) a request reaches, or the status Envoy answers with."""
    route = route_for(dag, request, port)
    if route is None:
        return "404"
    return outcome(route)


def outcome(route: Route) -> str:
    action = route.action
    if isinstance(action, Forward):
        names = {b.cluster.split("/")[1] for b in action.backends if b.cluster}
        return ",".join(sorted(names)) or "500"
    if isinstance(action, Redirect):
        return f"redirect {action.status}"
    assert isinstance(action, DirectResponse)
    return str(action.status)


def expect(dag: Dag, cases: list[tuple[Request, str]], port: int = 80) -> None:
    got = [(request, backend(dag, request, port)) for request in cases_requests(cases)]
    assert got == cases


def cases_requests(cases: list[tuple[Request, str]]) -> list[Request]:
    return [request for request, _ in cases]


def test_matching_across_routes() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "part1",
            hostnames=["example.com", "example.net"],
            rules=[rule(V1, matches=[match("/"), match(headers={"version": "one"})])],
        ),
        infra_route(
            "part2",
            hostnames=["example.com"],
            rules=[rule(V2, matches=[match("/v2"), match(headers={"version": "two"})])],
        ),
    )
    expect(
        dag,
        [
            (Request("example.com", "/"), "v1"),
            (Request("example.com", "/example"), "v1"),
            (Request("example.net", "/example"), "v1"),
            (Request("example.com", "/example", {"Version": "one"}), "v1"),
            (Request("example.com", "/v2"), "v2"),
            (Request("example.net", "/v2"), "v1"),
            (Request("example.com", "/v2/example"), "v2"),
            (Request("example.com", "/", {"Version": "two"}), "v2"),
        ],
    )


def test_header_matching() -> None:
    build_number = {"name": "x-build", "type": "RegularExpression", "value": "[0-9]+"}
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "headers",
            rules=[
                rule(V1, matches=[match(headers={"version": "one"})]),
                rule(V2, matches=[match(headers={"version": "two"})]),
                rule(V1, matches=[match(headers={"version": "two", "color": "orange"})]),
                rule(
                    V1,
                    matches=[match(headers={"color": "blue"}), match(headers={"color": "green"})],
                ),
                rule(
                    V2,
                    matches=[match(headers={"color": "red"}), match(headers={"color": "yellow"})],
                ),
                rule(V3, matches=[match(headers=[build_number])]),
            ],
        ),
    )
    expect(
        dag,
        [
            (Request("any", "/", {"Version": "one"}), "v1"),
            (Request("any", "/", {"Version": "two"}), "v2"),
            (Request("any", "/", {"Version": "two", "Color": "orange"}), "v1"),
            (Request("any", "/", {"Color": "blue"}), "v1"),
            (Request("any", "/", {"Color": "green"}), "v1"),
            (Request("any", "/", {"Color": "red"}), "v2"),
            (Request("any", "/", {"Color": "yellow"}), "v2"),
            (Request("any", "/", {"Version": "two", "Color": "red"}), "v2"),
            (Request("any", "/", {"X-Build": "42"}), "v3"),
            (Request("any", "/", {"X-Build": "4a"}), "404"),
            (Request("any", "/", {"Version": "ONE"}), "404"),
            (Request("any", "/"), "404"),
        ],
    )


def test_query_param_matching() -> None:
    whale = {"animal": "whale"}
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "queries",
            rules=[
                rule(V1, matches=[match(query_params=whale)]),
                rule(V2, matches=[match(query_params={"animal": "dolphin"})]),
                rule(
                    V3,
                    matches=[
                        match(query_params={"animal": "dolphin", "color": "blue"}),
                        match(query_params={"ANIMAL": "Whale"}),
                    ],
                ),
                rule(V1, matches=[match("/path1", query_params=whale)]),
                rule(V2, matches=[match(headers={"version": "one"}, query_params=whale)]),
                rule(V1, matches=[match("/path5")]),
                rule(V2, matches=[match(query_params={"animal": "hydra"})]),
                rule(V3, matches=[match(headers={"version": "four"})]),
            ],
        ),
    )
    expect(
        dag,
        [
            (Request("any", "/?animal=whale"), "v1"),
            (Request("any", "/?animal=dolphin"), "v2"),
            (Request("any", "/?animal=dolphin&color=blue"), "v3"),
            (Request("any", "/?ANIMAL=Whale"), "v3"),
            (Request("any", "/?animal=whale&otherparam=irrelevant"), "v1"),
            (Request("any", "/?animal=dolphin&color=yellow"), "v2"),
            (Request("any", "/?color=blue"), "404"),
            (Request("any", "/?animal=whaledolphin"), "404"),
            (Request("any", "/"), "404"),
            (Request("any", "/path1?animal=whale"), "v1"),
            (Request("any", "/?animal=whale", {"version": "one"}), "v2"),
            (Request("any", "/path5?animal=hydra"), "v1"),
            (Request("any", "/?animal=hydra", {"version": "four"}), "v3"),
        ],
    )


def test_method_matching() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "methods",
            rules=[
                rule(V1, matches=[match(method="POST")]),
                rule(V2, matches=[match(method="GET")]),
                rule(V1, matches=[match("/path1", method="GET")]),
                rule(V2, matches=[match(headers={"version": "one"}, method="PUT")]),
                rule(V1, matches=[match("/path5")]),
                rule(V2, matches=[match(method="PATCH")]),
                rule(V3, matches=[match(headers={"version": "four"})]),
            ],
        ),
    )
    expect(
        dag,
        [
            (Request("any", "/", method="POST"), "v1"),
            (Request("any", "/", method="GET"), "v2"),
            (Request("any", "/", method="HEAD"), "404"),
            (Request("any", "/path1", method="GET"), "v1"),
            (Request("any", "/", {"version": "one"}, method="PUT"), "v2"),
            (Request("any", "/", {"version": "one"}, method="DELETE"), "404"),
            # A longer prefix outranks a method match; a method match outranks headers.
            (Request("any", "/path5", method="PATCH"), "v1"),
            (Request("any", "/", {"version": "four"}, method="PATCH"), "v2"),
        ],
    )


def test_path_match_order() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "order",
            rules=[
                rule(V1, matches=[match("/match", path_type="Exact")]),
                rule(V2, matches=[match("/match/exact", path_type="Exact")]),
                rule(V3, matches=[match("/match/exact/one", path_type="Exact")]),
                rule(V3, matches=[match("/match/")]),
                rule(V1, matches=[match("/match/prefix/")]),
                rule(V2, matches=[match("/match/prefix/one")]),
                rule(V1, matches=[match("/match/re/[0-9]+", path_type="RegularExpression")]),
            ],
        ),
    )
    expect(
        dag,
        [
            (Request("any", "/match/exact/one"), "v3"),
            (Request("any", "/match/exact"), "v2"),
            (Request("any", "/match"), "v1"),
            (Request("any", "/match/prefix/one/any"), "v2"),
            (Request("any", "/match/prefix/any"), "v1"),
            (Request("any", "/match/any"), "v3"),
            (Request("any", "/match/re/12"), "v1"),
            (Request("any", "/match/re/x"), "v3"),
            (Request("any", "/matchless"), "404"),
        ],
    )


THREE_LISTENERS = gateway(
    namespace=NS,
    listeners=[
        listener("listener-1", hostname="very.specific.com"),
        listener("listener-2", hostname="*.wildcard.io"),
        listener("listener-3", hostname="*.anotherwildcard.io"),
    ],
)


def test_hostname_intersection() -> None:
    routes = {
        "s1": (V1, ["non.matching.com", "*.nonmatchingwildcard.io", "very.specific.com"]),
        "s2": (
            V2,
            [
                "non.matching.com",
                "wildcard.io",
                "foo.wildcard.io",
                "bar.wildcard.io",
                "foo.bar.wildcard.io",
            ],
        ),
        "s3": (V3, ["non.matching.com", "*.specific.com"]),
        "s4": (V1, ["*.anotherwildcard.io"]),
        "s5": (V2, ["specific.but.wrong.com", "wildcard.io"]),
    }
    dag = dag_of(
        THREE_LISTENERS,
        *(
            infra_route(name, hostnames=hostnames, rules=[rule(to, matches=[match(f"/{name}")])])
            for name, (to, hostnames) in routes.items()
        ),
    )
    expect(
        dag,
        [
            (Request("very.specific.com", "/s1"), "v1"),
            (Request("very.specific.com:1234", "/s1"), "v1"),
            (Request("non.matching.com", "/s1"), "404"),
            (Request("foo.nonmatchingwildcard.io", "/s1"), "404"),
            (Request("foo.wildcard.io", "/s1"), "404"),
            (Request("very.specific.com", "/non-matching-prefix"), "404"),
            (Request("foo.wildcard.io", "/s2"), "v2"),
            (Request("bar.wildcard.io", "/s2"), "v2"),
            (Request("foo.bar.wildcard.io", "/s2"), "v2"),
            (Request("baz.wildcard.io", "/s2"), "404"),
            (Request("wildcard.io", "/s2"), "404"),
            (Request("very.specific.com", "/s2"), "404"),
            (Request("very.specific.com", "/s3"), "v3"),
            (Request("foo.specific.com", "/s3"), "404"),
            (Request("foo.anotherwildcard.io", "/s4"), "v1"),
            (Request("foo.bar.anotherwildcard.io", "/s4"), "v1"),
            (Request("anotherwildcard.io", "/s4"), "404"),
            (Request("specific.but.wrong.com", "/s5"), "404"),
            (Request("wildcard.io", "/s5"), "404"),
        ],
    )
    assert ("HTTPRoute/infra/s5", "NoMatchingListenerHostname") in [
        (str(p.object), p.reason) for p in dag.problems
    ]


def test_listener_hostname_matching() -> None:
    hostnames = ("bar.com", "foo.bar.com", "*.bar.com", "*.foo.com")
    four_listeners = gateway(
        namespace=NS,
        listeners=[
            listener(f"listener-{n}", hostname=hostname)
            for n, hostname in enumerate(hostnames, start=1)
        ],
    )
    routes = [
        infra_route(name, name, 8080, parents=[parent_ref("gw", section=s) for s in sections])
        for name, sections in (
            ("v1", ["listener-1"]),
            ("v2", ["listener-2"]),
            ("v3", ["listener-3", "listener-4"]),
        )
    ]
    dag = dag_of(four_listeners, *routes)
    expect(
        dag,
        [
            (Request("bar.com"), "v1"),
            (Request("foo.bar.com"), "v2"),
            (Request("baz.bar.com"), "v3"),
            (Request("boo.bar.com"), "v3"),
            (Request("multiple.prefixes.bar.com"), "v3"),
            (Request("multiple.prefixes.foo.com"), "v3"),
            (Request("foo.com"), "404"),
            (Request("no.matching.host"), "404"),
        ],
    )


ISOLATION_GATEWAY = gateway(
    namespace=NS,
    listeners=[
        listener("empty-hostname"),
        listener("wildcard-example-com", hostname="*.example.com"),
        listener("wildcard-foo-example-com", hostname="*.foo.example.com"),
        listener("abc-foo-example-com", hostname="abc.foo.example.com"),
    ],
)
ISOLATION_CASES = [
    (Request("bar.com", "/empty-hostname"), "v1"),
    (Request("bar.com", "/wildcard-example-com"), "404"),
    (Request("bar.com", "/wildcard-foo-example-com"), "404"),
    (Request("bar.com", "/abc-foo-example-com"), "404"),
    (Request("bar.example.com", "/empty-hostname"), "404"),
    (Request("bar.example.com", "/wildcard-example-com"), "v1"),
    (Request("bar.example.com", "/wildcard-foo-example-com"), "404"),
    (Request("bar.example.com", "/abc-foo-example-com"), "404"),
    (Request("bar.foo.example.com", "/empty-hostname"), "404"),
    (Request("bar.foo.example.com", "/wildcard-example-com"), "404"),
    (Request("bar.foo.example.com", "/wildcard-foo-example-com"), "v1"),
    (Request("bar.foo.example.com", "/abc-foo-example-com"), "404"),
    (Request("abc.foo.example.com", "/empty-hostname"), "404"),
    (Request("abc.foo.example.com", "/wildcard-example-com"), "404"),
    (Request("abc.foo.example.com", "/wildcard-foo-example-com"), "404"),
    (Request("abc.foo.example.com", "/abc-foo-example-com"), "v1"),
]


@pytest.mark.parametrize("with_route_hostnames", [False, True])
def test_listener_isolation(with_route_hostnames: bool) -> None:
    hostnames = (
        ["bar.com", "*.example.com", "*.foo.example.com", "abc.foo.example.com"]
        if with_route_hostnames
        else []
    )
    routes = [
        infra_route(
            section,
            parents=[parent_ref("gw", section=section)],
            hostnames=hostnames,
            rules=[rule(V1, matches=[match(f"/{section}")])],
        )
        for section in (
            "empty-hostname",
            "wildcard-example-com",
            "wildcard-foo-example-com",
            "abc-foo-example-com",
        )
    ]
    expect(dag_of(ISOLATION_GATEWAY, *routes), ISOLATION_CASES)


def test_wildcard_route_serves_hosts_that_also_have_exact_routes() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_route(
            "wild",
            hostnames=["*.example.com"],
            rules=[rule(V1, matches=[match("/a")]), rule(V1, matches=[match("/shared")])],
        ),
        infra_route(
            "exact",
            hostnames=["foo.example.com"],
            rules=[rule(V2, matches=[match("/b")]), rule(V2, matches=[match("/shared")])],
        ),
        infra_route("any", rules=[rule(V3, matches=[match("/shared", path_type="Exact")])]),
    )
    expect(
        dag,
        [
            (Request("foo.example.com", "/a"), "v1"),
            (Request("foo.example.com", "/b"), "v2"),
            # Hostname precedence before match precedence: the exact hostname wins, even over
            # an Exact path of a route without hostnames.
            (Request("foo.example.com", "/shared"), "v2"),
            (Request("bar.example.com", "/shared"), "v1"),
            (Request("bar.example.com", "/b"), "404"),
            (Request("other.org", "/shared"), "v3"),
        ],
    )


def test_older_route_wins_ties_then_namespace_and_name() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_route("a-new", created=FEB, rules=[rule(V1, matches=[match("/x")])]),
        infra_route("b-old", created=JAN, rules=[rule(V2, matches=[match("/x")])]),
    )
    assert backend(dag, Request("any", "/x")) == "v2"


GRPC_ROUTES = infra_grpc_route(
    "exact",
    rules=[
        rule(V1, matches=[grpc_match("pkg.Echo", "Echo")]),
        rule(V2, matches=[grpc_match("pkg.Echo", "EchoTwo")]),
        rule(V3, matches=[grpc_match("pkg.Echo", headers={"version": "two"})]),
        rule(V3, matches=[grpc_match(r"pkg\.Other.*", "Get.*", match_type="RegularExpression")]),
        rule(V2, matches=[grpc_match(method="Anything")]),
    ],
)


def test_grpc_method_and_header_matching() -> None:
    dag = dag_of(ONE_LISTENER, GRPC_ROUTES)
    grpc = {"grpc": True}
    expect(
        dag,
        [
            (Request("any", "/pkg.Echo/Echo", **grpc), "v1"),
            (Request("any", "/pkg.Echo/EchoTwo", **grpc), "v2"),
            # A longer method match outranks a header match.
            (Request("any", "/pkg.Echo/Echo", {"version": "two"}, **grpc), "v1"),
            (Request("any", "/pkg.Echo/EchoThree", {"version": "two"}, **grpc), "v3"),
            (Request("any", "/pkg.OtherService/GetThing", **grpc), "v3"),
            (Request("any", "/pkg.OtherService/PutThing", **grpc), "404"),
            (Request("any", "/any.Service/Anything", **grpc), "v2"),
            # Plain HTTP requests never reach a GRPCRoute.
            (Request("any", "/pkg.Echo/Echo"), "404"),
        ],
    )


def test_grpc_backends_speak_h2c_in_clusters_of_their_own() -> None:
    # The HTTPRoute on a Gateway of its own: on the GRPCRoutes' listener it would conflict.
    dag = dag_of(
        ONE_LISTENER,
        GRPC_ROUTES,
        gateway("web-gw", namespace=NS, listeners=[listener(port=81)]),
        infra_route(
            "web",
            parents=[parent_ref("web-gw")],
            rules=[rule(V1, matches=[match("/web")]), rule(backend_ref("v2", 9000))],
        ),
    )
    protocols = {name: cluster.protocol for name, cluster in dag.clusters.items()}
    assert protocols == {
        "infra/v1/8080": "http1",
        "infra/v1/8080/h2c": "h2c",
        "infra/v2/8080/h2c": "h2c",
        # appProtocol kubernetes.io/h2c on the Service port: h2c for an HTTPRoute too.
        "infra/v2/9000/h2c": "h2c",
        "infra/v3/8080/h2c": "h2c",
    }
    # Each protocol's cluster gets endpoints of its own.
    assert {"infra/v1/8080", "infra/v1/8080/h2c"} <= set(dag.load_assignments)


def test_weights_and_zero_weight() -> None:
    weighted = [
        backend_ref(name, 8080, weight=weight)
        for name, weight in (("v1", 70), ("v2", 30), ("v3", 0))
    ]
    dag = dag_of(ONE_LISTENER, infra_route("weights", rules=[rule(*weighted)]))
    route = route_for(dag, Request("any"))
    assert route is not None and isinstance(route.action, Forward)
    assert [(b.cluster, b.weight) for b in route.action.backends] == [
        ("infra/v1/8080", 70),
        ("infra/v2/8080", 30),
    ]


def test_grpc_route_hostname_precedence_beats_age() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_grpc_route("wildcard-older", "v1", 8080, hostnames=["*.example.com"], created=JAN),
        infra_grpc_route("exact-newer", "v2", 8080, hostnames=["abc.example.com"], created=FEB),
        infra_grpc_route(
            "deeper-wildcard-newer", "v3", 8080, hostnames=["*.deep.example.com"], created=MAR
        ),
    )
    expect(
        dag,
        [
            (Request("abc.example.com", "/pkg.S/M", grpc=True), "v2"),
            (Request("x.deep.example.com", "/pkg.S/M", grpc=True), "v3"),
            (Request("other.example.com", "/pkg.S/M", grpc=True), "v1"),
        ],
    )


def accepted(dag: Dag, kind: str, name: str) -> tuple[str, str]:
    [entry] = parents(dag, name, NS, kind)
    return condition(entry["conditions"], "Accepted")


def test_of_an_http_and_a_grpc_route_sharing_hostnames_on_a_listener_the_older_is_accepted() -> (
    None
):
    older_http = dag_of(
        ONE_LISTENER,
        infra_grpc_route(
            "grpc", "v1", 8080, hostnames=["*.example.com"], created="2025-01-01T00:00:00Z"
        ),
        infra_route("web", "v2", 8080, hostnames=["foo.example.com"], created=JAN),
    )
    assert accepted(older_http, "HTTPRoute", "web") == ("True", "Accepted")
    assert accepted(older_http, "GRPCRoute", "grpc") == ("False", KIND_CONFLICT)
    [entry] = parents(older_http, "grpc", NS, "GRPCRoute")
    [message] = [c["message"] for c in entry["conditions"] if c["type"] == "Accepted"]
    assert "HTTPRoute infra/web" in message
    # The rejected route serves nothing, on any of its hostnames.
    expect(
        older_http,
        [
            (Request("foo.example.com", "/pkg.S/M"), "v2"),
            (Request("foo.example.com", "/pkg.S/M", grpc=True), "v2"),
            (Request("bar.example.com", "/pkg.S/M", grpc=True), "404"),
        ],
    )
    assert sorted(older_http.clusters) == ["infra/v2/8080"]

    # The same age: the first by namespace/name wins, whatever the kind.
    tie = dag_of(
        ONE_LISTENER,
        infra_grpc_route("a-grpc", "v1", 8080, hostnames=["foo.example.com"]),
        infra_route("b-web", "v2", 8080, hostnames=["*.example.com"]),
    )
    assert accepted(tie, "GRPCRoute", "a-grpc") == ("True", "Accepted")
    assert accepted(tie, "HTTPRoute", "b-web") == ("False", KIND_CONFLICT)
    # A route without hostnames takes every host: it intersects any other.
    anywhere = dag_of(
        ONE_LISTENER,
        infra_grpc_route("a-grpc", "v1", 8080),
        infra_route("b", "v2", 8080, hostnames=["x.org"]),
    )
    assert accepted(anywhere, "HTTPRoute", "b") == ("False", KIND_CONFLICT)


def test_http_and_grpc_routes_with_disjoint_hostnames_share_a_listener() -> None:
    dag = dag_of(
        ONE_LISTENER,
        infra_grpc_route("grpc", "v1", 8080, hostnames=["*.grpc.example.com"]),
        infra_route("web", "v2", 8080, hostnames=["www.example.com", "*.web.example.com"]),
        infra_route("more-web", "v3", 8080, hostnames=["example.com"]),
    )
    for kind, name in (("GRPCRoute", "grpc"), ("HTTPRoute", "web"), ("HTTPRoute", "more-web")):
        assert accepted(dag, kind, name) == ("True", "Accepted")
    expect(
        dag,
        [
            (Request("a.grpc.example.com", "/pkg.S/M", grpc=True), "v1"),
            (Request("www.example.com", "/"), "v2"),
            (Request("a.web.example.com", "/"), "v2"),
            (Request("example.com", "/"), "v3"),
        ],
    )


def test_a_kind_conflict_on_one_listener_leaves_the_route_on_its_other_listeners() -> None:
    two_listeners = gateway(namespace=NS, listeners=[listener(), listener("alt", 81)])
    web = infra_route("b-web", "v2", 8080, hostnames=["foo.example.com"])
    dag = dag_of(
        two_listeners, infra_grpc_route("a-grpc", "v1", 8080, hostnames=["foo.example.com"]), web
    )
    # The GRPCRoute won both listeners: the HTTPRoute is left with none.
    assert accepted(dag, "HTTPRoute", "b-web") == ("False", KIND_CONFLICT)
    assert backend(dag, Request("foo.example.com", "/"), port=81) == "404"
    on_http = [parent_ref("gw", section="http")]
    partial = dag_of(
        two_listeners,
        infra_grpc_route("a-grpc", "v1", 8080, hostnames=["foo.example.com"], parents=on_http),
        web,
    )
    # The HTTPRoute lost port 80 only: still accepted, served on 81, the loss reported.
    assert accepted(partial, "HTTPRoute", "b-web") == ("True", "Accepted")
    assert backend(partial, Request("foo.example.com", "/"), port=81) == "v2"
    assert backend(partial, Request("foo.example.com", "/"), port=80) == "404"
    assert [(p.object.name, p.reason) for p in partial.problems] == [("b-web", KIND_CONFLICT)]
