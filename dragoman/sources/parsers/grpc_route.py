"""GRPCRoute (gateway.networking.k8s.io/v1) from a decoded manifest, validated as the
GRPCRoute CRD (OpenAPI schema and CEL rules) validates it."""

from __future__ import annotations

import re

from dragoman.objects import GRPCMethodMatch, GRPCRoute, GRPCRouteMatch, GRPCRouteRule, ObjectMeta
from dragoman.objects.gateway import MATCH_TYPES
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_SUBDOMAIN, HOSTNAME
from dragoman.sources.parsers.route_parts import (
    GRPC_FILTER_TYPES,
    backend_ref,
    header_matches,
    parent_refs,
    route_filters,
    rule_names,
)

MAX_MATCHES_PER_ROUTE = 128
# What the CRD accepts for Exact service and method names.
_SERVICE = re.compile(r"\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*", re.IGNORECASE)
_METHOD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def parse_grpc_route(root: Node, meta: ObjectMeta) -> GRPCRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return GRPCRoute(meta=meta)
    parents = parent_refs(spec)
    hostnames = spec.strings("hostnames", format=HOSTNAME, max_items=16, unique=True)
    rule_nodes = spec.mappings("rules", max_items=16) or []
    rules = tuple(_rule(node) for node in rule_nodes)
    if sum(len(rule.matches) for rule in rules) > MAX_MATCHES_PER_ROUTE:
        spec.report(spec.at("rules"), f"must have at most {MAX_MATCHES_PER_ROUTE} matches in total")
    rule_names(rule_nodes, [rule.name for rule in rules])
    return GRPCRoute(meta=meta, parent_refs=parents, hostnames=hostnames, rules=rules)


def _rule(node: Node) -> GRPCRouteRule:
    matches = tuple(_match(m) for m in node.mappings("matches", max_items=64) or [])
    backends = node.mappings("backendRefs", max_items=16) or []
    return GRPCRouteRule(
        matches=matches,
        backend_refs=tuple(backend_ref(b, GRPC_FILTER_TYPES) for b in backends),
        filters=route_filters(node, GRPC_FILTER_TYPES),
        name=node.optional_string("name", format=DNS1123_SUBDOMAIN),
    )


def _match(node: Node) -> GRPCRouteMatch:
    method = node.mapping("method")
    return GRPCRouteMatch(
        method=_method(method) if method is not None else None,
        headers=header_matches(node, "headers", max_value_length=4096),
    )


def _method(node: Node) -> GRPCMethodMatch:
    match_type = node.choice("type", MATCH_TYPES, default="Exact")
    # An empty string means "any", as an absent field does.
    service = node.optional_string("service", max_length=1024) or None
    method = node.optional_string("method", max_length=1024) or None
    if service is None and method is None and not (node.has("service") or node.has("method")):
        node.report(node.path, "one or both of 'service' or 'method' must be specified")
    if match_type == "Exact":
        if service is not None and _SERVICE.fullmatch(service) is None:
            node.expected(node.at("service"), "a gRPC service name such as pkg.Service", service)
        if method is not None and _METHOD.fullmatch(method) is None:
            node.expected(node.at("method"), "a gRPC method name such as GetThing", method)
    return GRPCMethodMatch(type=match_type, service=service, method=method)
