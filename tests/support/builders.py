"""The one set of Kubernetes object builders for tests: each returns the object as the API
server and a manifest hold it (a dict). Give it to the fake API server as it is, write it out
as YAML with `yaml_text`, or turn it into typed objects with `typed`.

Defaults are the usual test world: namespace `default`, a Gateway `gw` of class `dragoman`
with one HTTP listener, pod-backed Services selecting `app: <name>`. The nested parts (a
listener, a parentRef, a backendRef, a rule, a match) come from small helpers returning dicts;
a plain dict does as well wherever one of those goes.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.objects import KubeObject
from dragoman.sources.parse import parse_object

GATEWAY_GROUP = "gateway.networking.k8s.io"
GATEWAY_V1 = f"{GATEWAY_GROUP}/v1"

Object = dict[str, Any]


def _own(part: Mapping[str, Any]) -> Object:
    """A deep copy of a part handed in: objects built from the same parts share nothing that
    a test might change in one of them."""
    return copy.deepcopy(dict(part))


def _given(**fields: Any) -> Object:
    """The fields that were given (not None), in the order named: the optional part of an
    object, left out of it as the API server leaves out what nobody set."""
    return {name: value for name, value in fields.items() if value is not None}


def gateway_class(
    name: str = "dragoman",
    controller: str = DEFAULT_CONTROLLER_NAME,
    *,
    parameters_ref: Mapping[str, Any] | None = None,
    generation: int | None = None,
) -> Object:
    spec: Object = {"controllerName": controller}
    if parameters_ref is not None:
        spec["parametersRef"] = _own(parameters_ref)
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "GatewayClass",
        "metadata": metadata(name, None, generation=generation),
        "spec": spec,
    }


def gateway(
    name: str = "gw",
    port: int | None = None,
    class_name: str = "dragoman",
    *,
    namespace: str = "default",
    listeners: Sequence[Object] | None = None,
    generation: int | None = None,
    allowed_listeners: str | Mapping[str, Any] | None = None,
    addresses: Sequence[Mapping[str, Any]] | None = None,
    tls: Mapping[str, Any] | None = None,
    infrastructure: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
) -> Object:
    """A Gateway with one HTTP listener `http` on `port` (8080 unless given), or with
    `listeners` (see `listener`). `allowed_listeners`: the namespaces whose ListenerSets may
    attach (`from`: Same, All, None, or the namespaces dict in full); `addresses`, `tls` (the
    Gateway's own, for backends) and `infrastructure` as the API spells them; `status` as
    the API server holds it."""
    if listeners is not None and port is not None:
        raise TypeError("give the Gateway either a port or its listeners")
    if listeners is None:
        listeners = [listener(port=8080 if port is None else port)]
    spec: Object = {"gatewayClassName": class_name}
    if allowed_listeners is not None:
        namespaces = (
            {"from": allowed_listeners}
            if isinstance(allowed_listeners, str)
            else _own(allowed_listeners)
        )
        spec["allowedListeners"] = {"namespaces": namespaces}
    if addresses is not None:
        spec["addresses"] = [_own(a) for a in addresses]
    spec["listeners"] = [_own(x) for x in listeners]
    if tls is not None:
        spec["tls"] = _own(tls)
    if infrastructure is not None:
        spec["infrastructure"] = _own(infrastructure)
    found: Object = {
        "apiVersion": GATEWAY_V1,
        "kind": "Gateway",
        "metadata": metadata(name, namespace, generation=generation),
        "spec": spec,
    }
    if status is not None:
        found["status"] = _own(status)
    return found


def listener_set(
    name: str,
    listeners: Sequence[Object],
    *,
    parent: str = "gw",
    parent_namespace: str | None = None,
    namespace: str = "default",
    generation: int | None = None,
    created: str = "",
) -> Object:
    """A ListenerSet adding `listeners` (see `listener`) to the Gateway `parent`."""
    ref: Object = {"name": parent}
    if parent_namespace is not None:
        ref["namespace"] = parent_namespace
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "ListenerSet",
        "metadata": metadata(name, namespace, generation=generation, created=created),
        "spec": {"parentRef": ref, "listeners": [_own(x) for x in listeners]},
    }


def listener(
    name: str = "http",
    port: int = 80,
    protocol: str = "HTTP",
    *,
    hostname: str | None = None,
    tls: Mapping[str, Any] | None = None,
    allowed_routes: Mapping[str, Any] | None = None,
) -> Object:
    """A Gateway listener; `tls` and `allowed_routes` as the API spells them (see
    `allowed_routes`)."""
    found: Object = {"name": name, "port": port, "protocol": protocol}
    if hostname is not None:
        found["hostname"] = hostname
    if tls is not None:
        found["tls"] = _own(tls)
    if allowed_routes is not None:
        found["allowedRoutes"] = _own(allowed_routes)
    return found


def listener_tls(*certificates: str | Mapping[str, Any], mode: str | None = None) -> Object:
    """A listener's tls: its certificateRefs (Secret names of the Gateway's namespace, or refs
    in full), and the mode when given (Terminate is the API's default)."""
    found: Object = {}
    if mode is not None:
        found["mode"] = mode
    if certificates:
        found["certificateRefs"] = [
            {"name": c} if isinstance(c, str) else _own(c) for c in certificates
        ]
    return found


def allowed_routes(
    namespaces: str | None = None,
    *,
    selector: Mapping[str, Any] | None = None,
    kinds: Sequence[str | Mapping[str, Any]] = (),
) -> Object:
    """A listener's allowedRoutes: namespaces `from` (Same, All, Selector with `selector`:
    matchLabels/matchExpressions) and route kinds (a name, or a dict with its group)."""
    found: Object = {}
    if kinds:
        found["kinds"] = [{"kind": k} if isinstance(k, str) else _own(k) for k in kinds]
    if namespaces is not None:
        found["namespaces"] = {"from": namespaces}
        if selector is not None:
            found["namespaces"]["selector"] = _own(selector)
    return found


def metadata(
    name: str,
    namespace: str | None = "default",
    *,
    labels: Mapping[str, str] | None = None,
    resource_version: str = "",
    generation: int | None = None,
    created: str = "",
) -> Object:
    """An object's metadata. Without a namespace for a body the API server places by its URL;
    resourceVersion, generation and creationTimestamp (`created`) as a list or watch from the
    API server carries them."""
    meta: Object = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    if resource_version:
        meta["resourceVersion"] = resource_version
    if generation is not None:
        meta["generation"] = generation
    if created:
        meta["creationTimestamp"] = created
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
    spec: Object = {}
    if selector is None:
        spec["selector"] = {"app": name}
    elif selector:  # an empty selector is no selector: a Service without pods
        spec["selector"] = dict(selector)
    spec["ports"] = [_own(p) for p in ports]
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
    protocol: str = "",
    external_ips: Sequence[str] = (),
) -> Object:
    """A `type: ExternalName` Service declaring one port (TCP unless `protocol` says UDP), or
    none when `port` is None; `external_ips`: its spec.externalIPs."""
    spec: Object = {"type": "ExternalName", "externalName": external_name}
    if external_ips:
        spec["externalIPs"] = list(external_ips)
    if port is not None:
        declared: Object = {"port": port}
        if protocol:
            declared["protocol"] = protocol
        if app_protocol:
            declared["appProtocol"] = app_protocol
        if port_name:
            declared["name"] = port_name
        spec["ports"] = [declared]
    elif app_protocol or port_name or protocol:
        raise TypeError("a port's name, protocol and appProtocol need the port")
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
    address_type: str = "IPv4",
    zones: Mapping[str, str] | None = None,
) -> Object:
    """An EndpointSlice of a Service (named `<service>-1` unless `name` says otherwise):
    `port` is the number of its one port `http`, or ports by name; `addresses` one endpoint
    each (all ready, or all not ready), then one not-ready endpoint per `not_ready` address.
    `zones`: the zone of an endpoint, by its address (none for an address not listed)."""
    ports = {"http": port} if isinstance(port, int) else dict(port)
    states = [(address, ready) for address in addresses]
    states += [(address, False) for address in not_ready]
    endpoints: list[Object] = []
    for address, state in states:
        endpoint: Object = {"addresses": [address], "conditions": {"ready": state}}
        if zones and zones.get(address):
            endpoint["zone"] = zones[address]
        endpoints.append(endpoint)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": metadata(
            name or f"{service_name}-1",
            namespace,
            labels={"kubernetes.io/service-name": service_name},
        ),
        "addressType": address_type,
        "ports": [{"name": port_name, "port": number} for port_name, number in ports.items()],
        "endpoints": endpoints,
    }


