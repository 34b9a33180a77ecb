"""Route filters, redirects, timeouts and regex checks in the DAG: what a rule does, and the
Problem (reason and field path) for what it cannot do."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from dragoman.dag.model import (
    Backend,
    CorsPolicy,
    Dag,
    DirectResponse,
    Forward,
    HeaderEdits,
    Mirror,
    PathRewrite,
    Redirect,
    Retry,
    Route,
)
from dragoman.dag.node_groups.virtual_hosts import placed_redirect
from dragoman.dag.routes.actions import http_timeouts
from dragoman.objects import HTTPRouteTimeouts, ObjectKey
from tests.support.builders import http_route
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import build_text

GW = "gateway.networking.k8s.io/v1"
OBJECTS = f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: gw}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: http, port: 80, protocol: HTTP}}
  - {{name: alt, port: 8080, protocol: HTTP}}
---
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec: {{selector: {{app: web}}, ports: [{{port: 80}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: shadow}}
spec: {{selector: {{app: shadow}}, ports: [{{port: 80}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: api}}
spec: {{type: ExternalName, externalName: api.example.com, ports: [{{port: 443}}]}}
"""


def dag_of(rules: str) -> Dag:
    """The DAG of OBJECTS and the HTTPRoute r (to the Gateway gw) with `rules`, YAML text."""
    return build_text(OBJECTS, http_route("r", rules=yaml.safe_load(textwrap.dedent(rules))))


def served(dag: Dag, path: str = "/", port: int = 80) -> Route:
    route = route_for(dag, Request("any", path), port)
    assert route is not None
    return route


def problems(dag: Dag) -> list[tuple[str, str]]:
    return [(p.field, p.reason) for p in dag.problems]


def test_header_modifiers_rewrite_and_mirror() -> None:
    dag = dag_of(
        """
        - matches: [{path: {value: /api}}]
          filters:
          - type: RequestHeaderModifier
            requestHeaderModifier:
              set: [{name: X-Set, value: a}, {name: x-set, value: ignored}]
              add: [{name: X-Add, value: b}]
              remove: [X-Gone]
          - type: ResponseHeaderModifier
            responseHeaderModifier: {set: [{name: X-Served, value: dragoman}]}
          - type: URLRewrite
            urlRewrite: {hostname: internal.example, path: {type: ReplacePrefixMatch,
                         replacePrefixMatch: /v2}}
          - type: RequestMirror
            requestMirror: {backendRef: {name: shadow, port: 80}, percent: 25}
          - type: RequestMirror
            requestMirror: {backendRef: {name: api, port: 443}}
          backendRefs: [{name: web, port: 80}]
        """
    )
    route = served(dag, "/api/x")
    assert route.request_headers == HeaderEdits(
        set=(("X-Set", "a"),), add=(("X-Add", "b"),), remove=("X-Gone",)
    )
    assert route.response_headers == HeaderEdits(set=(("X-Served", "dragoman"),))
    assert route.action == Forward(
        backends=(Backend("default/web/80", 1),),
        host_rewrite="internal.example",
        path_rewrite=PathRewrite("ReplacePrefixMatch", "/v2", prefix="/api"),
        mirrors=(
            Mirror("default/shadow/80", 25, 100),
            # A mirror to an ExternalName is a request of its own: its Host is the name.
            Mirror("default/api/443", host_rewrite="api.example.com"),
        ),
    )
    # Mirror clusters are served too.
    assert {"default/shadow/80", "default/api/443"} <= set(dag.clusters)
    assert dag.problems == ()


def test_setting_host_with_a_header_modifier_rewrites_host() -> None:
    dag = dag_of(
        """
        - filters:
          - type: RequestHeaderModifier
            requestHeaderModifier: {set: [{name: Host, value: other.example}], remove: [host]}
          backendRefs: [{name: web, port: 80}]
        """
    )
    route = served(dag)
    assert isinstance(route.action, Forward)
    assert route.action.host_rewrite == "other.example"
    assert route.request_headers == HeaderEdits()
    assert problems(dag) == [
        ("spec.rules[0].filters[0].requestHeaderModifier.remove", "UnsupportedValue")
    ]


