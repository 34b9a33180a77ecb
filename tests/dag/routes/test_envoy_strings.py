"""Strings Envoy would refuse (a header value with CR, LF or NUL, a response header named
`host`, a path with a line break) are refused with the filter that holds them: that rule
answers 500 and says why, and every other rule of the route table is served. Sent as they
were, Envoy refused the whole RouteConfiguration of the listener."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from dragoman.dag.model import Backend, Dag, DirectResponse, Forward, Route
from dragoman.dag.routes.envoy_strings import header_name_problem, header_value_problem
from tests.support.builders import http_route
from tests.support.routing_sim import Request, route_for
from tests.support.status_builds import build_text, status

OBJECTS = """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: dragoman}
spec: {controllerName: dragoman.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: shadow}
spec: {selector: {app: shadow}, ports: [{port: 80}]}
"""

GOOD_RULE = """
- matches: [{path: {value: /good}}]
  backendRefs: [{name: web, port: 80}]
"""


def dag_of(rules: str) -> Dag:
    """The DAG of OBJECTS and the HTTPRoute r (to the Gateway gw) with `rules`, YAML text."""
    return build_text(OBJECTS, http_route("r", rules=yaml.safe_load(textwrap.dedent(rules))))


def served(dag: Dag, path: str = "/") -> Route:
    route = route_for(dag, Request("any", path), 80)
    assert route is not None
    return route


def rule_with(filter_yaml: str) -> str:
    # A redirect answers itself: the CRD forbids backendRefs beside it.
    backends = "" if "RequestRedirect" in filter_yaml else "  backendRefs: [{name: web, port: 80}]"
    return f"""
- matches: [{{path: {{value: /bad}}}}]
  filters:
  - {filter_yaml}
{backends}
{GOOD_RULE}"""


def modifier(kind: str, body: str) -> str:
    field = "urlRewrite" if kind == "URLRewrite" else kind[0].lower() + kind[1:]
    return f"{{type: {kind}, {field}: {body}}}"


@pytest.mark.parametrize(
    ("filter_yaml", "field", "why"),
    [
        (
            modifier("RequestHeaderModifier", '{set: [{name: x-a, value: "a\\r\\nInjected: 1"}]}'),
            "spec.rules[0].filters[0].requestHeaderModifier.set[0].value",
            "contains CR",
        ),
        (
            modifier("RequestHeaderModifier", '{add: [{name: x-a, value: "a\\nb"}]}'),
            "spec.rules[0].filters[0].requestHeaderModifier.add[0].value",
            "contains LF",
        ),
        (
            modifier("ResponseHeaderModifier", '{set: [{name: x-a, value: "a\\0b"}]}'),
            "spec.rules[0].filters[0].responseHeaderModifier.set[0].value",
            "contains NUL",
        ),
        (
            modifier("ResponseHeaderModifier", "{set: [{name: Host, value: a}]}"),
            "spec.rules[0].filters[0].responseHeaderModifier.set[0].name",
            "Host header of a response",
        ),
        (
            modifier("ResponseHeaderModifier", "{remove: [host]}"),
            "spec.rules[0].filters[0].responseHeaderModifier.remove[0]",
            "Host header of a response",
        ),
        (
            modifier(
                "RequestRedirect",
                '{path: {type: ReplaceFullPath, replaceFullPath: "/a\\r\\nSet-Cookie: x"}}',
            ),
            "spec.rules[0].filters[0].requestRedirect.path.replaceFullPath",
            "contains CR",
        ),
        (
            modifier(
                "URLRewrite", '{path: {type: ReplacePrefixMatch, replacePrefixMatch: "/a\\0"}}'
            ),
            "spec.rules[0].filters[0].urlRewrite.path.replacePrefixMatch",
            "contains NUL",
        ),
    ],
)
def test_a_filter_envoy_would_refuse_fails_its_rule_only(
    filter_yaml: str, field: str, why: str
) -> None:
    dag = dag_of(rule_with(filter_yaml))

    assert served(dag, "/bad").action == DirectResponse(status=500)
    good = served(dag, "/good").action
    assert isinstance(good, Forward) and good.backends == (Backend("default/web/80", 1),)
    [problem] = dag.problems
    assert (problem.field, problem.reason) == (field, "UnsupportedValue")
    assert why in problem.message and "answer 500" in problem.message


def test_a_backend_filter_envoy_would_refuse_fails_that_backend_only() -> None:
    dag = dag_of(
        """
        - backendRefs:
          - name: web
            port: 80
            filters:
            - type: ResponseHeaderModifier
              responseHeaderModifier: {add: [{name: x-b, value: "b\\nc"}]}
          - {name: shadow, port: 80}
        """
    )
    action = served(dag).action
    assert isinstance(action, Forward)
    assert action.backends == (Backend(None, 1), Backend("default/shadow/80", 1))
    [problem] = dag.problems
    assert problem.field == (
        "spec.rules[0].backendRefs[0].filters[0].responseHeaderModifier.add[0].value"
    )
    assert "requests sent to this backend answer 500" in problem.message


def test_route_status_says_partially_invalid_and_stays_accepted() -> None:
    dag = build_text(
        """
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: dragoman}
spec: {controllerName: dragoman.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: g}
spec:
  parentRefs: [{name: gw}]
  rules:
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-a, value: "a\\r\\nb"}]}
    backendRefs: [{name: web, port: 80}]
"""
    )
    [parent] = status(dag, "GRPCRoute", "g")["parents"]
    conditions = {c["type"]: c for c in parent["conditions"]}
    assert conditions["Accepted"]["status"] == "True"
    assert conditions["PartiallyInvalid"]["status"] == "True"
    assert conditions["PartiallyInvalid"]["reason"] == "UnsupportedValue"
    assert "contains CR" in conditions["PartiallyInvalid"]["message"]


def test_envoy_string_rules() -> None:
    assert header_value_problem("any value, even é and \t tabs") is None
    assert header_value_problem("x" * 16384) is None
    assert "16385 bytes" in (header_value_problem("x" * 16385) or "")
    assert "16386 bytes" in (header_value_problem("é" * 8193) or "")
    assert header_name_problem("Host", editable_host=True) is None
    assert header_name_problem("x-ok", editable_host=False) is None
    assert "pseudo-header" in (header_name_problem(":path", editable_host=True) or "")
    assert header_name_problem("", editable_host=True) == "is empty"