def http_route(
    name: str,
    to: str | Sequence[tuple[str, str, int]] | None = None,
    port: int | None = None,
    *,
    rules: Sequence[Mapping[str, Any]] | None = None,
    parents: Sequence[str | Mapping[str, Any]] = ("gw",),
    namespace: str | None = "default",
    kind: str = "HTTPRoute",
    hostnames: Sequence[str] = (),
    created: str = "",
    resource_version: str = "",
    generation: int | None = None,
    status: Mapping[str, Any] | None = None,
) -> Object:
    """A route (an HTTPRoute unless `kind` says GRPCRoute, TCPRoute, TLSRoute or UDPRoute:
    their rules have the same backendRefs, without matches). `to`: one backend Service (with
    `port`), matching every request; or rules (path prefix, backend Service, port); or `rules`
    in full (see `rule`). `parents`: Gateway names in namespace `default`, or parentRefs (see
    `parent_ref`)."""
    if to is not None and rules is not None:
        raise TypeError("give the route either `to` or `rules`")
    if not isinstance(to, str) and port is not None:
        raise TypeError("rules name their own ports; pass `parents` by keyword")
    if isinstance(to, str):
        rules = [rule(backend_ref(to, port))]
    elif to is not None:
        rules = [
            rule(backend_ref(backend, backend_port), matches=[match(path)])
            for path, backend, backend_port in to
        ]
    elif rules is None:
        raise TypeError("give the route `to` or `rules`")
    spec: Object = {}
    if parents:
        spec["parentRefs"] = [_parent(parent, namespace) for parent in parents]
    if hostnames:
        spec["hostnames"] = list(hostnames)
    spec["rules"] = [_own(r) for r in rules]
    route: Object = {
        "apiVersion": GATEWAY_V1,
        "kind": kind,
        "metadata": metadata(
            name,
            namespace,
            resource_version=resource_version,
            generation=generation,
            created=created,
        ),
        "spec": spec,
    }
    if status is not None:
        route["status"] = _own(status)
    return route


