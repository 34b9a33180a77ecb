"""HTTPRoute (gateway.networking.k8s.io/v1) from a decoded manifest.

Validation and defaults follow the HTTPRoute CRD (OpenAPI schema and CEL rules), so what
`kubectl apply` would reject is rejected here with the same field path. Values the CRD
accepts but dragoman cannot serve (an invalid RE2 regex, a CORS filter) are the DAG's to
report, as they would be for an object read from a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.objects import (
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteRule,
    HTTPRouteTimeouts,
    ObjectMeta,
    PathMatch,
    RouteFilter,
)
from dragoman.objects.gateway import PATH_MATCH_TYPES
from dragoman.sources.fields import Node, describe, integer_range, is_integer
from dragoman.sources.formats import DNS1123_SUBDOMAIN, HOSTNAME, http_path_problem
from dragoman.sources.parsers.route_parts import (
    DURATION,
    HTTP_FILTER_TYPES,
    backend_ref,
    duration_ms,
    header_matches,
    parent_refs,
    route_filters,
    rule_names,
)

HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
MAX_MATCHES_PER_ROUTE = 128
# Rule fields of the Gateway API's experimental channel dragoman does not serve, kept by
# name only (the DAG reports them as not served); the standard CRD does not have them.
EXPERIMENTAL_RULE_FIELDS = ("sessionPersistence",)
# The status codes the experimental CRD lets `retry.codes` name.
RETRY_CODES = (400, 599)
# The CRD sets no upper bound on `retry.attempts`; Envoy's counter is 32 bits.
MAX_RETRY_ATTEMPTS = 2**31 - 1
# What most rules hold, made once and shared (the objects are immutable): the default match
# (PathPrefix "/") and no timeouts.
DEFAULT_MATCHES: tuple[HTTPRouteMatch, ...] = (HTTPRouteMatch(),)
NO_TIMEOUTS = HTTPRouteTimeouts()


def parse_http_route(root: Node, meta: ObjectMeta) -> HTTPRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return HTTPRoute(meta=meta)
    parents = parent_refs(spec)
    hostnames = spec.strings("hostnames", format=HOSTNAME, max_items=16, unique=True)
    rule_nodes = spec.mappings("rules", min_items=1, max_items=16)
    # The CRD defaults absent rules to one rule matching every path, with no backends.
    rules = (HTTPRouteRule(),) if rule_nodes is None else tuple(_rule(n) for n in rule_nodes)
    if sum(len(rule.matches) for rule in rules) > MAX_MATCHES_PER_ROUTE:
        spec.report(spec.at("rules"), f"must have at most {MAX_MATCHES_PER_ROUTE} matches in total")
    if rule_nodes:
        rule_names(rule_nodes, [rule.name for rule in rules])
    return HTTPRoute(meta=meta, parent_refs=parents, hostnames=hostnames, rules=rules)


def _rule(node: Node) -> HTTPRouteRule:
    match_nodes = node.mappings("matches", max_items=64)
    # Absent matches default to one PathPrefix "/" match; the spec reads an empty list the same.
    matches = tuple(_match(m) for m in match_nodes) if match_nodes else DEFAULT_MATCHES
    filters = route_filters(node, HTTP_FILTER_TYPES)
    backend_nodes = node.mappings("backendRefs", max_items=16) or []
    backends = tuple(backend_ref(b, HTTP_FILTER_TYPES) for b in backend_nodes)
    rule = HTTPRouteRule(
        matches=matches,
        backend_refs=backends,
        filters=filters,
        timeouts=_timeouts(node),
        name=node.optional_string("name", format=DNS1123_SUBDOMAIN),
        retry=_retry(node),
        experimental_fields=tuple(key for key in EXPERIMENTAL_RULE_FIELDS if node.has(key)),
    )
    _check_rule(node, rule)
    return rule


def _check_rule(node: Node, rule: HTTPRouteRule) -> None:
    """The CRD's CEL rules that tie a rule's filters to its matches and backends."""
    if rule.backend_refs and any(f.type == "RequestRedirect" for f in rule.filters):
        node.report(
            node.at("filters"),
            "a RequestRedirect filter must not be used together with backendRefs",
        )
    single_prefix = len(rule.matches) == 1 and rule.matches[0].path.type == "PathPrefix"
    if single_prefix:
        return
    for where, filters in [
        ("filters", rule.filters),
        *((f"backendRefs[{i}].filters", ref.filters) for i, ref in enumerate(rule.backend_refs)),
    ]:
        for filter_type in ("RequestRedirect", "URLRewrite"):
            if any(_replaces_prefix(f) for f in filters if f.type == filter_type):
                node.report(
                    node.at("matches"),
                    f"exactly one PathPrefix match must be specified when a {filter_type} filter "
                    f"in {where} uses path.replacePrefixMatch",
                )


def _replaces_prefix(route_filter: RouteFilter) -> bool:
    modifier = route_filter.request_redirect or route_filter.url_rewrite
    return modifier is not None and (
        modifier.path is not None and modifier.path.type == "ReplacePrefixMatch"
    )


def _match(node: Node) -> HTTPRouteMatch:
    path = node.mapping("path")
    path_match = PathMatch() if path is None else _path(path)
    return HTTPRouteMatch(
        path=path_match,
        headers=header_matches(node, "headers", max_value_length=4096),
        query_params=header_matches(node, "queryParams", max_value_length=1024),
        method=node.optional_string("method", choices=HTTP_METHODS),
    )


def _path(path: Node) -> PathMatch:
    path_type = path.choice("type", PATH_MATCH_TYPES, default="PathPrefix")
    value = path.string("value", default="/", max_length=1024)
    if path_type in ("Exact", "PathPrefix"):
        problem = http_path_problem(value)
        if problem is not None:
            path.report(path.at("value"), f"{problem}, got {describe(value)}")
    return PathMatch(type=path_type, value=value)


def _timeouts(rule: Node) -> HTTPRouteTimeouts:
    node = rule.mapping("timeouts")
    if node is None:
        return NO_TIMEOUTS
    request = node.optional_string("request", format=DURATION)
    backend = node.optional_string("backendRequest", format=DURATION)
    request_ms = duration_ms(request) if request is not None else None
    backend_ms = duration_ms(backend) if backend is not None else None
    if request_ms and backend_ms is not None and backend_ms > request_ms:
        node.report(
            node.at("backendRequest"),
            "backendRequest timeout cannot be longer than request timeout",
        )
    return HTTPRouteTimeouts(request_ms=request_ms, backend_request_ms=backend_ms)


def _retry(rule: Node) -> HTTPRouteRetry | None:
    """`retry` as the experimental CRD validates it (GEP-1731)."""
    node = rule.mapping("retry")
    if node is None:
        return None
    backoff = node.optional_string("backoff", format=DURATION)
    return HTTPRouteRetry(
        codes=_retry_codes(node),
        attempts=node.optional_integer("attempts", minimum=1, maximum=MAX_RETRY_ATTEMPTS),
        backoff_ms=duration_ms(backoff) if backoff is not None else None,
    )


def _retry_codes(retry: Node) -> tuple[int, ...]:
    """`codes`: a set (`x-kubernetes-list-type: set`) of status codes from 400 to 599."""
    items = retry.raw("codes")
    if items is None:
        return ()
    path = retry.at("codes")
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        retry.expected(path, "a list", items)
        return ()
    low, high = RETRY_CODES
    codes: list[int] = []
    for index, code in enumerate(items):
        if not is_integer(code) or not low <= code <= high:
            retry.expected(f"{path}[{index}]", integer_range(low, high), code)
        elif code in codes:
            retry.report(f"{path}[{index}]", f"duplicate value {code}")
        else:
            codes.append(code)
    return tuple(codes)