def test_a_redirect_needs_no_backend() -> None:
    dag = dag_of(
        """
        - matches: [{path: {value: /old}}]
          filters:
          - type: RequestRedirect
            requestRedirect: {statusCode: 301, path: {type: ReplacePrefixMatch,
                              replacePrefixMatch: /new}}
        """
    )
    assert served(dag, "/old/page").action == Redirect(
        301, path=PathRewrite("ReplacePrefixMatch", "/new", prefix="/old")
    )
    assert dag.problems == ()


@pytest.mark.parametrize(
    ("redirect", "listener_port", "location_port"),
    [
        # No scheme, no port: the listener's port, left out when it is the scheme's default.
        (Redirect(hostname="example.org"), 80, None),
        (Redirect(hostname="example.org"), 8080, 8080),
        (Redirect(), 8080, 8080),
        (Redirect(), 80, None),
        (Redirect(hostname="example.org", port=80), 8080, None),
        (Redirect(hostname="example.org", port=8080), 80, 8080),
        # A scheme without a port: that scheme's well-known port.
        (Redirect(scheme="https", hostname="example.org"), 8080, None),
        (Redirect(scheme="https", hostname="example.org", port=443), 80, None),
        (Redirect(scheme="https", hostname="example.org", port=8443), 80, 8443),
        # The request's own host, whatever port the listener has: the scheme's default
        # port is left out of Location (Envoy strips the request's port from Host).
        (Redirect(scheme="https"), 8080, None),
        (Redirect(scheme="https"), 80, None),
        (Redirect(scheme="http"), 8443, None),
        (Redirect(scheme="https", port=8443), 80, 8443),
    ],
)
def test_redirect_ports_follow_the_gateway_api(
    redirect: Redirect, listener_port: int, location_port: int | None
) -> None:
    assert placed_redirect(redirect, listener_port, "http").location_port == location_port


def test_redirects_are_placed_per_listener_port() -> None:
    dag = dag_of(
        """
        - filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
        """
    )
    for port, location_port in ((80, None), (8080, 8080)):
        action = served(dag, "/", port).action
        assert isinstance(action, Redirect) and action.location_port == location_port


def test_unsupported_filters_make_the_rule_answer_500() -> None:
    dag = dag_of(
        """
        - matches: [{path: {value: /ext}}]
          filters: [{type: ExtensionRef, extensionRef: {group: x.io, kind: Auth, name: a}}]
          backendRefs: [{name: web, port: 80}]
        """
    )
    assert served(dag, "/ext").action == DirectResponse(500)
    assert problems(dag) == [("spec.rules[0].filters[0].type", "UnsupportedValue")]


def test_a_cors_filter_gives_the_route_its_policy_and_forwards() -> None:
    dag = dag_of(
        """
        - matches: [{path: {value: /cors}}]
          filters:
          - type: CORS
            cors:
              allowOrigins: ["https://www.foo.com", "https://*.bar.com"]
              allowMethods: [GET, OPTIONS]
              allowHeaders: [x-header-1]
              exposeHeaders: [x-header-3]
              maxAge: 3600
              allowCredentials: true
          backendRefs: [{name: web, port: 80}]
        - matches: [{path: {value: /plain}}]
          backendRefs: [{name: web, port: 80}]
        """
    )
    route = served(dag, "/cors")
    assert isinstance(route.action, Forward)
    assert route.cors == CorsPolicy(
        allow_origins=("https://www.foo.com", "https://*.bar.com"),
        allow_methods=("GET", "OPTIONS"),
        allow_headers=("x-header-1",),
        expose_headers=("x-header-3",),
        max_age_s=3600,
        allow_credentials=True,
    )
    assert served(dag, "/plain").cors is None
    assert problems(dag) == []


