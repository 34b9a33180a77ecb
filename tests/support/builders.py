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


def metadata(
    name: str,
    namespace: str | None = "default",
    *,
    labels: Mapping[str, str] | None = None,
    resource_version: str = "",
    generation: int | None = None,
) -> Object:
    """An object's metadata. Without a namespace for a body the API server places by its URL;
    resourceVersion and generation as a list or watch from the API server carries them."""
    meta: Object = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if resource_version:
        meta["resourceVersion"] = resource_version
    if generation is not None:
        meta["generation"] = generation
    return meta


def service(
    name: str,
    port: Any = 80,
    target_port: int | None = None,
    *,
    namespace: str | None = "default",
    port_name: str = "http",
    app_protocol: str = "",
    service_type: str = "",
    labels: Mapping[str, str] | None = None,
    resource_version: str = "",
    ports: Sequence[Mapping[str, Any]] | None = None,
    selector: Mapping[str, str] | None = None,
) -> Object:
    """A pod-backed Service with one TCP port (targetPort: the port itself unless given), or
    with `ports` (see `service_port`) instead. `port` is typed loosely so that tests can hand
    an unreadable one to a source."""
    if ports is None:
        declared: Object = {"name": port_name, "port": port, "targetPort": target_port or port}
        if app_protocol:
            declared["appProtocol"] = app_protocol
        ports = [declared]
    spec: Object = {
        "selector": dict(selector) if selector is not None else {"app": name},
        "ports": [dict(p) for p in ports],
    }
    if service_type:
        spec["type"] = service_type
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, namespace, labels=labels, resource_version=resource_version),
        "spec": spec,
    }


def service_port(
    port: int,
    target_port: int | str | None = None,
    *,
    name: str = "",
    protocol: str = "",
    app_protocol: str = "",
) -> Object:
    """One port of a Service; only the fields given (the API server defaults the others)."""
    declared: Object = {"port": port}
    if name:
        declared["name"] = name
    if target_port is not None:
        declared["targetPort"] = target_port
    if protocol:
        declared["protocol"] = protocol
    if app_protocol:
        declared["appProtocol"] = app_protocol
    return declared


def external_service(
    name: str,
    external_name: str,
    port: int | None = 443,
    *,
    namespace: str = "default",
    annotations: Mapping[str, str] | None = None,
    app_protocol: str = "",
    port_name: str = "",
) -> Object:
    """A `type: ExternalName` Service declaring one port, or none when `port` is None."""
    spec: Object = {"type": "ExternalName", "externalName": external_name}
    if port is not None:
        declared: Object = {"port": port}
        if app_protocol:
            declared["appProtocol"] = app_protocol
        if port_name:
            declared["name"] = port_name
        spec["ports"] = [declared]
    elif app_protocol or port_name:
        raise TypeError("a port's name and appProtocol need the port")
    meta = metadata(name, namespace)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec}


def endpoint_slice(
    service_name: str,
    port: int | Mapping[str, int],
    *addresses: str,
    ready: bool = True,
    not_ready: Sequence[str] = (),
    namespace: str = "default",
    name: str = "",
) -> Object:
    """An IPv4 EndpointSlice of a Service (named `<service>-1` unless `name` says otherwise):
    `port` is the number of its one port `http`, or ports by name; `addresses` one endpoint
    each (all ready, or all not ready), then one not-ready endpoint per `not_ready` address."""
    ports = {"http": port} if isinstance(port, int) else dict(port)
    states = [(address, ready) for address in addresses]
    states += [(address, False) for address in not_ready]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata(
            name or f"{service_name}-1",
            namespace,
            labels={"kubernetes.io/service-name": service_name},
        ),
        "addressType": "IPv4",
        "ports": [{"name": port_name, "port": number} for port_name, number in ports.items()],
        "endpoints": [
            {"addresses": [address], "conditions": {"ready": state}} for address, state in states
        ],
    }


def http_route(
    name: str,
    to: str | Sequence[tuple[str, str, int]],
    port: int | None = None,
    *,
    parents: Sequence[str] = ("gw",),
    namespace: str | None = "default",
    kind: str = "HTTPRoute",
    hostnames: Sequence[str] = (),
    resource_version: str = "",
    generation: int | None = None,
    status: Mapping[str, Any] | None = None,
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
    parent_namespace = {} if namespace in ("default", None) else {"namespace": "default"}
    spec: Object = {"parentRefs": [{"name": parent, **parent_namespace} for parent in parents]}
    if hostnames:
        spec["hostnames"] = list(hostnames)
    spec["rules"] = rules
    route: Object = {
        "apiVersion": GATEWAY_V1,
        "kind": kind,
        "metadata": metadata(
            name, namespace, resource_version=resource_version, generation=generation
        ),
        "spec": spec,
    }
    if status is not None:
        route["status"] = dict(status)
    return route


def yaml_text(*documents: Mapping[str, Any]) -> str:
    """The objects as one manifest file."""
    return yaml.safe_dump_all([dict(document) for document in documents], sort_keys=False)


def typed(*documents: Mapping[str, Any]) -> list[KubeObject]:
    """The typed objects a source makes of these documents."""
    parsed = [parse_object(document) for document in documents]
    return [obj for obj in parsed if obj is not None]
