"""v1 Service from decoded manifests.

Validation and defaults follow the Kubernetes API server, so a manifest that `kubectl apply`
would reject is rejected here too, with the same field path.
"""

from __future__ import annotations

from collections.abc import Mapping

from dragoman.objects import ObjectMeta, Service, ServicePort
from dragoman.objects.service import PORT_PROTOCOLS, SERVICE_TYPES, SESSION_AFFINITIES
from dragoman.sources.fields import Node, describe, is_integer
from dragoman.sources.formats import (
    DNS1123_LABEL,
    IANA_SVC_NAME,
    QUALIFIED_NAME,
    or_empty,
)
from dragoman.sources.shared import canonical

MAX_EXTERNAL_IPS = 64


def parse_service(root: Node, meta: ObjectMeta) -> Service:
    spec = root.mapping("spec")
    if spec is None:
        if root.has("spec"):
            return Service(meta=meta)  # not a mapping: already reported
        # A Service may omit spec entirely; the API then reports spec.ports as missing.
        spec = Node({}, "spec", root.problems)
    service_type = spec.choice("type", SERVICE_TYPES, default="ClusterIP")
    is_external = service_type == "ExternalName"
    headless = spec.raw("clusterIP") == "None"
    ports = _service_ports(spec, required=not (is_external or headless))
    if is_external:
        # Any string: the build judges external names (case, trailing dot, IP literals,
        # localhost, metadata hosts) and says on the route exactly why one is refused.
        external_name = spec.string("externalName", required=True, unique=True)
    else:
        external_name = spec.string("externalName", unique=True)
    # The API treats an empty selector like none: endpoints are managed by someone else.
    selector = spec.string_map("selector") or None
    affinity = spec.choice("sessionAffinity", SESSION_AFFINITIES, default="None")
    return Service(
        meta=meta,
        type=service_type,
        ports=ports,
        selector=selector,
        external_name=external_name,
        session_affinity=affinity,
        session_affinity_timeout_s=_affinity_timeout(spec, affinity),
        # Any strings: the build judges them (IP syntax, the address rules) on the routes.
        external_ips=tuple(spec.strings("externalIPs", max_items=MAX_EXTERNAL_IPS)),
        load_balancer_ingress=_load_balancer_ingress(root),
    )


def _affinity_timeout(spec: Node, affinity: str) -> int | None:
    config = spec.mapping("sessionAffinityConfig")
    client_ip = config.mapping("clientIP") if config is not None else None
    if client_ip is None:
        return None
    timeout = client_ip.optional_integer("timeoutSeconds", minimum=1, maximum=86400)
    if timeout is not None and affinity != "ClientIP":
        # As the API server: the config belongs to ClientIP affinity alone.
        spec.report(client_ip.at("timeoutSeconds"), "may only be set for ClientIP affinity")
        return None
    return timeout


def _load_balancer_ingress(root: Node) -> tuple[str, ...]:
    """status.loadBalancer.ingress as the API server wrote it: read leniently (a status is
    not the user's input), each entry's ip, else its hostname."""
    status = root.data.get("status")
    balancer = status.get("loadBalancer") if isinstance(status, Mapping) else None
    ingress = balancer.get("ingress") if isinstance(balancer, Mapping) else None
    if not isinstance(ingress, list):
        return ()
    found = []
    for entry in ingress[:16]:
        if isinstance(entry, Mapping):
            value = entry.get("ip") or entry.get("hostname")
            if isinstance(value, str) and value and len(value) <= 253:
                found.append(value)
    return tuple(dict.fromkeys(found))


def _service_ports(spec: Node, *, required: bool) -> tuple[ServicePort, ...]:
    nodes = spec.mappings("ports", required=required, min_items=1 if required else 0) or []
    ports = tuple(_service_port(node, name_required=len(nodes) > 1) for node in nodes)
    report_duplicates(nodes, [p.name or None for p in ports], "name")
    report_duplicates(
        nodes,
        [f"{p.port}/{p.protocol}" if p.port else None for p in ports],
        "port",
        what="port and protocol",
    )
    return canonical(ports)  # many Services declare the same ports


def _service_port(node: Node, *, name_required: bool) -> ServicePort:
    name = node.string("name", format=or_empty(DNS1123_LABEL))
    if name_required and not node.raw("name"):
        node.report(node.at("name"), "is required when a Service has more than one port")
    return ServicePort(
        port=node.integer("port", required=True, minimum=1, maximum=65535),
        name=name,
        protocol=node.choice("protocol", PORT_PROTOCOLS, default="TCP"),
        target_port=_target_port(node),
        app_protocol=node.string("appProtocol", format=QUALIFIED_NAME),
    )


def _target_port(node: Node) -> int | str | None:
    """A port number or a container port name; absent, 0 or "" mean "the same as port"."""
    value = node.raw("targetPort")
    if value is None or value == 0 or value == "":
        return None
    if is_integer(value) and 1 <= value <= 65535:
        return int(value)
    if isinstance(value, str) and IANA_SVC_NAME.accepts(value):
        return value
    node.report(
        node.at("targetPort"),
        f"expected an integer from 1 to 65535 or {IANA_SVC_NAME.expected}, got {describe(value)}",
    )
    return None


def report_duplicates(
    nodes: list[Node], values: list[str | None], key: str, *, what: str | None = None
) -> None:
    """Report the second and later occurrence of each value (None: not compared)."""
    seen: set[str] = set()
    for node, value in zip(nodes, values, strict=True):
        if value is None:
            continue
        if value in seen:
            node.report(node.at(key), f"duplicate {what or key} {describe(value)}")
        seen.add(value)
