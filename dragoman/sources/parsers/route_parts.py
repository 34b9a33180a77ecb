"""Pieces HTTPRoute and GRPCRoute share: parentRefs, backendRefs, header matches, filters
and Gateway API durations, read with the CRDs' validation (schema and CEL rules)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from dragoman.objects import (
    BackendRef,
    ExtensionRef,
    HeaderMatch,
    HeaderModifier,
    HTTPCORSFilter,
    HTTPHeader,
    ParentRef,
    PathModifier,
    RequestMirror,
    RequestRedirect,
    RouteFilter,
    URLRewrite,
)
from dragoman.objects.gateway import (
    GATEWAY_GROUP,
    MATCH_TYPES,
    PATH_MODIFIER_TYPES,
    REDIRECT_SCHEMES,
)
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1123_LABEL, DNS1123_SUBDOMAIN, GROUP, KIND, Format
from dragoman.sources.shared import canonical

_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+\-.^_`|~]+")
HEADER_NAME = Format(
    "an HTTP header name (letters, digits and !#$%&'*+-.^_`|~, at most 256 characters)",
    lambda value: len(value) <= 256 and _HEADER_NAME.fullmatch(value) is not None,
)
# A hostname without a wildcard label, as redirects and rewrites take.
PRECISE_HOSTNAME = Format(
    'a hostname such as "example.com" (lowercase, no wildcard, at most 253 characters)',
    DNS1123_SUBDOMAIN.accepts,
)
# GEP-2257: up to four <number><unit> parts, e.g. "1h30m", "500ms".
_DURATION = re.compile(r"([0-9]{1,5}(h|m|s|ms)){1,4}")
_DURATION_PART = re.compile(r"([0-9]{1,5})(ms|h|m|s)")
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
DURATION = Format(
    'a Gateway API duration such as "10s", "500ms" or "1h30m"',
    lambda value: _DURATION.fullmatch(value) is not None,
)

REDIRECT_STATUS_CODES = (301, 302, 303, 307, 308)

# filter type -> the field that holds its configuration
FILTER_FIELDS = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestMirror": "requestMirror",
    "RequestRedirect": "requestRedirect",
    "URLRewrite": "urlRewrite",
    "ExtensionRef": "extensionRef",
    "CORS": "cors",
}
HTTP_FILTER_TYPES = tuple(FILTER_FIELDS)
GRPC_FILTER_TYPES = (
    "ResponseHeaderModifier",
    "RequestHeaderModifier",
    "RequestMirror",
    "ExtensionRef",
)
# Filters a list may hold at most once (RequestMirror and ExtensionRef may repeat).
_SINGLE_FILTERS = (
    "CORS",
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
)


def duration_ms(value: str) -> int:
    """Milliseconds in a duration DURATION accepts."""
    return sum(int(number) * _UNIT_MS[unit] for number, unit in _DURATION_PART.findall(value))


def parent_refs(spec: Node) -> tuple[ParentRef, ...]:
    # Routes attach to few Gateways: equal lists of parents are one tuple.
    nodes = spec.mappings("parentRefs", max_items=32) or []
    return canonical(tuple(_parent_ref(node) for node in nodes))


def _parent_ref(node: Node) -> ParentRef:
    return ParentRef(
        name=node.string("name", required=True, min_length=1, max_length=253),
        namespace=node.optional_string("namespace", format=DNS1123_LABEL),
        group=node.string("group", default=GATEWAY_GROUP, format=GROUP),
        kind=node.string("kind", default="Gateway", format=KIND),
        section_name=node.optional_string("sectionName", format=DNS1123_SUBDOMAIN),
        port=node.optional_integer("port", minimum=1, maximum=65535),
    )


def backend_ref(node: Node, filter_types: Sequence[str] = ()) -> BackendRef:
    """A backendRef; with filter_types, its `filters` too (a mirror's backendRef has none)."""
    name = node.string("name", required=True, min_length=1, max_length=253)
    namespace = node.optional_string("namespace", format=DNS1123_LABEL)
    group = node.string("group", format=GROUP)
    kind = node.string("kind", default="Service", format=KIND)
    port = node.optional_integer("port", minimum=1, maximum=65535)
    if group == "" and kind == "Service" and not node.has("port"):
        # A CEL rule of the CRD: a Service has no default port to fall back on.
        node.report(node.at("port"), "is required when the backend is a Service")
    weight = node.integer("weight", default=1, minimum=0, maximum=1_000_000)
    filters = route_filters(node, filter_types) if filter_types else ()
    return BackendRef(
        name=name,
        namespace=namespace,
        group=group,
        kind=kind,
        port=port,
        weight=weight,
        filters=filters,
    )


def header_matches(node: Node, key: str, *, max_value_length: int) -> tuple[HeaderMatch, ...]:
    """`headers` or `queryParams` of a match: a list keyed by name, each name once."""
    items = node.mappings(key, max_items=16) or []
    matches = tuple(
        HeaderMatch(
            name=item.string("name", required=True, format=HEADER_NAME),
            type=item.choice("type", MATCH_TYPES, default="Exact"),
            value=item.string("value", required=True, min_length=1, max_length=max_value_length),
        )
        for item in items
    )
    _report_duplicates(items, [match.name for match in matches], "name")
    return matches


def route_filters(node: Node, allowed_types: Sequence[str]) -> tuple[RouteFilter, ...]:
    items = node.mappings("filters", max_items=16)
    if not items:
        return ()  # most rules and backends: nothing to count
    filters = tuple(_route_filter(item, allowed_types) for item in items)
    counts = Counter(f.type for f in filters)
    for single in _SINGLE_FILTERS:
        if counts[single] > 1:
            node.report(node.at("filters"), f"{single} filter cannot be repeated")
    if counts["RequestRedirect"] and counts["URLRewrite"]:
        node.report(
            node.at("filters"),
            "may specify either a RequestRedirect or a URLRewrite filter, but not both",
        )
    return filters


def _route_filter(node: Node, allowed_types: Sequence[str]) -> RouteFilter:
    filter_type = node.string("type", required=True, choices=allowed_types)
    for other_type, field in FILTER_FIELDS.items():
        if other_type != filter_type and node.has(field) and filter_type:
            node.report(node.at(field), f"must not be set when the filter type is {filter_type}")
    config_field = FILTER_FIELDS.get(filter_type)
    if config_field is None:
        return RouteFilter(type=filter_type)
    config = node.mapping(config_field)
    if config is None:
        if not node.has(config_field):
            node.report(node.at(config_field), f"is required when the filter type is {filter_type}")
        return RouteFilter(type=filter_type)
    if filter_type == "RequestHeaderModifier":
        return RouteFilter(filter_type, request_header_modifier=_header_modifier(config))
    if filter_type == "ResponseHeaderModifier":
        return RouteFilter(filter_type, response_header_modifier=_header_modifier(config))
    if filter_type == "RequestRedirect":
        return RouteFilter(filter_type, request_redirect=_request_redirect(config))
    if filter_type == "URLRewrite":
        return RouteFilter(filter_type, url_rewrite=_url_rewrite(config))
    if filter_type == "RequestMirror":
        return RouteFilter(filter_type, request_mirror=_request_mirror(config))
    if filter_type == "CORS":
        return RouteFilter(filter_type, cors=_cors(config))
    return RouteFilter(filter_type, extension_ref=_extension_ref(config))


def _extension_ref(node: Node) -> ExtensionRef:
    """An ExtensionRef filter's object (a LocalObjectReference: the route's namespace)."""
    return ExtensionRef(
        group=node.string("group", required=True, format=GROUP),
        kind=node.string("kind", required=True, format=KIND),
        name=node.string("name", required=True, min_length=1, max_length=253),
    )


def _header_modifier(node: Node) -> HeaderModifier:
    def headers(key: str) -> tuple[HTTPHeader, ...]:
        items = node.mappings(key, max_items=16) or []
        result = tuple(
            HTTPHeader(
                name=item.string("name", required=True, format=HEADER_NAME),
                value=item.string("value", required=True, min_length=1, max_length=4096),
            )
            for item in items
        )
        _report_duplicates(items, [header.name for header in result], "name")
        return result

    remove = node.strings("remove", format=HEADER_NAME, max_items=16)
    if len(set(remove)) != len(remove):
        node.report(node.at("remove"), "must not name a header twice")
    return HeaderModifier(set=headers("set"), add=headers("add"), remove=remove)


def _path_modifier(node: Node) -> PathModifier:
    modifier_type = node.optional_choice("type", PATH_MODIFIER_TYPES, required=True)
    full = node.optional_string("replaceFullPath", max_length=1024)
    prefix = node.optional_string("replacePrefixMatch", max_length=1024)
    for field, value, wanted in (
        ("replaceFullPath", full, "ReplaceFullPath"),
        ("replacePrefixMatch", prefix, "ReplacePrefixMatch"),
    ):
        if modifier_type == wanted and value is None and not node.has(field):
            node.report(node.at(field), f"is required when type is {wanted!r}")
        if value is not None and modifier_type and modifier_type != wanted:
            node.report(node.at("type"), f"must be {wanted!r} when {field} is set")
    value = full if modifier_type == "ReplaceFullPath" else prefix
    # No type: a placeholder, never seen (the object is refused).
    return PathModifier(type=modifier_type or "ReplaceFullPath", value=value or "")


def _request_redirect(node: Node) -> RequestRedirect:
    path = node.mapping("path")
    status = node.raw("statusCode")
    if status is not None and status not in REDIRECT_STATUS_CODES:
        node.expected(
            node.at("statusCode"), "one of " + ", ".join(map(str, REDIRECT_STATUS_CODES)), status
        )
    return RequestRedirect(
        scheme=node.optional_choice("scheme", REDIRECT_SCHEMES),
        hostname=node.optional_string("hostname", format=PRECISE_HOSTNAME),
        path=_path_modifier(path) if path is not None else None,
        port=node.optional_integer("port", minimum=1, maximum=65535),
        status_code=status if status in REDIRECT_STATUS_CODES else 302,
    )


def _url_rewrite(node: Node) -> URLRewrite:
    path = node.mapping("path")
    return URLRewrite(
        hostname=node.optional_string("hostname", format=PRECISE_HOSTNAME),
        path=_path_modifier(path) if path is not None else None,
    )


def _request_mirror(node: Node) -> RequestMirror:
    ref_node = node.mapping("backendRef", required=True)
    ref = backend_ref(ref_node) if ref_node is not None else BackendRef(name="")
    numerator, denominator = 100, 100
    percent = node.optional_integer("percent", minimum=0, maximum=100)
    fraction = node.mapping("fraction")
    if percent is not None and fraction is not None:
        node.report(node.path, "only one of percent or fraction may be specified")
    if percent is not None:
        numerator = percent
    elif fraction is not None:
        numerator = fraction.integer("numerator", required=True, minimum=0, maximum=2**31 - 1)
        denominator = fraction.integer("denominator", default=100, minimum=1, maximum=2**31 - 1)
        if numerator > denominator:
            fraction.report(fraction.path, "numerator must be less than or equal to denominator")
    # weight and filters have no meaning for a mirror's backendRef
    return RequestMirror(backend_ref=ref, numerator=numerator, denominator=denominator)


# An allowed origin as the CRD writes it: "*", or scheme://host[:port] with "*." allowed in
# front of the host (or a host that is "*" alone).
_ORIGIN = re.compile(r"\*|https?://((\*\.)?([a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+|\*)(:[0-9]{1,5})?")
ORIGIN = Format(
    'an origin such as "https://example.com", "https://*.example.com:8443" or "*"',
    lambda value: len(value) <= 253 and _ORIGIN.fullmatch(value) is not None,
)
CORS_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "*")