def grpc_route(name: str, to: str | None = None, port: int | None = None, **options: Any) -> Object:
    """A GRPCRoute: `http_route` of that kind (its matches from `grpc_match`)."""
    return http_route(name, to, port, kind="GRPCRoute", **options)


def _parent(parent: str | Mapping[str, Any], route_namespace: str | None) -> Object:
    if not isinstance(parent, str):
        return _own(parent)
    # A route in another namespace names its Gateway's namespace; one in default need not.
    return parent_ref(parent, namespace=None if route_namespace in ("default", None) else "default")


def parent_ref(
    name: str = "gw",
    *,
    namespace: str | None = None,
    section: str | None = None,
    port: int | None = None,
    kind: str | None = None,
    group: str | None = None,
) -> Object:
    """A route's parentRef (a Gateway of the route's namespace unless told otherwise)."""
    return {
        "name": name,
        **_given(group=group, kind=kind, namespace=namespace, sectionName=section, port=port),
    }


def backend_ref(
    name: str,
    port: int | None = None,
    *,
    namespace: str | None = None,
    weight: int | None = None,
    kind: str | None = None,
    group: str | None = None,
) -> Object:
    """A backendRef (a Service of the route's namespace unless told otherwise)."""
    return {
        "name": name,
        **_given(group=group, kind=kind, namespace=namespace, port=port, weight=weight),
    }


def rule(
    *backends: Mapping[str, Any],
    matches: Sequence[Mapping[str, Any]] | None = None,
    filters: Sequence[Mapping[str, Any]] | None = None,
) -> Object:
    """A route rule sending to `backends` (see `backend_ref`); every request unless `matches`
    (see `match`, `grpc_match`)."""
    found: Object = {}
    if matches is not None:
        found["matches"] = [_own(m) for m in matches]
    if filters is not None:
        found["filters"] = [_own(f) for f in filters]
    found["backendRefs"] = [_own(b) for b in backends]
    return found


NameValues = Mapping[str, str] | Sequence[Mapping[str, Any]]


def _name_values(items: NameValues) -> list[Object]:
    """Header or query parameter matches: a mapping of exact values, or the entries in full
    (for another match type)."""
    if isinstance(items, Mapping):
        return [{"name": name, "value": value} for name, value in items.items()]
    return [_own(item) for item in items]


