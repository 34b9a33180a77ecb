"""Gateway API conformance scenarios for HTTPRoute and GRPCRoute routing, as unit tests.

Each test builds the DAG from manifests shaped like the upstream conformance suite's (written
here, not copied), then asks tests/support/routing_sim.py which route Envoy would pick for each
request the upstream test sends, and checks the backend the upstream test expects.
"""

from __future__ import annotations

import textwrap

import pytest
import yaml

from dragoman.dag.build import build
from dragoman.dag.frontends.kind_conflicts import KIND_CONFLICT
from dragoman.dag.model import Dag, DirectResponse, Forward, Redirect, Route
from dragoman.objects import KubeObject
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from tests.support.dag_invariants import checked
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import condition, parents

NS = "infra"
GW = "gateway.networking.k8s.io/v1"

BACKENDS = "".join(
    f"""
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {NS}}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: http, port: 8080}}, {{name: grpc, port: 9000, appProtocol: kubernetes.io/h2c}}]
"""
    for name in ("v1", "v2", "v3")
)
ONE_LISTENER = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: gw, namespace: {NS}}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
"""


def dag_of(manifests: str) -> Dag:
    objects: list[KubeObject] = []
    for document in yaml.safe_load_all(textwrap.dedent(manifests) + BACKENDS):
        if document:
            parsed = parse_object(document)
            assert parsed is not None
            objects.append(parsed)
    return checked(build(Store.from_objects(objects)))


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


def http_route(name: str, body: str, gateway: str = "gw") -> str:
    spec = textwrap.indent(textwrap.dedent(body).strip(), "  ")
    return f"""
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parentRefs: [{{name: {gateway}}}]
{spec}
"""


def expect(dag: Dag, cases: list[tuple[Request, str]], port: int = 80) -> None:
    got = [(request, backend(dag, request, port)) for request in cases_requests(cases)]
    assert got == cases


def cases_requests(cases: list[tuple[Request, str]]) -> list[Request]:
    return [request for request, _ in cases]


def test_matching_across_routes() -> None:
    dag = dag_of(
        ONE_LISTENER
        + http_route(
            "part1",
            """
            hostnames: [example.com, example.net]
            rules:
            - matches:
              - path: {type: PathPrefix, value: /}
              - headers: [{name: version, value: one}]
              backendRefs: [{name: v1, port: 8080}]
            """,
        )
        + http_route(
            "part2",
            """
            hostnames: [example.com]
            rules:
            - matches:
              - path: {type: PathPrefix, value: /v2}
              - headers: [{name: version, value: two}]
              backendRefs: [{name: v2, port: 8080}]
            """,
        )
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
    dag = dag_of(
        ONE_LISTENER
        + http_route(
            "headers",
            """
            rules:
            - matches: [{headers: [{name: version, value: one}]}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{headers: [{name: version, value: two}]}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{headers: [{name: version, value: two}, {name: color, value: orange}]}]
              backendRefs: [{name: v1, port: 8080}]
            - matches:
              - headers: [{name: color, value: blue}]
              - headers: [{name: color, value: green}]
              backendRefs: [{name: v1, port: 8080}]
            - matches:
              - headers: [{name: color, value: red}]
              - headers: [{name: color, value: yellow}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{headers: [{name: x-build, type: RegularExpression, value: '[0-9]+'}]}]
              backendRefs: [{name: v3, port: 8080}]
            """,
        )
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
    dag = dag_of(
        ONE_LISTENER
        + http_route(
            "queries",
            """
            rules:
            - matches: [{queryParams: [{name: animal, value: whale}]}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{queryParams: [{name: animal, value: dolphin}]}]
              backendRefs: [{name: v2, port: 8080}]
            - matches:
              - queryParams: [{name: animal, value: dolphin}, {name: color, value: blue}]
              - queryParams: [{name: ANIMAL, value: Whale}]
              backendRefs: [{name: v3, port: 8080}]
            - matches: [{path: {value: /path1}, queryParams: [{name: animal, value: whale}]}]
              backendRefs: [{name: v1, port: 8080}]
            - matches:
              - headers: [{name: version, value: one}]
                queryParams: [{name: animal, value: whale}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {value: /path5}}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{queryParams: [{name: animal, value: hydra}]}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{headers: [{name: version, value: four}]}]
              backendRefs: [{name: v3, port: 8080}]
            """,
        )
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
        ONE_LISTENER
        + http_route(
            "methods",
            """
            rules:
            - matches: [{method: POST}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{method: GET}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {value: /path1}, method: GET}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{headers: [{name: version, value: one}], method: PUT}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {value: /path5}}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{method: PATCH}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{headers: [{name: version, value: four}]}]
              backendRefs: [{name: v3, port: 8080}]
            """,
        )
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
        ONE_LISTENER
        + http_route(
            "order",
            """
            rules:
            - matches: [{path: {type: Exact, value: /match}}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{path: {type: Exact, value: /match/exact}}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {type: Exact, value: /match/exact/one}}]
              backendRefs: [{name: v3, port: 8080}]
            - matches: [{path: {value: /match/}}]
              backendRefs: [{name: v3, port: 8080}]
            - matches: [{path: {value: /match/prefix/}}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{path: {value: /match/prefix/one}}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {type: RegularExpression, value: '/match/re/[0-9]+'}}]
              backendRefs: [{name: v1, port: 8080}]
            """,
        )
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


THREE_LISTENERS = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: gw, namespace: {NS}}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: listener-1, port: 80, protocol: HTTP, hostname: very.specific.com}}
  - {{name: listener-2, port: 80, protocol: HTTP, hostname: "*.wildcard.io"}}
  - {{name: listener-3, port: 80, protocol: HTTP, hostname: "*.anotherwildcard.io"}}
"""