def _cors(node: Node) -> HTTPCORSFilter:
    origins = node.strings("allowOrigins", format=ORIGIN, max_items=64)
    methods = node.strings("allowMethods", max_items=9)
    for index, method in enumerate(methods):
        if method not in CORS_METHODS:
            node.report(
                f"{node.at('allowMethods')}[{index}]",
                f"must be one of {', '.join(CORS_METHODS)}, got {describe(method)}",
            )
    allow_headers = node.strings("allowHeaders", format=HEADER_NAME, max_items=64)
    expose_headers = node.strings("exposeHeaders", format=HEADER_NAME, max_items=64)
    for key, values in (
        ("allowOrigins", origins),
        ("allowMethods", methods),
        ("allowHeaders", allow_headers),
        ("exposeHeaders", expose_headers),
    ):
        if len(set(values)) != len(values):
            node.report(node.at(key), "must not list a value twice")
        if key != "exposeHeaders" and "*" in values and len(values) > 1:
            node.report(node.at(key), "cannot contain '*' alongside other values")
    return HTTPCORSFilter(
        allow_origins=origins,
        allow_methods=methods,
        allow_headers=allow_headers,
        expose_headers=expose_headers,
        max_age_s=node.integer("maxAge", default=5, minimum=1, maximum=2**31 - 1),
        allow_credentials=node.boolean("allowCredentials", default=False),
    )


def _report_duplicates(nodes: Sequence[Node], values: Sequence[str], key: str) -> None:
    seen: set[str] = set()
    for node, value in zip(nodes, values, strict=False):
        if value and value in seen:
            node.report(node.at(key), f"duplicate {key} {describe(value)}")
        seen.add(value)


def rule_names(rules: Sequence[Node], names: Sequence[str | None]) -> None:
    """Rule names, when set, must be unique within a route."""
    _report_duplicates(rules, [name or "" for name in names], "name")