def match(
    path: str | None = None,
    *,
    path_type: str = "PathPrefix",
    headers: NameValues | None = None,
    query_params: NameValues | None = None,
    method: str | None = None,
) -> Object:
    """An HTTPRoute match: path (a prefix unless `path_type` says otherwise), headers, query
    parameters, method."""
    found: Object = {}
    if path is not None:
        found["path"] = {"type": path_type, "value": path}
    if headers is not None:
        found["headers"] = _name_values(headers)
    if query_params is not None:
        found["queryParams"] = _name_values(query_params)
    if method is not None:
        found["method"] = method
    return found


def grpc_match(
    service: str | None = None,
    method: str | None = None,
    *,
    match_type: str | None = None,
    headers: NameValues | None = None,
) -> Object:
    """A GRPCRoute match: gRPC service and method (Exact unless `match_type` says otherwise),
    headers."""
    found: Object = {}
    grpc_method = _given(type=match_type, service=service, method=method)
    if grpc_method:
        found["method"] = grpc_method
    if headers is not None:
        found["headers"] = _name_values(headers)
    return found


def local_ref(kind: str, name: str, group: str = "") -> Object:
    """A reference to an object in the referrer's namespace (a certificate, a CA bundle)."""
    return {"group": group, "kind": kind, "name": name}


def _group_of(kind: str) -> str:
    return "" if kind in ("Service", "Secret", "ConfigMap", "Namespace") else GATEWAY_GROUP


def reference_grant(
    name: str,
    namespace: str,
    *,
    from_kind: str,
    from_namespace: str,
    to_kind: str = "Service",
    to_name: str | None = None,
    from_group: str | None = None,
    to_group: str | None = None,
    version: str = "v1",
) -> Object:
    """A ReferenceGrant in `namespace` letting `from_kind` objects of `from_namespace` refer to
    `to_kind` objects here (those named `to_name`, or all). Groups follow the kinds unless
    given: core for Service, Secret, ConfigMap; the Gateway API's for the others. `version`:
    of the Gateway API (v1beta1 is still served)."""
    to: Object = {"group": _group_of(to_kind) if to_group is None else to_group, "kind": to_kind}
    if to_name is not None:
        to["name"] = to_name
    source = {
        "group": _group_of(from_kind) if from_group is None else from_group,
        "kind": from_kind,
        "namespace": from_namespace,
    }
    return {
        "apiVersion": f"{GATEWAY_GROUP}/{version}",
        "kind": "ReferenceGrant",
        "metadata": metadata(name, namespace),
        "spec": {"from": [source], "to": [to]},
    }


def backend_tls_policy(
    name: str,
    service_name: str,
    hostname: str,
    *,
    namespace: str = "default",
    section: str | None = None,
    ca_refs: Sequence[Mapping[str, Any]] = (),
    well_known: str | None = None,
    subject_alt_names: Sequence[Mapping[str, Any]] = (),
    created: str = "",
    generation: int | None = None,
    options: Mapping[str, str] | None = None,
) -> Object:
    """A BackendTLSPolicy for a Service (one port of it with `section`): verify `hostname`
    against the CAs of `ca_refs` (see `local_ref`) or the `well_known` ones; `options` as
    spec.options."""
    target: Object = {"group": "", "kind": "Service", "name": service_name}
    if section is not None:
        target["sectionName"] = section
    validation: Object = {"hostname": hostname}
    if ca_refs:
        validation["caCertificateRefs"] = [_own(r) for r in ca_refs]
    if well_known is not None:
        validation["wellKnownCACertificates"] = well_known
    if subject_alt_names:
        validation["subjectAltNames"] = [_own(n) for n in subject_alt_names]
    return {
        "apiVersion": GATEWAY_V1,
        "kind": "BackendTLSPolicy",
        "metadata": metadata(name, namespace, generation=generation, created=created),
        "spec": {
            "targetRefs": [target],
            "validation": validation,
            **({"options": dict(options)} if options is not None else {}),
        },
    }


