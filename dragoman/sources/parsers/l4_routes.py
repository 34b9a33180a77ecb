"""TCPRoute, TLSRoute and UDPRoute (gateway.networking.k8s.io/v1) from decoded manifests,
validated as their CRDs validate them: exactly one rule, one to sixteen backendRefs, and
(TLSRoute) one to 1024 hostnames."""

from __future__ import annotations

from dragoman.objects import ObjectMeta
from dragoman.objects.l4_routes import L4RouteRule, TCPRoute, TLSRoute, UDPRoute
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_SUBDOMAIN, HOSTNAME
from dragoman.sources.parsers.route_parts import backend_ref, parent_refs


def parse_tcp_route(root: Node, meta: ObjectMeta) -> TCPRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return TCPRoute(meta=meta)
    return TCPRoute(meta=meta, parent_refs=parent_refs(spec), rules=_rules(spec))


def parse_tls_route(root: Node, meta: ObjectMeta) -> TLSRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return TLSRoute(meta=meta)
    hostnames = spec.strings(
        "hostnames", format=HOSTNAME, required=True, min_items=1, max_items=1024, unique=True
    )
    if len(set(hostnames)) != len(hostnames):
        spec.report(spec.at("hostnames"), "must not list a hostname twice")
    return TLSRoute(
        meta=meta, parent_refs=parent_refs(spec), hostnames=hostnames, rules=_rules(spec)
    )


def parse_udp_route(root: Node, meta: ObjectMeta) -> UDPRoute:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return UDPRoute(meta=meta)
    return UDPRoute(meta=meta, parent_refs=parent_refs(spec), rules=_rules(spec))


def _rules(spec: Node) -> tuple[L4RouteRule, ...]:
    nodes = spec.mappings("rules", required=True, min_items=1, max_items=1) or []
    return tuple(_rule(node) for node in nodes)


def _rule(node: Node) -> L4RouteRule:
    refs = node.mappings("backendRefs", required=True, min_items=1, max_items=16) or []
    return L4RouteRule(
        backend_refs=tuple(backend_ref(ref) for ref in refs),
        name=node.optional_string("name", format=DNS1123_SUBDOMAIN),
    )
