"""Gateway API kinds from decoded manifests: Gateway and HTTPRoute.

Validation and defaults follow the Gateway API CRDs (OpenAPI schema and CEL rules) for the
fields dragoman models. Fields that would change routing but are not modelled yet (match
headers, filters, route namespace selectors) are reported, never silently dropped.
"""

from __future__ import annotations

from collections import Counter

from dragoman.objects import (
    BackendRef,
    Gateway,
    GatewayListener,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRule,
    ObjectMeta,
    ParentRef,
    PathMatch,
)
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    GROUP,
    HOSTNAME,
    KIND,
    LISTENER_PROTOCOL,
    http_path_problem,
)

ALLOWED_NAMESPACES = ("All", "Selector", "Same")
PATH_MATCH_TYPES = ("Exact", "PathPrefix", "RegularExpression")
MAX_MATCHES_PER_ROUTE = 128


def parse_gateway(root: Node, meta: ObjectMeta) -> Gateway:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return Gateway(meta=meta)
    class_name = spec.string("gatewayClassName", required=True, min_length=1, max_length=253)
    nodes = spec.mappings("listeners", required=True, min_items=1, max_items=64) or []
    listeners = tuple(_listener(node) for node in nodes)
    names: Counter[str] = Counter()
    bindings: Counter[tuple[int, str, str | None]] = Counter()
    for node, listener in zip(nodes, listeners, strict=True):
        names[listener.name] += 1
        if listener.name and names[listener.name] > 1:
            node.report(node.at("name"), f"duplicate listener name {describe(listener.name)}")
        binding = (listener.port, listener.protocol, listener.hostname)
        bindings[binding] += 1
        if listener.port and listener.protocol and bindings[binding] > 1:
            node.report(node.path, "another listener has the same port, protocol and hostname")
    return Gateway(meta=meta, gateway_class_name=class_name, listeners=listeners)


def _listener(node: Node) -> GatewayListener:
    return GatewayListener(
        name=node.string("name", required=True, format=DNS1123_SUBDOMAIN),
        port=node.integer("port", required=True, minimum=1, maximum=65535),
        protocol=node.string("protocol", required=True, format=LISTENER_PROTOCOL),
        hostname=node.optional_string("hostname", format=HOSTNAME),
        allowed_namespaces=_allowed_namespaces(node),
    )


def _allowed_namespaces(listener: Node) -> str:
    allowed = listener.mapping("allowedRoutes")
    if allowed is None:
        return "Same"
    _check_allowed_kinds(allowed)
    namespaces = allowed.mapping("namespaces")
    if namespaces is None:
        return "Same"
    source = namespaces.string("from", default="Same", choices=ALLOWED_NAMESPACES)
    if source == "Selector":
        namespaces.report(
            namespaces.at("from"), 'Selector is not supported yet; use "Same" or "All"'
        )
    return source


def _check_allowed_kinds(allowed: Node) -> None:
    """dragoman attaches only HTTPRoutes; a listener that excludes them cannot be honoured."""
    kinds = allowed.mappings("kinds", max_items=8)
    if not kinds:
        return
    named = [
        (
            kind.string("group", default=GATEWAY_GROUP, format=GROUP),
            kind.string("kind", required=True, format=KIND),
        )
        for kind in kinds
    ]
    if (GATEWAY_GROUP, "HTTPRoute") not in named:
        allowed.report(
            allowed.at("kinds"), "route kinds other than HTTPRoute are not supported yet"
        )


def parse_http_route(root: Node, meta: ObjectMeta) -> HTTPRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return HTTPRoute(meta=meta)
    parents = tuple(_parent_ref(node) for node in spec.mappings("parentRefs", max_items=32) or [])
    hostnames = spec.strings("hostnames", format=HOSTNAME, max_items=16)
    rule_nodes = spec.mappings("rules", min_items=1, max_items=16)
    # The CRD defaults absent rules to one rule matching every path, with no backends.
    rules = (HTTPRouteRule(),) if rule_nodes is None else tuple(_rule(n) for n in rule_nodes)
    if sum(len(rule.matches) for rule in rules) > MAX_MATCHES_PER_ROUTE:
        spec.report(spec.at("rules"), f"must have at most {MAX_MATCHES_PER_ROUTE} matches in total")
    return HTTPRoute(meta=meta, parent_refs=parents, hostnames=hostnames, rules=rules)


def _parent_ref(node: Node) -> ParentRef:
    return ParentRef(
        name=node.string("name", required=True, min_length=1, max_length=253),
        namespace=node.optional_string("namespace", format=DNS1123_LABEL),
        group=node.string("group", default=GATEWAY_GROUP, format=GROUP),
        kind=node.string("kind", default="Gateway", format=KIND),
        section_name=node.optional_string("sectionName", format=DNS1123_SUBDOMAIN),
        port=node.optional_integer("port", minimum=1, maximum=65535),
    )


def _rule(node: Node) -> HTTPRouteRule:
    _reject_unsupported(node, "filters")
    match_nodes = node.mappings("matches", max_items=64)
    # Absent matches default to one PathPrefix "/" match; the spec reads an empty list the same.
    matches = tuple(_match(m) for m in match_nodes) if match_nodes else (HTTPRouteMatch(),)
    backends = node.mappings("backendRefs", max_items=16) or []
    return HTTPRouteRule(matches=matches, backend_refs=tuple(_backend_ref(b) for b in backends))


def _match(node: Node) -> HTTPRouteMatch:
    for key in ("headers", "queryParams", "method"):
        _reject_unsupported(node, key)
    path = node.mapping("path")
    if path is None:
        return HTTPRouteMatch()
    path_type = path.string("type", default="PathPrefix", choices=PATH_MATCH_TYPES)
    value = path.string("value", default="/", max_length=1024)
    if path_type in ("Exact", "PathPrefix"):
        problem = http_path_problem(value)
        if problem is not None:
            path.report(path.at("value"), f"{problem}, got {describe(value)}")
    return HTTPRouteMatch(path=PathMatch(type=path_type, value=value))


def _backend_ref(node: Node) -> BackendRef:
    name = node.string("name", required=True, min_length=1, max_length=253)
    namespace = node.optional_string("namespace", format=DNS1123_LABEL)
    group = node.string("group", format=GROUP)
    kind = node.string("kind", default="Service", format=KIND)
    port = node.optional_integer("port", minimum=1, maximum=65535)
    if group == "" and kind == "Service" and not node.has("port"):
        # A CEL rule of the CRD: a Service has no default port to fall back on.
        node.report(node.at("port"), "is required when the backend is a Service")
    weight = node.integer("weight", default=1, minimum=0, maximum=1_000_000)
    _reject_unsupported(node, "filters")
    return BackendRef(
        name=name, namespace=namespace, group=group, kind=kind, port=port, weight=weight
    )


def _reject_unsupported(node: Node, key: str) -> None:
    value = node.raw(key)
    if value is not None and value != []:
        node.report(node.at(key), "is not supported yet")