def xbackend(
    name: str,
    hostname: str,
    port: int = 443,
    *,
    namespace: str = "default",
    protocol: str | None = None,
    tls: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    generation: int | None = None,
    port_name: str | None = None,
) -> Object:
    """An XBackend (gateway.networking.x-k8s.io/v1alpha1) of type ExternalHostname; `tls` as
    the CRD's spec.tls (mode, clientCertificateRef, validation)."""
    spec: Object = {
        "type": "ExternalHostname",
        "externalHostname": {"hostname": hostname},
        "port": {"port": port} if port_name is None else {"name": port_name, "port": port},
    }
    if protocol is not None:
        spec["protocol"] = protocol
    if tls is not None:
        spec["tls"] = _own(tls)
    return {
        "apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
        "kind": "XBackend",
        "metadata": {
            **metadata(name, namespace, generation=generation),
            **({"annotations": dict(annotations)} if annotations else {}),
        },
        "spec": spec,
    }


def xbackend_ref(name: str, *, namespace: str | None = None) -> Object:
    """A backendRef to an XBackend."""
    return backend_ref(
        name, namespace=namespace, kind="XBackend", group="gateway.networking.x-k8s.io"
    )


def backend_policy(
    name: str,
    *services: str,
    spec: Mapping[str, Any] | None = None,
    namespace: str = "default",
    created: str = "",
    generation: int | None = None,
) -> Object:
    """A BackendPolicy (dragoman.dev/v1alpha1) targeting `services` with the rest of `spec`."""
    targets = [{"group": "", "kind": "Service", "name": service} for service in services]
    return {
        "apiVersion": "dragoman.dev/v1alpha1",
        "kind": "BackendPolicy",
        "metadata": metadata(name, namespace, generation=generation, created=created),
        "spec": {"targetRefs": targets, **_own(spec or {})},
    }


def xbackend_traffic_policy(
    name: str,
    *targets: str,
    spec: Mapping[str, Any] | None = None,
    namespace: str = "default",
    created: str = "",
    generation: int | None = None,
) -> Object:
    """An XBackendTrafficPolicy (gateway.networking.x-k8s.io/v1alpha1) targeting Services by
    name (`xbackend/NAME`: an XBackend), with the rest of `spec`."""
    refs = [
        {"group": "gateway.networking.x-k8s.io", "kind": "XBackend", "name": t.split("/")[1]}
        if t.startswith("xbackend/")
        else {"group": "", "kind": "Service", "name": t}
        for t in targets
    ]
    return {
        "apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
        "kind": "XBackendTrafficPolicy",
        "metadata": metadata(name, namespace, generation=generation, created=created),
        "spec": {"targetRefs": refs, **_own(spec or {})},
    }


def secret(
    name: str,
    data: Mapping[str, bytes],
    *,
    namespace: str = "default",
    secret_type: str = "",
) -> Object:
    """A Secret holding `data` (encoded here, as the API server holds it)."""
    found: Object = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata(name, namespace)}
    if secret_type:
        found["type"] = secret_type
    found["data"] = {key: base64.b64encode(value).decode() for key, value in data.items()}
    return found


def tls_secret(
    name: str, certificate: bytes, private_key: bytes, *, namespace: str = "default"
) -> Object:
    """A kubernetes.io/tls Secret: a certificate chain and its key, PEM."""
    return secret(
        name,
        {"tls.crt": certificate, "tls.key": private_key},
        namespace=namespace,
        secret_type="kubernetes.io/tls",
    )


def config_map(name: str, data: Mapping[str, str], *, namespace: str = "default") -> Object:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(name, namespace),
        "data": dict(data),
    }


def namespace_object(name: str, labels: Mapping[str, str] | None = None) -> Object:
    """A Namespace (with the labels a listener's selector reads)."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata(name, None, labels=labels),
    }


def yaml_text(*documents: Mapping[str, Any], flow: bool = False) -> str:
    """The objects as one manifest file. `flow`: each top-level field on one line, its value in
    flow style (`metadata: {name: web}`), for tests that count a file's lines."""
    if flow:
        return "---\n".join(_flow_lines(document) for document in documents)
    return yaml.safe_dump_all([dict(document) for document in documents], sort_keys=False)


def _flow_lines(document: Mapping[str, Any]) -> str:
    lines = []
    for key, value in document.items():
        field = yaml.safe_dump(
            {key: value}, default_flow_style=True, sort_keys=False, width=1 << 30
        )
        lines.append(field.strip().removeprefix("{").removesuffix("}") + "\n")
    return "".join(lines)


def typed(*documents: Mapping[str, Any]) -> list[KubeObject]:
    """The typed objects a source makes of these documents."""
    parsed = [parse_object(document) for document in documents]
    return [obj for obj in parsed if obj is not None]
