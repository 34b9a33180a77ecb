"""Gateway API Gateways and their listeners from decoded manifests.

Validation and defaults follow the Gateway CRD (OpenAPI schema and CEL rules). What the CRD
accepts but dragoman cannot serve (other protocols, unknown route kinds, missing Secrets) is
not a parse error: the DAG reports it in the Gateway's status, listener by listener.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Mapping

from dragoman.objects import (
    CertificateRef,
    Gateway,
    GatewayAddress,
    GatewayListener,
    LabelSelector,
    ListenerTLS,
    ObjectMeta,
    ParametersRef,
    RouteGroupKind,
)
from dragoman.objects.gateway import (
    ALLOW_VALID_ONLY,
    ALLOWED_LISTENER_SETS,
    ALLOWED_NAMESPACES,
    FRONTEND_VALIDATION_MODES,
    GATEWAY_GROUP,
    TLS_MODES,
    AllowedListenerSets,
    AllowedNamespaces,
    FrontendTLS,
    FrontendValidation,
    ObjectReference,
)
from dragoman.objects.meta import EMPTY_MAPPING
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    GROUP,
    HOSTNAME,
    KIND,
    LISTENER_PROTOCOL,
)
from dragoman.sources.parsers.selector import parse_label_selector

# Protocols the CRD forbids `tls` on, and those it forbids `hostname` on.
PLAIN_PROTOCOLS = ("HTTP", "TCP", "UDP")
HOSTLESS_PROTOCOLS = ("TCP", "UDP")


def parse_gateway(root: Node, meta: ObjectMeta) -> Gateway:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return Gateway(meta=meta)
    class_name = spec.string("gatewayClassName", required=True, min_length=1, max_length=253)
    nodes = spec.mappings("listeners", required=True, min_items=1, max_items=64) or []
    listeners = listeners_of(nodes)
    allowed_from, allowed_selector = _allowed_listeners(spec)
    return Gateway(
        meta=meta,
        gateway_class_name=class_name,
        listeners=listeners,
        addresses=_addresses(spec),
        parameters_ref=_infrastructure_parameters(spec),
        infrastructure_labels=_infrastructure_map(spec, "labels"),
        infrastructure_annotations=_infrastructure_map(spec, "annotations"),
        backend_client_certificate=_backend_client_certificate(spec),
        frontend_tls=_frontend_tls(spec),
        allowed_listener_sets=allowed_from,
        listener_set_selector=allowed_selector,
    )


def listeners_of(nodes: list[Node]) -> tuple[GatewayListener, ...]:
    """Listeners as a Gateway or a ListenerSet lists them: names and bindings unique."""
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
    return listeners


def _addresses(spec: Node) -> tuple[GatewayAddress, ...]:
    """spec.addresses, typed as the CRD checks them; whether dragoman can honour each is
    the build's to say (in the Gateway's status)."""
    found = []
    for node in spec.mappings("addresses", max_items=16) or []:
        address_type = node.string("type", default="IPAddress", min_length=1, max_length=253)
        value = node.string("value", max_length=253)
        if address_type == "IPAddress" and value:
            try:
                ipaddress.ip_address(value)
            except ValueError:
                node.report(node.at("value"), f"expected an IP address, got {describe(value)}")
        found.append(GatewayAddress(address_type, value))
    return tuple(found)


def _listener(node: Node) -> GatewayListener:
    protocol = node.string("protocol", required=True, format=LISTENER_PROTOCOL)
    hostname = node.optional_string("hostname", format=HOSTNAME)
    if hostname is not None and protocol in HOSTLESS_PROTOCOLS:
        node.report(node.at("hostname"), f"must not be set for protocol {protocol}")
    allowed = node.mapping("allowedRoutes")
    namespaces = allowed.mapping("namespaces") if allowed is not None else None
    source: AllowedNamespaces = "Same"
    selector = None
    if namespaces is not None:
        source = namespaces.choice("from", ALLOWED_NAMESPACES, default="Same")
        selector_node = namespaces.mapping("selector")
        if selector_node is not None:
            selector = parse_label_selector(selector_node)
        elif source == "Selector":
            namespaces.report(namespaces.at("selector"), 'is required when from is "Selector"')
    return GatewayListener(
        name=node.string("name", required=True, format=DNS1123_SUBDOMAIN),
        port=node.integer("port", required=True, minimum=1, maximum=65535),
        protocol=protocol,
        hostname=hostname,
        allowed_namespaces=source,
        namespace_selector=selector,
        allowed_kinds=_allowed_kinds(allowed) if allowed is not None else (),
        tls=_tls(node, protocol),
    )


def _allowed_kinds(allowed: Node) -> tuple[RouteGroupKind, ...]:
    """As written; kinds dragoman does not serve are reported in status (InvalidRouteKinds)."""
    return tuple(
        RouteGroupKind(
            kind=kind.string("kind", required=True, format=KIND),
            group=kind.string("group", default=GATEWAY_GROUP, format=GROUP),
        )
        for kind in allowed.mappings("kinds", max_items=8) or []
    )


def _tls(listener: Node, protocol: str) -> ListenerTLS | None:
    node = listener.mapping("tls")
    if node is None:
        return None
    if protocol in PLAIN_PROTOCOLS:
        listener.report(listener.at("tls"), f"must not be set for protocol {protocol}")
    if protocol == "TLS" and not node.has("mode"):
        node.report(node.at("mode"), "is required for protocol TLS")
    mode = node.choice("mode", TLS_MODES, default="Terminate")
    if protocol == "HTTPS" and mode != "Terminate":
        node.report(node.at("mode"), "must be Terminate for protocol HTTPS")
    refs = tuple(
        certificate_ref(ref) for ref in node.mappings("certificateRefs", max_items=64) or []
    )
    options = node.string_map("options")
    if mode == "Terminate" and not refs and not options:
        node.report(node.path, "certificateRefs or options must be set when mode is Terminate")
    return ListenerTLS(mode=mode, certificate_refs=refs)


def certificate_ref(node: Node) -> CertificateRef:
    """A SecretObjectReference (a listener's certificateRefs entry, a clientCertificateRef)."""
    return CertificateRef(
        name=node.string("name", required=True, min_length=1, max_length=253),
        namespace=node.optional_string("namespace", format=DNS1123_LABEL),
        group=node.string("group", format=GROUP),
        kind=node.string("kind", default="Secret", format=KIND),
    )


def _infrastructure_parameters(spec: Node) -> ParametersRef | None:
    infrastructure = spec.mapping("infrastructure")
    parameters = infrastructure.mapping("parametersRef") if infrastructure is not None else None
    if parameters is None:
        return None
    return ParametersRef(
        group=parameters.string("group", required=True, format=GROUP),
        kind=parameters.string("kind", required=True, format=KIND),
        name=parameters.string("name", required=True, min_length=1, max_length=253),
    )


def _infrastructure_map(spec: Node, key: str) -> Mapping[str, str]:
    """spec.infrastructure.labels or .annotations (at most 8 entries, as the CRD says)."""
    infrastructure = spec.mapping("infrastructure")
    if infrastructure is None:
        return EMPTY_MAPPING
    entries = infrastructure.string_map(key)
    if len(entries) > 8:
        infrastructure.report(infrastructure.at(key), f"at most 8 entries, got {len(entries)}")
        return EMPTY_MAPPING
    return entries


def _backend_client_certificate(spec: Node) -> CertificateRef | None:
    tls = spec.mapping("tls")
    backend = tls.mapping("backend") if tls is not None else None
    ref = backend.mapping("clientCertificateRef") if backend is not None else None
    return certificate_ref(ref) if ref is not None else None


def _frontend_tls(spec: Node) -> FrontendTLS | None:
    """spec.tls.frontend, checked as the CRD checks it (default required, ports unique)."""
    tls = spec.mapping("tls")
    frontend = tls.mapping("frontend") if tls is not None else None
    if frontend is None:
        return None
    default = frontend.mapping("default", required=True)
    per_port: list[tuple[int, FrontendValidation]] = []
    seen: set[int] = set()
    for entry in frontend.mappings("perPort", max_items=64) or []:
        port = entry.integer("port", required=True, minimum=1, maximum=65535)
        if port in seen:
            entry.report(entry.at("port"), f"port {port} has another perPort entry already")
        seen.add(port)
        port_tls = entry.mapping("tls", required=True)
        if port_tls is not None:
            per_port.append((port, _frontend_validation(port_tls)))
    return FrontendTLS(
        default=_frontend_validation(default) if default is not None else FrontendValidation(),
        per_port=tuple(per_port),
    )


def _frontend_validation(node: Node) -> FrontendValidation:
    """A default or perPort tls: its validation, or none (no CA references)."""
    validation = node.mapping("validation")
    if validation is None:
        return FrontendValidation(field=node.path)
    refs = validation.mappings("caCertificateRefs", required=True, min_items=1, max_items=16)
    return FrontendValidation(
        ca_certificate_refs=tuple(_object_reference(ref) for ref in refs or ()),
        mode=validation.choice("mode", FRONTEND_VALIDATION_MODES, default=ALLOW_VALID_ONLY),
        field=node.path,
    )


def _object_reference(node: Node) -> ObjectReference:
    return ObjectReference(
        name=node.string("name", required=True, min_length=1, max_length=253),
        kind=node.string("kind", required=True, format=KIND),
        group=node.string("group", required=True, format=GROUP),  # "": the core group
        namespace=node.optional_string("namespace", format=DNS1123_LABEL),
    )


def _allowed_listeners(spec: Node) -> tuple[AllowedListenerSets, LabelSelector | None]:
    allowed = spec.mapping("allowedListeners")
    namespaces = allowed.mapping("namespaces") if allowed is not None else None
    if namespaces is None:
        return "None", None
    source = namespaces.choice("from", ALLOWED_LISTENER_SETS, default="None")
    selector_node = namespaces.mapping("selector")
    selector = parse_label_selector(selector_node) if selector_node is not None else None
    if source == "Selector" and selector is None:
        namespaces.report(namespaces.at("selector"), 'is required when from is "Selector"')
    return source, selector
