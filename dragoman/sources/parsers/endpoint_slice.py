"""discovery.k8s.io/v1 EndpointSlice from decoded manifests.

Validation and defaults follow the Kubernetes API server, so a manifest that `kubectl apply`
would reject is rejected here too, with the same field path.
"""

from __future__ import annotations

from dragoman.objects import Endpoint, EndpointPort, EndpointSlice, ObjectMeta
from dragoman.objects.endpoint_slice import ADDRESS_TYPES, AddressType
from dragoman.objects.service import PORT_PROTOCOLS
from dragoman.sources.fields import Node
from dragoman.sources.formats import (
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    IPV4,
    IPV6,
    QUALIFIED_NAME,
    Format,
    or_empty,
)
from dragoman.sources.parsers.service import report_duplicates

ADDRESS_FORMATS: dict[AddressType, Format] = {
    "IPv4": IPV4,
    "IPv6": IPV6,
    "FQDN": DNS1123_SUBDOMAIN,
}


def parse_endpoint_slice(root: Node, meta: ObjectMeta) -> EndpointSlice:
    address_type = root.optional_choice("addressType", ADDRESS_TYPES, required=True)
    # None when the type is missing or wrong: its addresses are then not judged by it.
    address_format = ADDRESS_FORMATS[address_type] if address_type is not None else None
    endpoint_nodes = root.mappings("endpoints", max_items=1000) or []
    port_nodes = root.mappings("ports", max_items=100) or []
    ports = tuple(_endpoint_port(node) for node in port_nodes)
    report_duplicates(port_nodes, [p.name for p in ports], "name")
    return EndpointSlice(
        meta=meta,
        address_type=address_type or "IPv4",  # a placeholder when refused
        endpoints=tuple(_endpoint(node, address_format) for node in endpoint_nodes),
        ports=ports,
    )


def _endpoint(node: Node, address_format: Format | None) -> Endpoint:
    addresses = node.strings(
        "addresses", required=True, min_items=1, max_items=100, format=address_format, unique=True
    )
    conditions = node.mapping("conditions") or Node({}, node.at("conditions"), node.problems)
    # Absent conditions mean ready; absent serving defers to ready; absent terminating is false.
    ready = conditions.boolean("ready", default=True)
    return Endpoint(
        addresses=addresses,
        ready=ready,
        serving=conditions.boolean("serving", default=ready),
        terminating=conditions.boolean("terminating", default=False),
        hostname=node.string("hostname", format=DNS1123_LABEL),
        node_name=node.string("nodeName"),
        zone=node.string("zone"),
    )


def _endpoint_port(node: Node) -> EndpointPort:
    port = node.optional_integer("port", minimum=1, maximum=65535)
    if port is None and not node.has("port"):
        # The API allows it (meaning "any port"), but a cluster needs a number to dial.
        node.report(node.at("port"), "is required: dragoman needs the port number to connect to")
    return EndpointPort(
        port=port or 0,
        name=node.string("name", format=or_empty(DNS1123_LABEL)),
        protocol=node.choice("protocol", PORT_PROTOCOLS, default="TCP"),
        app_protocol=node.string("appProtocol", format=QUALIFIED_NAME),
    )