def test_hostname_intersection() -> None:
    dag = dag_of(
        THREE_LISTENERS
        + http_route(
            "s1",
            """
            hostnames: [non.matching.com, "*.nonmatchingwildcard.io", very.specific.com]
            rules: [{matches: [{path: {value: /s1}}], backendRefs: [{name: v1, port: 8080}]}]
            """,
        )
        + http_route(
            "s2",
            """
            hostnames: [non.matching.com, wildcard.io, foo.wildcard.io, bar.wildcard.io,
                        foo.bar.wildcard.io]
            rules: [{matches: [{path: {value: /s2}}], backendRefs: [{name: v2, port: 8080}]}]
            """,
        )
        + http_route(
            "s3",
            """
            hostnames: [non.matching.com, "*.specific.com"]
            rules: [{matches: [{path: {value: /s3}}], backendRefs: [{name: v3, port: 8080}]}]
            """,
        )
        + http_route(
            "s4",
            """
            hostnames: ["*.anotherwildcard.io"]
            rules: [{matches: [{path: {value: /s4}}], backendRefs: [{name: v1, port: 8080}]}]
            """,
        )
        + http_route(
            "s5",
            """
            hostnames: [specific.but.wrong.com, wildcard.io]
            rules: [{matches: [{path: {value: /s5}}], backendRefs: [{name: v2, port: 8080}]}]
            """,
        )
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
    gateway = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: gw, namespace: {NS}}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: listener-1, port: 80, protocol: HTTP, hostname: bar.com}}
  - {{name: listener-2, port: 80, protocol: HTTP, hostname: foo.bar.com}}
  - {{name: listener-3, port: 80, protocol: HTTP, hostname: "*.bar.com"}}
  - {{name: listener-4, port: 80, protocol: HTTP, hostname: "*.foo.com"}}
"""
    routes = "".join(
        f"""
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parentRefs: [{", ".join(f"{{name: gw, sectionName: {s}}}" for s in sections)}]
  rules: [{{backendRefs: [{{name: {name}, port: 8080}}]}}]
"""
        for name, sections in (
            ("v1", ["listener-1"]),
            ("v2", ["listener-2"]),
            ("v3", ["listener-3", "listener-4"]),
        )
    )
    dag = dag_of(gateway + routes)
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


ISOLATION_GATEWAY = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: gw, namespace: {NS}}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: empty-hostname, port: 80, protocol: HTTP}}
  - {{name: wildcard-example-com, port: 80, protocol: HTTP, hostname: "*.example.com"}}
  - {{name: wildcard-foo-example-com, port: 80, protocol: HTTP, hostname: "*.foo.example.com"}}
  - {{name: abc-foo-example-com, port: 80, protocol: HTTP, hostname: abc.foo.example.com}}
"""
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
        '  hostnames: [bar.com, "*.example.com", "*.foo.example.com", abc.foo.example.com]\n'
        if with_route_hostnames
        else ""
    )
    routes = "".join(
        f"""
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: {section}, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw, sectionName: {section}}}]
{hostnames}  rules:
  - matches: [{{path: {{value: /{section}}}}}]
    backendRefs: [{{name: v1, port: 8080}}]
"""
        for section in (
            "empty-hostname",
            "wildcard-example-com",
            "wildcard-foo-example-com",
            "abc-foo-example-com",
        )
    )
    expect(dag_of(ISOLATION_GATEWAY + routes), ISOLATION_CASES)


