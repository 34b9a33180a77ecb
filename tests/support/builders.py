"""The one set of Kubernetes object builders for tests: each returns the object as the API
server and a manifest hold it (a dict). Give it to the fake API server as it is, write it out
as YAML with `yaml_text`, or turn it into typed objects with `typed`.

Defaults are the usual test world: namespace `default`, a Gateway `gw` of class `dragoman`
with one HTTP listener, pod-backed Services selecting `app: <name>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.objects import KubeObject
from dragoman.sources.parse import parse_object

GATEWAY_V1 = "gateway.networking.k8s.io/v1"

Object = dict[str, Any]


def gateway_class(name: str = "dragoman", controller: str = DEFAULT_CONTROLLER_NAME) -> Object:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "GatewayClass",
        "metadata": {"name": name},
        "spec": {"controllerName": controller},
    }


def gateway(name: str = "gw", port: int = 8080, class_name: str = "dragoman") -> Object:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "gatewayClassName": class_name,
            "listeners": [{"name": "http", "port": port, "protocol": "HTTP"}],
        },
    }


def service(
    name: str,
    port: int = 80,
    target_port: int | None = None,
    *,
    namespace: str = "default",
    port_name: str = "http",
    app_protocol: str = "",
) -> Object:
    """A pod-backed Service with one TCP port (targetPort: the port itself unless given)."""
    declared: Object = {"name": port_name, "port": port, "targetPort": target_port or port}
    if app_protocol:
        declared["appProtocol"] = app_protocol
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"app": name}, "ports": [declared]},
    }


def external_service(
    name: str,
    external_name: str,
    port: int = 443,
    *,
    namespace: str = "default",
    annotations: Mapping[str, str] | None = None,
    app_protocol: str = "",
    port_name: str = "",
) -> Object:
    """A `type: ExternalName` Service declaring one port."""
    declared: Object = {"port": port}
    if app_protocol:
        declared["appProtocol"] = app_protocol
    if port_name:
        declared["name"] = port_name
    metadata: Object = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"type": "ExternalName", "externalName": external_name, "ports": [declared]},
    }


def endpoint_slice(service_name: str, port: int, *addresses: str, ready: bool = True) -> Object:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name}-1",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port}],
        "endpoints": [
            {"addresses": [address], "conditions": {"ready": ready}} for address in addresses
        ],
    }


def http_route(
    name: str,
    to: str | Sequence[tuple[str, str, int]],
    port: int | None = None,
    *,
    parents: Sequence[str] = ("gw",),
    namespace: str = "default",
    kind: str = "HTTPRoute",
) -> Object:
    """A route (an HTTPRoute unless `kind` says GRPCRoute) attached to Gateways of namespace
    `default`. `to`: one backend Service (with `port`), matching every request; or rules
    (path prefix, backend Service, port)."""
    if not isinstance(to, str) and port is not None:
        raise TypeError("rules name their own ports; pass `parents` by keyword")
    if isinstance(to, str):
        rules: list[Object] = [{"backendRefs": [{"name": to, "port": port}]}]
    else:
        rules = [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                "backendRefs": [{"name": backend, "port": backend_port}],
            }
            for path, backend, backend_port in to
        ]
    parent_namespace = {} if namespace == "default" else {"namespace": "default"}
    return {
        "apiVersion": GATEWAY_V1,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parentRefs": [{"name": parent, **parent_namespace} for parent in parents],
            "rules": rules,
        },
    }


def yaml_text(*documents: Mapping[str, Any]) -> str:
    """The objects as one manifest file."""
    return yaml.safe_dump_all([dict(document) for document in documents], sort_keys=False)


def typed(*documents: Mapping[str, Any]) -> list[KubeObject]:
    """The typed objects a source makes of these documents."""
    parsed = [parse_object(document) for document in documents]
    return [obj for obj in parsed if obj is not None]