def test_experimental_session_persistence_is_reported_and_the_rule_served_without_it() -> None:
    """sessionPersistence is in the experimental CRDs only: not silently dropped."""
    dag = dag_of(
        """
        - matches: [{path: {value: /sticky}}]
          sessionPersistence: {sessionName: s, type: Cookie}
          backendRefs: [{name: web, port: 80}]
        """
    )
    assert isinstance(served(dag, "/sticky").action, Forward)
    assert problems(dag) == [("spec.rules[0].sessionPersistence", "UnsupportedValue")]
    [entry] = dag.statuses[ObjectKey("HTTPRoute", "default", "r")].status["parents"]
    partial = next(c for c in entry["conditions"] if c["type"] == "PartiallyInvalid")
    assert partial["status"] == "True"
    message = partial["message"]
    assert "sessionPersistence is an experimental Gateway API field" in message
    assert "requests are not kept on one backend" in message


def test_a_rule_retry_reaches_its_action() -> None:
    dag = dag_of(
        """
        - matches: [{path: {value: /retry}}]
          retry: {codes: [500, 503], attempts: 3, backoff: 100ms}
          backendRefs: [{name: web, port: 80}]
        - matches: [{path: {value: /defaults}}]
          retry: {}
          backendRefs: [{name: api, port: 443}]
        - matches: [{path: {value: /plain}}]
          backendRefs: [{name: web, port: 80}]
        """
    )
    retried, defaults, plain = (served(dag, p).action for p in ("/retry", "/defaults", "/plain"))
    assert isinstance(retried, Forward) and isinstance(defaults, Forward)
    assert isinstance(plain, Forward)
    assert retried.retry == Retry(attempts=3, codes=(500, 503), backoff_ms=100)
    # attempts unset: one retry; codes unset: connection errors only; backoff: Envoy's.
    assert defaults.retry == Retry(attempts=1)
    assert plain.retry is None
    assert problems(dag) == []
    [entry] = dag.statuses[ObjectKey("HTTPRoute", "default", "r")].status["parents"]
    assert all(c["type"] != "PartiallyInvalid" for c in entry["conditions"])


def test_a_zero_backoff_is_served_as_envoys_shortest() -> None:
    """Envoy refuses a zero base interval; it waits a random time up to 1 ms, which is what
    `0s` asks for (no minimum wait)."""
    dag = dag_of(
        """
        - retry: {attempts: 2, backoff: 0s}
          backendRefs: [{name: web, port: 80}]
        """
    )
    action = served(dag).action
    assert isinstance(action, Forward)
    assert action.retry == Retry(attempts=2, backoff_ms=1)
    assert problems(dag) == []


def test_retry_with_timeouts() -> None:
    """backendRequest bounds each attempt; with no request timeout the attempts bound the
    exchange (no route timeout), and with one it bounds them all."""
    dag = dag_of(
        """
        - matches: [{path: {value: /backend}}]
          retry: {attempts: 2}
          timeouts: {backendRequest: 200ms}
          backendRefs: [{name: web, port: 80}]
        - matches: [{path: {value: /both}}]
          retry: {codes: [500], attempts: 5}
          timeouts: {backendRequest: 200ms, request: 400ms}
          backendRefs: [{name: web, port: 80}]
        """
    )
    backend, both = served(dag, "/backend").action, served(dag, "/both").action
    assert isinstance(backend, Forward) and isinstance(both, Forward)
    assert (backend.timeout_ms, backend.per_try_timeout_ms) == (0, 200)
    assert (both.timeout_ms, both.per_try_timeout_ms) == (400, 200)


