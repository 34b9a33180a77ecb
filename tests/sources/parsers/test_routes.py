"""HTTPRoute and GRPCRoute manifests to typed objects: matches, filters, timeouts, and the
CRD's validation (schema and CEL rules) with the field path of each problem."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from dragoman.objects import (
    BackendRef,
    GRPCMethodMatch,
    GRPCRoute,
    GRPCRouteMatch,
    HeaderMatch,
    HeaderModifier,
    HTTPHeader,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteTimeouts,
    PathMatch,
    PathModifier,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
    URLRewrite,
)
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from dragoman.sources.parsers.route_parts import duration_ms

HTTP_ROUTE = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\n"
GRPC_ROUTE = "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: g}\n"


def parsed(text: str) -> Any:
    return parse_object(yaml.safe_load(textwrap.dedent(text)))


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ObjectError) as caught:
        parsed(text)
    return caught.value.problems


def rule_of(spec_rule: str) -> Any:
    route = parsed(HTTP_ROUTE + f"spec: {{rules: [{spec_rule}]}}")
    assert isinstance(route, HTTPRoute)
    (rule,) = route.rules
    return rule


def test_matches_read_headers_query_params_and_method() -> None:
    rule = rule_of(
        "{matches: [{path: {type: RegularExpression, value: '/v[0-9]+'},"
        " headers: [{name: Version, value: one}, {name: x-re, type: RegularExpression,"
        " value: 'a.*'}], queryParams: [{name: animal, value: whale}], method: POST}]}"
    )
    assert rule.matches == (
        HTTPRouteMatch(
            path=PathMatch("RegularExpression", "/v[0-9]+"),
            headers=(
                HeaderMatch("Version", "one"),
                HeaderMatch("x-re", "a.*", "RegularExpression"),
            ),
            query_params=(HeaderMatch("animal", "whale"),),
            method="POST",
        ),
    )


def test_a_match_without_path_defaults_to_prefix_slash() -> None:
    rule = rule_of("{matches: [{headers: [{name: a, value: b}]}]}")
    assert rule.matches[0].path == PathMatch("PathPrefix", "/")


def test_every_filter_kind_is_read() -> None:
    rule = rule_of(
        """{matches: [{path: {type: PathPrefix, value: /api}}], filters: [
          {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: a, value: '1'}],
            add: [{name: b, value: '2'}], remove: [c]}},
          {type: ResponseHeaderModifier, responseHeaderModifier: {remove: [server]}},
          {type: URLRewrite, urlRewrite: {hostname: example.org,
            path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2}}},
          {type: RequestMirror, requestMirror: {backendRef: {name: shadow, port: 80},
            fraction: {numerator: 1, denominator: 4}}}],
          backendRefs: [{name: web, port: 80, filters: [{type: RequestHeaderModifier,
            requestHeaderModifier: {set: [{name: backend, value: web}]}}]}]}"""
    )
    assert rule.filters == (
        RouteFilter(
            "RequestHeaderModifier",
            request_header_modifier=HeaderModifier(
                set=(HTTPHeader("a", "1"),), add=(HTTPHeader("b", "2"),), remove=("c",)
            ),
        ),
        RouteFilter(
            "ResponseHeaderModifier", response_header_modifier=HeaderModifier(remove=("server",))
        ),
        RouteFilter(
            "URLRewrite",
            url_rewrite=URLRewrite("example.org", PathModifier("ReplacePrefixMatch", "/v2")),
        ),
        RouteFilter(
            "RequestMirror",
            request_mirror=RequestMirror(BackendRef("shadow", port=80), 1, 4),
        ),
    )
    (backend,) = rule.backend_refs
    assert backend.filters == (
        RouteFilter(
            "RequestHeaderModifier",
            request_header_modifier=HeaderModifier(set=(HTTPHeader("backend", "web"),)),
        ),
    )


def test_redirect_defaults_to_302_and_reads_every_field() -> None:
    plain = rule_of("{filters: [{type: RequestRedirect, requestRedirect: {}}]}")
    assert plain.filters[0].request_redirect == RequestRedirect()
    full = rule_of(
        "{matches: [{path: {value: /old}}], filters: [{type: RequestRedirect, requestRedirect:"
        " {scheme: https, hostname: example.org, port: 8443, statusCode: 301,"
        " path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]}"
    )
    assert full.filters[0].request_redirect == RequestRedirect(
        scheme="https",
        hostname="example.org",
        path=PathModifier("ReplacePrefixMatch", "/new"),
        port=8443,
        status_code=301,
    )


def test_mirror_percent_and_default_share() -> None:
    rule = rule_of(
        "{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: a, port: 1},"
        " percent: 20}}, {type: RequestMirror, requestMirror: {backendRef: {name: b, port: 1}}}],"
        " backendRefs: [{name: web, port: 80}]}"
    )
    mirrors = [f.request_mirror for f in rule.filters]
    assert [(m.numerator, m.denominator) for m in mirrors if m] == [(20, 100), (100, 100)]


@pytest.mark.parametrize(
    ("text", "ms"),
    [("500ms", 500), ("10s", 10_000), ("1h30m", 5_400_000), ("1m5s10ms", 65_010), ("0s", 0)],
)
def test_gateway_api_durations(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


def test_timeouts_are_read_in_milliseconds() -> None:
    rule = rule_of("{timeouts: {request: 10s, backendRequest: 500ms}}")
    assert rule.timeouts == HTTPRouteTimeouts(request_ms=10_000, backend_request_ms=500)
    assert rule_of("{}").timeouts == HTTPRouteTimeouts()


def test_retry_is_read_with_its_backoff_in_milliseconds() -> None:
    rule = rule_of("{retry: {codes: [500, 503, 429], attempts: 3, backoff: 1s100ms}}")
    assert rule.retry == HTTPRouteRetry(codes=(500, 503, 429), attempts=3, backoff_ms=1100)
    assert rule.experimental_fields == ()
    assert rule_of("{retry: {}}").retry == HTTPRouteRetry()
    assert rule_of("{}").retry is None
    # sessionPersistence is still kept by name only, to be reported as not served.
    assert rule_of("{sessionPersistence: {}}").experimental_fields == ("sessionPersistence",)


@pytest.mark.parametrize(
    ("retry", "field", "message"),
    [
        ("{attempts: -1}", "attempts", "expected an integer from 1 to 2147483647, got -1"),
        ("{attempts: 0}", "attempts", "expected an integer from 1 to 2147483647, got 0"),
        ("{attempts: '2'}", "attempts", "expected an integer from 1 to 2147483647"),
        ("{attempts: 2147483648}", "attempts", "expected an integer from 1 to 2147483647"),
        ("{backoff: 100}", "backoff", "expected a string"),
        ("{backoff: 1.5s}", "backoff", "a Gateway API duration"),
        ("{backoff: 100000s}", "backoff", "a Gateway API duration"),
        ("{codes: [503, 200]}", "codes[1]", "expected an integer from 400 to 599, got 200"),
        ("{codes: [600]}", "codes[0]", "expected an integer from 400 to 599, got 600"),
        ("{codes: ['503']}", "codes[0]", "expected an integer from 400 to 599"),
        ("{codes: [503, 503]}", "codes[1]", "duplicate value 503"),
        ("{codes: 503}", "codes", "expected a list"),
        ("[]", "", "expected a mapping"),
    ],
)
def test_bad_retry_values_are_refused_naming_the_field(
    retry: str, field: str, message: str
) -> None:
    found = problems_of(HTTP_ROUTE + f"spec: {{rules: [{{retry: {retry}}}]}}")
    path = "spec.rules[0].retry" + (f".{field}" if field else "")
    assert [f for f, _ in found] == [path], found
    assert message in found[0][1]


def test_grpc_route_reads_methods_headers_filters_and_weights() -> None:
    route = parsed(
        GRPC_ROUTE
        + """spec:
          parentRefs: [{name: gw}]
          hostnames: [grpc.example.com]
          rules:
          - name: echo
            matches:
            - method: {service: pkg.Echo, method: Say}
              headers: [{name: version, value: two}]
            - method: {type: RegularExpression, service: 'pkg\\..*'}
            filters:
            - type: ResponseHeaderModifier
              responseHeaderModifier: {add: [{name: x-served-by, value: dragoman}]}
            backendRefs:
            - {name: echo-v1, port: 50051, weight: 70}
            - {name: echo-v2, port: 50051, weight: 30}
          - backendRefs: [{name: fallback, port: 50051}]
        """
    )
    assert isinstance(route, GRPCRoute)
    first, second = route.rules
    assert first.name == "echo"
    assert first.matches == (
        GRPCRouteMatch(
            method=GRPCMethodMatch("Exact", "pkg.Echo", "Say"),
            headers=(HeaderMatch("version", "two"),),
        ),
        GRPCRouteMatch(method=GRPCMethodMatch("RegularExpression", "pkg\\..*", None)),
    )
    assert [(b.name, b.weight) for b in first.backend_refs] == [("echo-v1", 70), ("echo-v2", 30)]
    assert first.filters[0].type == "ResponseHeaderModifier"
    assert second.matches == ()  # matches every call


ERROR_CASES = [
    (
        "header-name-invalid",
        HTTP_ROUTE + "spec: {rules: [{matches: [{headers: [{name: 'a b', value: c}]}]}]}",
        "spec.rules[0].matches[0].headers[0].name",
    ),
    (
        "header-duplicate-name",
        HTTP_ROUTE
        + "spec: {rules: [{matches: [{headers: [{name: a, value: b}, {name: a, value: c}]}]}]}",
        "spec.rules[0].matches[0].headers[1].name",
    ),
    (
        "query-type-unknown",
        HTTP_ROUTE
        + "spec: {rules: [{matches: [{queryParams: [{name: a, value: b, type: Prefix}]}]}]}",
        "spec.rules[0].matches[0].queryParams[0].type",
    ),
    (
        "method-unknown",
        HTTP_ROUTE + "spec: {rules: [{matches: [{method: FETCH}]}]}",
        "spec.rules[0].matches[0].method",
    ),
    (
        "filter-type-unknown",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: Rewrite}]}]}",
        "spec.rules[0].filters[0].type",
    ),
    (
        "filter-config-missing",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestHeaderModifier}]}]}",
        "spec.rules[0].filters[0].requestHeaderModifier",
    ),
    (
        "filter-config-of-another-type",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect: {},"
        " urlRewrite: {}}]}]}",
        "spec.rules[0].filters[0].urlRewrite",
    ),
    (
        "filter-repeated",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: URLRewrite, urlRewrite: {}},"
        " {type: URLRewrite, urlRewrite: {}}]}]}",
        "spec.rules[0].filters",
    ),
    (
        "redirect-and-rewrite",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: URLRewrite, urlRewrite: {}},"
        " {type: RequestRedirect, requestRedirect: {}}]}]}",
        "spec.rules[0].filters",
    ),
    (
        "redirect-with-backends",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect: {}}],"
        " backendRefs: [{name: a, port: 80}]}]}",
        "spec.rules[0].filters",
    ),
    (
        "redirect-status-unknown",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect:"
        " {statusCode: 304}}]}]}",
        "spec.rules[0].filters[0].requestRedirect.statusCode",
    ),
    (
        "redirect-scheme-unknown",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect:"
        " {scheme: ftp}}]}]}",
        "spec.rules[0].filters[0].requestRedirect.scheme",
    ),
    (
        "redirect-wildcard-hostname",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect:"
        " {hostname: '*.example.com'}}]}]}",
        "spec.rules[0].filters[0].requestRedirect.hostname",
    ),
    (
        "path-modifier-value-missing",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: URLRewrite, urlRewrite:"
        " {path: {type: ReplaceFullPath}}}]}]}",
        "spec.rules[0].filters[0].urlRewrite.path.replaceFullPath",
    ),
    (
        "path-modifier-type-mismatch",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: URLRewrite, urlRewrite:"
        " {path: {type: ReplaceFullPath, replacePrefixMatch: /x}}}]}]}",
        "spec.rules[0].filters[0].urlRewrite.path.replaceFullPath",
    ),
    (
        "prefix-replacement-needs-one-prefix-match",
        HTTP_ROUTE + "spec: {rules: [{matches: [{path: {type: Exact, value: /a}}], filters:"
        " [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch,"
        " replacePrefixMatch: /b}}}]}]}",
        "spec.rules[0].matches",
    ),
    (
        "mirror-percent-and-fraction",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef:"
        " {name: a, port: 1}, percent: 5, fraction: {numerator: 1}}}]}]}",
        "spec.rules[0].filters[0].requestMirror",
    ),
    (
        "mirror-fraction-above-one",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef:"
        " {name: a, port: 1}, fraction: {numerator: 3, denominator: 2}}}]}]}",
        "spec.rules[0].filters[0].requestMirror.fraction",
    ),
    (
        "mirror-service-without-port",
        HTTP_ROUTE + "spec: {rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef:"
        " {name: a}}}]}]}",
        "spec.rules[0].filters[0].requestMirror.backendRef.port",
    ),
    (
        "timeout-format",
        HTTP_ROUTE + "spec: {rules: [{timeouts: {request: 1.5s}}]}",
        "spec.rules[0].timeouts.request",
    ),
    (
        "backend-timeout-longer-than-request",
        HTTP_ROUTE + "spec: {rules: [{timeouts: {request: 1s, backendRequest: 2s}}]}",
        "spec.rules[0].timeouts.backendRequest",
    ),
    (
        "rule-name-duplicate",
        HTTP_ROUTE + "spec: {rules: [{name: a}, {name: a}]}",
        "spec.rules[1].name",
    ),
    (
        "grpc-method-empty",
        GRPC_ROUTE + "spec: {rules: [{matches: [{method: {type: Exact}}]}]}",
        "spec.rules[0].matches[0].method",
    ),
    (
        "grpc-service-invalid",
        GRPC_ROUTE + "spec: {rules: [{matches: [{method: {service: 'a/b'}}]}]}",
        "spec.rules[0].matches[0].method.service",
    ),
    (
        "grpc-filter-not-for-grpc",
        GRPC_ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect, requestRedirect: {}}]}]}",
        "spec.rules[0].filters[0].type",
    ),
]


@pytest.mark.parametrize(
    ("manifest", "field"), [case[1:] for case in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_each_problem_names_its_field(manifest: str, field: str) -> None:
    fields = [f for f, _ in problems_of(manifest)]
    assert field in fields, problems_of(manifest)