def test_wildcard_route_serves_hosts_that_also_have_exact_routes() -> None:
    dag = dag_of(
        ONE_LISTENER
        + http_route(
            "wild",
            """
            hostnames: ["*.example.com"]
            rules:
            - matches: [{path: {value: /a}}]
              backendRefs: [{name: v1, port: 8080}]
            - matches: [{path: {value: /shared}}]
              backendRefs: [{name: v1, port: 8080}]
            """,
        )
        + http_route(
            "exact",
            """
            hostnames: [foo.example.com]
            rules:
            - matches: [{path: {value: /b}}]
              backendRefs: [{name: v2, port: 8080}]
            - matches: [{path: {value: /shared}}]
              backendRefs: [{name: v2, port: 8080}]
            """,
        )
        + http_route(
            "any",
            """
            rules:
            - matches: [{path: {type: Exact, value: /shared}}]
              backendRefs: [{name: v3, port: 8080}]
            """,
        )
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
    def timestamped(name: str, created: str, target: str) -> str:
        return f"""
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}, creationTimestamp: "{created}"}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{matches: [{{path: {{value: /x}}}}], backendRefs: [{{name: {target}, port: 8080}}]}}]
"""

    dag = dag_of(
        ONE_LISTENER
        + timestamped("a-new", "2024-02-01T00:00:00Z", "v1")
        + timestamped("b-old", "2024-01-01T00:00:00Z", "v2")
    )
    assert backend(dag, Request("any", "/x")) == "v2"


GRPC_ROUTES = f"""
---
apiVersion: {GW}
kind: GRPCRoute
metadata: {{name: exact, namespace: {NS}}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{method: {{service: pkg.Echo, method: Echo}}}}]
    backendRefs: [{{name: v1, port: 8080}}]
  - matches: [{{method: {{service: pkg.Echo, method: EchoTwo}}}}]
    backendRefs: [{{name: v2, port: 8080}}]
  - matches: [{{method: {{service: pkg.Echo}}, headers: [{{name: version, value: two}}]}}]
    backendRefs: [{{name: v3, port: 8080}}]
  - matches: [{{method: {{type: RegularExpression, service: 'pkg\\.Other.*', method: 'Get.*'}}}}]
    backendRefs: [{{name: v3, port: 8080}}]
  - matches: [{{method: {{method: Anything}}}}]
    backendRefs: [{{name: v2, port: 8080}}]
"""


def test_grpc_method_and_header_matching() -> None:
    dag = dag_of(ONE_LISTENER + GRPC_ROUTES)
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
        ONE_LISTENER
        + GRPC_ROUTES
        + "---\n"
        + ONE_LISTENER.replace("name: gw,", "name: web-gw,").replace("port: 80", "port: 81")
        + http_route(
            "web",
            """
            rules:
            - matches: [{path: {value: /web}}]
              backendRefs: [{name: v1, port: 8080}]
            - backendRefs: [{name: v2, port: 9000}]
            """,
            gateway="web-gw",
        )
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
    dag = dag_of(
        ONE_LISTENER
        + http_route(
            "weights",
            """
            rules:
            - backendRefs:
              - {name: v1, port: 8080, weight: 70}
              - {name: v2, port: 8080, weight: 30}
              - {name: v3, port: 8080, weight: 0}
            """,
        )
    )
    route = route_for(dag, Request("any"))
    assert route is not None and isinstance(route.action, Forward)
    assert [(b.cluster, b.weight) for b in route.action.backends] == [
        ("infra/v1/8080", 70),
        ("infra/v2/8080", 30),
    ]


def grpc_route(name: str, hostnames: str, target: str, created: str = "") -> str:
    return f"""
---
apiVersion: {GW}
kind: GRPCRoute
metadata: {{name: {name}, namespace: {NS}, creationTimestamp: "{created}"}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: {hostnames}
  rules: [{{backendRefs: [{{name: {target}, port: 8080}}]}}]
"""


def test_grpc_route_hostname_precedence_beats_age() -> None:
    dag = dag_of(
        ONE_LISTENER
        + grpc_route("wildcard-older", '["*.example.com"]', "v1", "2024-01-01T00:00:00Z")
        + grpc_route("exact-newer", "[abc.example.com]", "v2", "2024-02-01T00:00:00Z")
        + grpc_route(
            "deeper-wildcard-newer", '["*.deep.example.com"]', "v3", "2024-03-01T00:00:00Z"
        )
    )
    expect(
        dag,
        [
            (Request("abc.example.com", "/pkg.S/M", grpc=True), "v2"),
            (Request("x.deep.example.com", "/pkg.S/M", grpc=True), "v3"),
            (Request("other.example.com", "/pkg.S/M", grpc=True), "v1"),
        ],
    )


def timestamped_http_route(name: str, hostnames: str, target: str, created: str = "") -> str:
    return f"""
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}, creationTimestamp: "{created}"}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: {hostnames}
  rules: [{{backendRefs: [{{name: {target}, port: 8080}}]}}]
"""


def accepted(dag: Dag, kind: str, name: str) -> tuple[str, str]:
    [entry] = parents(dag, name, NS, kind)
    return condition(entry["conditions"], "Accepted")


def test_of_an_http_and_a_grpc_route_sharing_hostnames_on_a_listener_the_older_is_accepted() -> (
    None
):
    older_http = dag_of(
        ONE_LISTENER
        + grpc_route("grpc", '["*.example.com"]', "v1", "2025-01-01T00:00:00Z")
        + timestamped_http_route("web", "[foo.example.com]", "v2", "2024-01-01T00:00:00Z")
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
        ONE_LISTENER
        + grpc_route("a-grpc", "[foo.example.com]", "v1")
        + timestamped_http_route("b-web", '["*.example.com"]', "v2")
    )
    assert accepted(tie, "GRPCRoute", "a-grpc") == ("True", "Accepted")
    assert accepted(tie, "HTTPRoute", "b-web") == ("False", KIND_CONFLICT)
    # A route without hostnames takes every host: it intersects any other.
    anywhere = dag_of(
        ONE_LISTENER
        + grpc_route("a-grpc", "[]", "v1")
        + timestamped_http_route("b", "[x.org]", "v2")
    )
    assert accepted(anywhere, "HTTPRoute", "b") == ("False", KIND_CONFLICT)


def test_http_and_grpc_routes_with_disjoint_hostnames_share_a_listener() -> None:
    dag = dag_of(
        ONE_LISTENER
        + grpc_route("grpc", '["*.grpc.example.com"]', "v1")
        + timestamped_http_route("web", '["www.example.com", "*.web.example.com"]', "v2")
        + timestamped_http_route("more-web", '["example.com"]', "v3")
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
    two_listeners = ONE_LISTENER.replace(
        "listeners: [{name: http, port: 80, protocol: HTTP}]",
        "listeners: [{name: http, port: 80, protocol: HTTP},"
        " {name: alt, port: 81, protocol: HTTP}]",
    )
    dag = dag_of(
        two_listeners
        + grpc_route("a-grpc", "[foo.example.com]", "v1")
        + timestamped_http_route("b-web", "[foo.example.com]", "v2")
    )
    # The GRPCRoute won both listeners: the HTTPRoute is left with none.
    assert accepted(dag, "HTTPRoute", "b-web") == ("False", KIND_CONFLICT)
    assert backend(dag, Request("foo.example.com", "/"), port=81) == "404"
    partial = dag_of(
        two_listeners
        + grpc_route("a-grpc", "[foo.example.com]", "v1").replace(
            "parentRefs: [{name: gw}]", "parentRefs: [{name: gw, sectionName: http}]"
        )
        + timestamped_http_route("b-web", "[foo.example.com]", "v2")
    )
    # The HTTPRoute lost port 80 only: still accepted, served on 81, the loss reported.
    assert accepted(partial, "HTTPRoute", "b-web") == ("True", "Accepted")
    assert backend(partial, Request("foo.example.com", "/"), port=81) == "v2"
    assert backend(partial, Request("foo.example.com", "/"), port=80) == "404"
    assert [(p.object.name, p.reason) for p in partial.problems] == [("b-web", KIND_CONFLICT)]