def test_backend_filters_apply_to_their_backend_only() -> None:
    dag = dag_of(
        """
        - backendRefs:
          - name: web
            port: 80
            weight: 10
            filters: [{type: RequestHeaderModifier,
                       requestHeaderModifier: {set: [{name: backend, value: web}]}}]
          - name: shadow
            port: 80
            weight: 10
            filters:
            - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: b, value: s}]}}
            - {type: URLRewrite, urlRewrite: {hostname: shadow.internal}}
          - name: web
            port: 80
            filters: [{type: RequestMirror, requestMirror: {backendRef: {name: shadow, port: 80}}}]
        """
    )
    action = served(dag).action
    assert isinstance(action, Forward)
    assert action.backends == (
        Backend("default/web/80", 10, request_headers=HeaderEdits(set=(("backend", "web"),))),
        Backend(
            "default/shadow/80",
            10,
            response_headers=HeaderEdits(add=(("b", "s"),)),
            host_rewrite="shadow.internal",
        ),
        # A mirror cannot be applied to one weighted backend: that share answers 500.
        Backend(None, 1),
    )
    assert problems(dag) == [("spec.rules[0].backendRefs[2].filters[0].type", "UnsupportedValue")]


def test_invalid_mirror_is_dropped_and_reported() -> None:
    dag = dag_of(
        """
        - filters: [{type: RequestMirror, requestMirror: {backendRef: {name: nowhere, port: 80}}}]
          backendRefs: [{name: web, port: 80}]
        """
    )
    action = served(dag).action
    assert isinstance(action, Forward) and action.mirrors == ()
    assert problems(dag) == [
        ("spec.rules[0].filters[0].requestMirror.backendRef", "BackendNotFound")
    ]


def test_invalid_regexes_are_reported_and_their_match_skipped() -> None:
    dag = dag_of(
        """
        - matches:
          - path: {type: RegularExpression, value: '/(?=lookahead)'}
          - headers: [{name: x, type: RegularExpression, value: '(a'}]
          - queryParams: [{name: q, type: RegularExpression, value: '(a|b|c|d){60}'}]
          - path: {value: /fine}
          backendRefs: [{name: web, port: 80}]
        """
    )
    assert problems(dag) == [
        ("spec.rules[0].matches[0].path.value", "UnsupportedValue"),
        ("spec.rules[0].matches[1].headers[0].value", "UnsupportedValue"),
        ("spec.rules[0].matches[2].queryParams[0].value", "UnsupportedValue"),
    ]
    assert route_for(dag, Request("any", "/fine")) is not None
    assert route_for(dag, Request("any", "/lookahead")) is None


@pytest.mark.parametrize(
    ("request_ms", "backend_ms", "route_ms", "per_try_ms"),
    [
        (None, None, None, None),  # Envoy's 15 s default
        (500, None, 500, None),
        (0, None, 0, None),  # no timeout at all
        (None, 500, 500, None),  # one attempt: the backend timeout bounds the exchange
        (None, 0, 0, None),
        (10_000, 500, 10_000, 500),
        (10_000, 10_000, 10_000, None),
        (0, 500, 0, 500),
        (10_000, 0, 10_000, None),
    ],
)
def test_timeouts(
    request_ms: int | None, backend_ms: int | None, route_ms: int | None, per_try_ms: int | None
) -> None:
    assert http_timeouts(HTTPRouteTimeouts(request_ms, backend_ms)) == (route_ms, per_try_ms)


@pytest.mark.parametrize(
    ("request_ms", "backend_ms", "route_ms", "per_try_ms"),
    [
        (None, None, None, None),
        (None, 500, 0, 500),  # each attempt bounded: the attempts bound the exchange
        (None, 0, 0, None),
        (10_000, 500, 10_000, 500),
        (10_000, 10_000, 10_000, None),
        (0, 500, 0, 500),
    ],
)
def test_timeouts_with_retries(
    request_ms: int | None, backend_ms: int | None, route_ms: int | None, per_try_ms: int | None
) -> None:
    timeouts = HTTPRouteTimeouts(request_ms, backend_ms)
    assert http_timeouts(timeouts, retries=True) == (route_ms, per_try_ms)


def test_rule_timeouts_reach_the_action() -> None:
    dag = dag_of(
        """
        - timeouts: {request: 2s, backendRequest: 500ms}
          backendRefs: [{name: web, port: 80}]
        """
    )
    action = served(dag).action
    assert isinstance(action, Forward)
    assert (action.timeout_ms, action.per_try_timeout_ms) == (2000, 500)
