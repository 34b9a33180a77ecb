"""What the real server fills in on create and update, for the built-in kinds served here.

Custom resources get no OpenAPI schema defaulting: clients see exactly what was written.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

# Service ClusterIPs come from the usual kubeadm range, NodePorts from the default range.
SERVICE_CIDR_START = ipaddress.IPv4Address("10.96.0.10")
NODE_PORT_START = 30000


def initial_status(kind: str) -> dict[str, Any] | None:
    """The status a create starts from when the kind has a status subresource."""
    if kind == "Service":
        return {"loadBalancer": {}}
    if kind == "Namespace":
        return {"phase": "Active"}
    return None


class Defaulter:
    """Applies per-kind defaults; allocations are never reused, which is enough for tests.

    Not thread-safe: the store calls it under its own lock.
    """

    def __init__(self) -> None:
        self._cluster_ips_handed_out = 0
        self._node_ports_handed_out = 0

    def apply(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind == "Service":
            self._service(obj, old)
        elif kind == "Namespace":
            _namespace(obj)
        elif kind == "Secret":
            _secret(obj)
        elif kind == "EndpointSlice":
            _endpoint_slice(obj)

    def _allocate_cluster_ip(self) -> str:
        address = SERVICE_CIDR_START + self._cluster_ips_handed_out
        self._cluster_ips_handed_out += 1
        return str(address)

    def _allocate_node_port(self) -> int:
        port = NODE_PORT_START + self._node_ports_handed_out
        self._node_ports_handed_out += 1
        return port

    def _service(self, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        spec = obj.setdefault("spec", {})
        old_spec = (old or {}).get("spec", {})
        service_type = spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        ports = spec.get("ports") or []
        for port in ports:
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, ""):
                port["targetPort"] = port.get("port")

        if service_type == "ExternalName":
            # A DNS alias has no virtual IP; switching to ExternalName releases it.
            for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                spec.pop(field, None)
            spec.pop("internalTrafficPolicy", None)
            spec.pop("externalTrafficPolicy", None)
            for port in ports:
                port.pop("nodePort", None)
            return

        spec.setdefault("internalTrafficPolicy", "Cluster")
        # An update that leaves the allocated IP out keeps it (the server patches it back in).
        kept_ip = old_spec.get("clusterIP") if old_spec.get("type") != "ExternalName" else None
        cluster_ip = spec.get("clusterIP") or kept_ip or self._allocate_cluster_ip()
        spec["clusterIP"] = cluster_ip
        spec["clusterIPs"] = [cluster_ip]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")

        if service_type in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
            old_node_ports = {
                (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
                for p in old_spec.get("ports") or []
                if p.get("nodePort")
            }
            for port in ports:
                if not port.get("nodePort"):
                    kept = old_node_ports.get((port.get("port"), port.get("protocol")))
                    port["nodePort"] = kept or self._allocate_node_port()
            if service_type == "LoadBalancer":
                spec.setdefault("allocateLoadBalancerNodePorts", True)
        else:
            spec.pop("externalTrafficPolicy", None)
            for port in ports:
                port.pop("nodePort", None)


def _namespace(obj: dict[str, Any]) -> None:
    metadata = obj.setdefault("metadata", {})
    labels = metadata.get("labels") or {}
    labels["kubernetes.io/metadata.name"] = metadata.get("name", "")
    metadata["labels"] = labels
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])


def _secret(obj: dict[str, Any]) -> None:
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None) or {}
    if string_data:
        data = obj.get("data") or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _endpoint_slice(obj: dict[str, Any]) -> None:
    for port in obj.get("ports") or []:
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")
