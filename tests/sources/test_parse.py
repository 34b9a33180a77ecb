"""Manifest documents → typed objects: API defaults, and every problem with its field path."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import yaml

from dragoman.objects import (
    BackendRef,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Gateway,
    GatewayListener,
    HTTPRoute,
    HTTPRouteMatch,
    HTTPRouteRule,
    ParentRef,
    PathMatch,
    Service,
    ServicePort,
)
from dragoman.sources.errors import ObjectError, SourceError
from dragoman.sources.parse import describe_object, iter_documents, parse_object

GW = "gateway.networking.k8s.io/v1"


def doc(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def problems_of(document: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ObjectError) as caught:
        parse_object(document)
    return caught.value.problems


def test_service_with_api_defaults() -> None:
    service = parse_object(
        doc("""
        apiVersion: v1
        kind: Service
        metadata: {name: web, labels: {app: web}}
        spec:
          selector: {app: web}
          ports: [{port: 80}]
        """)
    )
    assert isinstance(service, Service)
    assert service.meta.namespace == "default"
    assert service.meta.labels == {"app": "web"}
    assert service.type == "ClusterIP"
    assert service.ports == (ServicePort(port=80, protocol="TCP", target_port=None),)
    assert service.selector == {"app": "web"}


@pytest.mark.parametrize(
    ("target_port", "expected"),
    [(8080, 8080), ("http-alt", "http-alt"), (0, None), ("", None), (None, None)],
)
def test_service_target_port_number_or_name(target_port: object, expected: object) -> None:
    document = doc("{apiVersion: v1, kind: Service, metadata: {name: web}, spec: {ports: [{}]}}")
    document["spec"]["ports"][0] = {"port": 80, "targetPort": target_port}
    service = parse_object(document)
    assert isinstance(service, Service)
    assert service.ports[0].target_port == expected


def test_external_name_service_needs_no_ports() -> None:
    service = parse_object(
        doc("""
        apiVersion: v1
        kind: Service
        metadata: {name: api, namespace: shop}
        spec: {type: ExternalName, externalName: api.example.com.}
        """)
    )
    assert isinstance(service, Service)
    assert service.is_external_name
    assert service.external_name == "api.example.com."
    assert service.ports == ()
    assert service.selector is None


def test_multi_port_service_keeps_names_protocols_and_app_protocol() -> None:
    service = parse_object(
        doc("""
        apiVersion: v1
        kind: Service
        metadata: {name: web}
        spec:
          ports:
          - {name: http, port: 80, targetPort: 8080, appProtocol: kubernetes.io/h2c}
          - {name: dns, port: 53, protocol: UDP}
        """)
    )
    assert isinstance(service, Service)
    assert service.ports == (
        ServicePort(port=80, name="http", target_port=8080, app_protocol="kubernetes.io/h2c"),
        ServicePort(port=53, name="dns", protocol="UDP"),
    )


def test_endpoint_slice_with_api_defaults() -> None:
    endpoint_slice = parse_object(
        doc("""
        apiVersion: discovery.k8s.io/v1
        kind: EndpointSlice
        metadata:
          name: web-abc
          labels: {kubernetes.io/service-name: web}
        addressType: IPv4
        endpoints:
        - addresses: [10.0.0.1]
        - addresses: [10.0.0.2]
          conditions: {ready: false, terminating: true}
          zone: zone-a
        ports: [{name: http, port: 8080}]
        """)
    )
    assert isinstance(endpoint_slice, EndpointSlice)
    assert endpoint_slice.service_name == "web"
    assert endpoint_slice.endpoints == (
        Endpoint(addresses=("10.0.0.1",), ready=True, serving=True, terminating=False),
        Endpoint(
            addresses=("10.0.0.2",), ready=False, serving=False, terminating=True, zone="zone-a"
        ),
    )
    assert endpoint_slice.ports == (EndpointPort(port=8080, name="http", protocol="TCP"),)


def test_gateway_with_crd_defaults() -> None:
    gateway = parse_object(
        doc(f"""
        apiVersion: {GW}
        kind: Gateway
        metadata: {{name: edge, namespace: infra}}
        spec:
          gatewayClassName: dragoman
          listeners:
          - {{name: http, port: 80, protocol: HTTP}}
          - name: shop
            port: 8080
            protocol: HTTP
            hostname: "*.shop.example"
            allowedRoutes: {{namespaces: {{from: All}}}}
        """)
    )
    assert isinstance(gateway, Gateway)
    assert gateway.gateway_class_name == "dragoman"
    assert gateway.listeners == (
        GatewayListener(name="http", port=80, protocol="HTTP", allowed_namespaces="Same"),
        GatewayListener(
            name="shop",
            port=8080,
            protocol="HTTP",
            hostname="*.shop.example",
            allowed_namespaces="All",
        ),
    )


def test_http_route_with_crd_defaults() -> None:
    route = parse_object(
        doc(f"""
        apiVersion: {GW}
        kind: HTTPRoute
        metadata: {{name: web}}
        spec:
          parentRefs: [{{name: edge, namespace: infra, sectionName: http}}]
          hostnames: [shop.example]
          rules:
          - backendRefs: [{{name: web, port: 80}}]
          - matches:
            - {{}}
            - path: {{value: /api}}
            - path: {{type: Exact, value: /health}}
            - path: {{type: RegularExpression, value: "/v[0-9]+/.*"}}
            backendRefs: [{{name: api, namespace: shop, port: 8080, weight: 3}}]
        """)
    )
    assert isinstance(route, HTTPRoute)
    assert route.parent_refs == (
        ParentRef(
            name="edge",
            namespace="infra",
            group="gateway.networking.k8s.io",
            kind="Gateway",
            section_name="http",
        ),
    )
    assert route.hostnames == ("shop.example",)
    assert route.rules == (
        HTTPRouteRule(
            matches=(HTTPRouteMatch(PathMatch("PathPrefix", "/")),),
            backend_refs=(BackendRef(name="web", group="", kind="Service", port=80, weight=1),),
        ),
        HTTPRouteRule(
            matches=(
                HTTPRouteMatch(PathMatch("PathPrefix", "/")),
                HTTPRouteMatch(PathMatch("PathPrefix", "/api")),
                HTTPRouteMatch(PathMatch("Exact", "/health")),
                HTTPRouteMatch(PathMatch("RegularExpression", "/v[0-9]+/.*")),
            ),
            backend_refs=(BackendRef(name="api", namespace="shop", port=8080, weight=3),),
        ),
    )


def test_http_route_without_rules_gets_the_crd_default_rule() -> None:
    route = parse_object(
        doc(f"{{apiVersion: {GW}, kind: HTTPRoute, metadata: {{name: r}}, spec: {{}}}}")
    )
    assert isinstance(route, HTTPRoute)
    assert route.rules == (HTTPRouteRule(matches=(HTTPRouteMatch(),), backend_refs=()),)


@pytest.mark.parametrize("kind", ["Gateway", "HTTPRoute"])
def test_gateway_api_v1beta1_is_accepted(kind: str) -> None:
    spec = (
        "{gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP}]}"
        if kind == "Gateway"
        else "{}"
    )
    document = doc(
        f"{{apiVersion: gateway.networking.k8s.io/v1beta1, kind: {kind},"
        f" metadata: {{name: x}}, spec: {spec}}}"
    )
    parsed = parse_object(document)
    assert parsed is not None
    assert parsed.kind == kind


def test_metadata_namespace_default_and_fields() -> None:
    document = doc("""
        apiVersion: v1
        kind: Service
        metadata:
          name: web
          generation: 3
          resourceVersion: "42"
          uid: 0b5c
          creationTimestamp: 2024-05-01T10:00:00Z
          annotations: {note: hi}
        spec: {ports: [{port: 80}]}
    """)
    service = parse_object(document, default_namespace="shop")
    assert isinstance(service, Service)
    meta = service.meta
    assert (meta.namespace, meta.generation, meta.resource_version, meta.uid) == (
        "shop",
        3,
        "42",
        "0b5c",
    )
    # safe_load resolved the timestamp into a datetime; the API's string form comes back.
    assert isinstance(document["metadata"]["creationTimestamp"], datetime.datetime)
    assert meta.creation_timestamp == "2024-05-01T10:00:00Z"
    assert meta.annotations == {"note": "hi"}


@pytest.mark.parametrize(
    "document",
    [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "shop"}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "k"}},
        {
            "apiVersion": "gateway.networking.x-k8s.io/v1alpha1",
            "kind": "XMesh",
            "metadata": {"name": "c"},
        },
    ],
    ids=lambda d: f"{d['apiVersion']} {d['kind']}",
)
def test_kinds_dragoman_does_not_read_are_ignored(document: dict[str, Any]) -> None:
    assert parse_object(document) is None


SERVICE = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n"
SLICE = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1}\n"
GATEWAY = f"apiVersion: {GW}\nkind: Gateway\nmetadata: {{name: edge}}\n"
ROUTE = f"apiVersion: {GW}\nkind: HTTPRoute\nmetadata: {{name: web}}\n"
PORT_RANGE = "expected an integer from 1 to 65535"

# (id, manifest, field path, message): each manifest has exactly one problem.
ERROR_CASES = [
    ("no-kind", "apiVersion: v1\nmetadata: {name: a}", "kind", "is required"),
    ("no-api-version", "kind: Service\nmetadata: {name: a}", "apiVersion", "is required"),
    ("kind-not-string", "apiVersion: v1\nkind: 3", "kind", "expected a string, got 3"),
    (
        "endpointslice-v1beta1",
        SLICE.replace("/v1", "/v1beta1") + "addressType: IPv4",
        "apiVersion",
        'expected discovery.k8s.io/v1 for EndpointSlice, got "discovery.k8s.io/v1beta1"',
    ),
    (
        "httproute-v1alpha2",
        ROUTE.replace("/v1", "/v1alpha2") + "spec: {}",
        "apiVersion",
        "expected gateway.networking.k8s.io/v1, gateway.networking.k8s.io/v1beta1 for "
        'HTTPRoute, got "gateway.networking.k8s.io/v1alpha2"',
    ),
    (
        "service-v2",
        "apiVersion: v2\nkind: Service\nmetadata: {name: a}",
        "apiVersion",
        'expected v1 for Service, got "v2"',
    ),
    (
        "no-metadata",
        "apiVersion: v1\nkind: Service\nspec: {type: ExternalName, externalName: a}",
        "metadata",
        "is required",
    ),
    (
        "no-name",
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: a}\n"
        "spec: {type: ExternalName, externalName: a}",
        "metadata.name",
        "is required",
    ),
    (
        "name-not-dns1123",
        ROUTE.replace("name: web", "name: Web_1") + "spec: {}",
        "metadata.name",
        "expected a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and "
        'ending with a letter or digit, at most 253 characters), got "Web_1"',
    ),
    (
        "service-name-starts-with-digit",
        SERVICE.replace("name: web", "name: 1web") + "spec: {ports: [{port: 80}]}",
        "metadata.name",
        "expected a DNS-1035 label (lowercase letters, digits and '-', starting with a letter "
        'and ending with a letter or digit, at most 63 characters), got "1web"',
    ),
    (
        "namespace-not-label",
        SERVICE.replace("{name: web}", "{name: web, namespace: a.b}")
        + "spec: {ports: [{port: 80}]}",
        "metadata.namespace",
        "expected a DNS-1123 label (lowercase letters, digits and '-', starting and ending "
        'with a letter or digit, at most 63 characters), got "a.b"',
    ),
    (
        "label-value-not-string",
        SERVICE.replace("{name: web}", "{name: web, labels: {tier: 1}}")
        + "spec: {ports: [{port: 80}]}",
        "metadata.labels.tier",
        "expected a string, got 1",
    ),
    (
        "service-type-unknown",
        SERVICE + "spec: {type: Headless, ports: [{port: 80}]}",
        "spec.type",
        'expected one of "ClusterIP", "NodePort", "LoadBalancer", "ExternalName", got "Headless"',
    ),
    ("service-no-ports", SERVICE + "spec: {selector: {app: web}}", "spec.ports", "is required"),
    (
        "service-port-zero",
        SERVICE + "spec: {ports: [{port: 0}]}",
        "spec.ports[0].port",
        f"{PORT_RANGE}, got 0",
    ),
    (
        "service-port-numeric-string",
        SERVICE + "spec: {ports: [{port: '80'}]}",
        "spec.ports[0].port",
        f'{PORT_RANGE}, got "80"',
    ),
    (
        "service-port-bool",
        SERVICE + "spec: {ports: [{port: true}]}",
        "spec.ports[0].port",
        f"{PORT_RANGE}, got true",
    ),
    (
        "service-port-missing",
        SERVICE + "spec: {ports: [{name: http}]}",
        "spec.ports[0].port",
        "is required",
    ),
    (
        "service-protocol-unknown",
        SERVICE + "spec: {ports: [{port: 80, protocol: HTTP}]}",
        "spec.ports[0].protocol",
        'expected one of "TCP", "UDP", "SCTP", got "HTTP"',
    ),
    (
        "service-target-port-numeric-string",
        SERVICE + "spec: {ports: [{port: 80, targetPort: '8080'}]}",
        "spec.ports[0].targetPort",
        "expected an integer from 1 to 65535 or a port name (at most 15 lowercase letters, "
        "digits and '-', with at least one letter, no '-' at either end and no '--'), "
        'got "8080"',
    ),
    (
        "service-second-port-unnamed",
        SERVICE + "spec: {ports: [{name: a, port: 80}, {port: 81}]}",
        "spec.ports[1].name",
        "is required when a Service has more than one port",
    ),
    (
        "service-duplicate-port",
        SERVICE + "spec: {ports: [{name: a, port: 80}, {name: b, port: 80}]}",
        "spec.ports[1].port",
        'duplicate port and protocol "80/TCP"',
    ),
    (
        "external-name-missing",
        SERVICE + "spec: {type: ExternalName}",
        "spec.externalName",
        "is required",
    ),
    (
        "ports-not-list",
        SERVICE + "spec: {ports: {port: 80}}",
        "spec.ports",
        "expected a list, got a mapping",
    ),
    ("slice-no-address-type", SLICE + "endpoints: []", "addressType", "is required"),
    (
        "slice-address-type-unknown",
        SLICE + "addressType: IP",
        "addressType",
        'expected one of "IPv4", "IPv6", "FQDN", got "IP"',
    ),
    (
        "slice-bad-ipv4",
        SLICE + "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1, 10.0.0.300]}]",
        "endpoints[0].addresses[1]",
        'expected an IPv4 address, got "10.0.0.300"',
    ),
    (
        "slice-ipv6-in-ipv4-slice",
        SLICE + "addressType: IPv4\nendpoints: [{addresses: ['::1']}]",
        "endpoints[0].addresses[0]",
        'expected an IPv4 address, got "::1"',
    ),
    (
        "slice-no-addresses",
        SLICE + "addressType: IPv4\nendpoints: [{zone: a}]",
        "endpoints[0].addresses",
        "is required",
    ),
    (
        "slice-ready-not-bool",
        SLICE
        + "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1], conditions: {ready: 'yes'}}]",
        "endpoints[0].conditions.ready",
        'expected true or false, got "yes"',
    ),
    (
        "slice-port-out-of-range",
        SLICE + "addressType: IPv4\nports: [{port: 65536}]",
        "ports[0].port",
        f"{PORT_RANGE}, got 65536",
    ),
    (
        "slice-port-missing",
        SLICE + "addressType: IPv4\nports: [{name: http}]",
        "ports[0].port",
        "is required: dragoman needs the port number to connect to",
    ),
    ("gateway-no-spec", GATEWAY, "spec", "is required"),
    (
        "gateway-no-class",
        GATEWAY + "spec: {listeners: [{name: l, port: 80, protocol: HTTP}]}",
        "spec.gatewayClassName",
        "is required",
    ),
    (
        "gateway-no-listeners",
        GATEWAY + "spec: {gatewayClassName: c}",
        "spec.listeners",
        "is required",
    ),
    (
        "gateway-empty-listeners",
        GATEWAY + "spec: {gatewayClassName: c, listeners: []}",
        "spec.listeners",
        "must have at least 1 item(s)",
    ),
    (
        "listener-port-out-of-range",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 0, protocol: HTTP}]}",
        "spec.listeners[0].port",
        f"{PORT_RANGE}, got 0",
    ),
    (
        "listener-no-protocol",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80}]}",
        "spec.listeners[0].protocol",
        "is required",
    ),
    (
        "listener-allowed-routes-selector-missing",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP,"
        " allowedRoutes: {namespaces: {from: Selector}}}]}",
        "spec.listeners[0].allowedRoutes.namespaces.selector",
        'is required when from is "Selector"',
    ),
    (
        "listener-allowed-routes-unknown",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP,"
        " allowedRoutes: {namespaces: {from: Everywhere}}}]}",
        "spec.listeners[0].allowedRoutes.namespaces.from",
        'expected one of "All", "Selector", "Same", got "Everywhere"',
    ),
    (
        "listener-route-kind-without-kind",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP,"
        " allowedRoutes: {kinds: [{group: example.com}]}}]}",
        "spec.listeners[0].allowedRoutes.kinds[0].kind",
        "is required",
    ),
    (
        "listener-bad-hostname",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP,"
        " hostname: Shop.Example}]}",
        "spec.listeners[0].hostname",
        'expected a hostname such as "example.com" or "*.example.com" (lowercase, at most 253 '
        'characters), got "Shop.Example"',
    ),
    (
        "listener-duplicate-name",
        GATEWAY + "spec: {gatewayClassName: c, listeners: [{name: l, port: 80, protocol: HTTP},"
        " {name: l, port: 81, protocol: HTTP}]}",
        "spec.listeners[1].name",
        'duplicate listener name "l"',
    ),
    ("route-no-spec", ROUTE, "spec", "is required"),
    (
        "route-backend-port-string",
        ROUTE + "spec: {rules: [{backendRefs: [{name: a, port: 80}, {name: b, port: http}]}]}",
        "spec.rules[0].backendRefs[1].port",
        f'{PORT_RANGE}, got "http"',
    ),
    (
        "route-backend-service-without-port",
        ROUTE + "spec: {rules: [{backendRefs: [{name: a}]}]}",
        "spec.rules[0].backendRefs[0].port",
        "is required when the backend is a Service",
    ),
    (
        "route-backend-no-name",
        ROUTE + "spec: {rules: [{backendRefs: [{port: 80}]}]}",
        "spec.rules[0].backendRefs[0].name",
        "is required",
    ),
    (
        "route-backend-weight-negative",
        ROUTE + "spec: {rules: [{backendRefs: [{name: a, port: 80, weight: -1}]}]}",
        "spec.rules[0].backendRefs[0].weight",
        "expected an integer from 0 to 1000000, got -1",
    ),
    (
        "route-path-type-unknown",
        ROUTE + "spec: {rules: [{matches: [{path: {type: Prefix, value: /}}]}]}",
        "spec.rules[0].matches[0].path.type",
        'expected one of "Exact", "PathPrefix", "RegularExpression", got "Prefix"',
    ),
    (
        "route-path-relative",
        ROUTE + "spec: {rules: [{matches: [{path: {value: api}}]}]}",
        "spec.rules[0].matches[0].path.value",
        "must be an absolute path starting with '/', got \"api\"",
    ),
    (
        "route-path-double-slash",
        ROUTE + "spec: {rules: [{matches: [{path: {type: Exact, value: /a//b}}]}]}",
        "spec.rules[0].matches[0].path.value",
        "must not contain '//', got \"/a//b\"",
    ),
    (
        "route-header-match-without-value",
        ROUTE + "spec: {rules: [{matches: [{headers: [{name: x}]}]}]}",
        "spec.rules[0].matches[0].headers[0].value",
        "is required",
    ),
    (
        "route-redirect-without-config",
        ROUTE + "spec: {rules: [{filters: [{type: RequestRedirect}]}]}",
        "spec.rules[0].filters[0].requestRedirect",
        "is required when the filter type is RequestRedirect",
    ),
    (
        "route-empty-rules",
        ROUTE + "spec: {rules: []}",
        "spec.rules",
        "must have at least 1 item(s)",
    ),
    (
        "route-parent-ref-port",
        ROUTE + "spec: {parentRefs: [{name: gw, port: 99999}]}",
        "spec.parentRefs[0].port",
        f"{PORT_RANGE}, got 99999",
    ),
    (
        "route-hostname-invalid",
        ROUTE + "spec: {hostnames: ['shop example']}",
        "spec.hostnames[0]",
        'expected a hostname such as "example.com" or "*.example.com" (lowercase, at most 253 '
        'characters), got "shop example"',
    ),
]


@pytest.mark.parametrize(
    ("manifest", "field", "message"),
    [case[1:] for case in ERROR_CASES],
    ids=[case[0] for case in ERROR_CASES],
)
def test_each_problem_names_its_field(manifest: str, field: str, message: str) -> None:
    assert problems_of(doc(manifest)) == [(field, message)]


def test_every_problem_of_an_object_is_reported_at_once() -> None:
    with pytest.raises(ObjectError) as caught:
        parse_object(
            doc(f"""
            apiVersion: {GW}
            kind: HTTPRoute
            metadata: {{name: web, namespace: shop}}
            spec:
              parentRefs: [{{name: gw, port: 0}}]
              rules:
              - matches: [{{path: {{type: Regex}}}}]
                backendRefs: [{{name: a, port: "80"}}, {{name: b, port: 80, weight: 2.5}}]
            """)
        )
    error = caught.value
    assert error.object == "HTTPRoute/shop/web"
    assert [field for field, _ in error.problems] == [
        "spec.parentRefs[0].port",
        "spec.rules[0].matches[0].path.type",
        "spec.rules[0].backendRefs[0].port",
        "spec.rules[0].backendRefs[1].weight",
    ]


def test_object_error_names_the_object_when_it_can() -> None:
    document = doc(SERVICE.replace("{name: web}", "{name: web, namespace: shop}") + "spec: {}")
    with pytest.raises(ObjectError) as caught:
        parse_object(document)
    assert caught.value.object == "Service/shop/web"
    assert describe_object({"kind": "Service", "metadata": {}}) == ""
    assert describe_object({"kind": "Service", "metadata": {"name": "a"}}, "ns") == "Service/ns/a"


def test_source_error_reads_as_one_line() -> None:
    error = SourceError(
        "routes.yaml#2",
        "HTTPRoute/default/web",
        "spec.rules[0].backendRefs[1].port",
        'expected an integer from 1 to 65535, got "http"',
    )
    assert str(error) == (
        "routes.yaml#2 HTTPRoute/default/web: spec.rules[0].backendRefs[1].port: "
        'expected an integer from 1 to 65535, got "http"'
    )
    assert str(SourceError("a.yaml", "", "", "invalid YAML")) == "a.yaml: invalid YAML"
    assert str(SourceError("a.yaml#1", "", "kind", "is required")) == "a.yaml#1: kind: is required"


def test_object_error_converts_to_source_errors() -> None:
    error = ObjectError([("spec", "is required"), ("metadata.name", "is required")], "Gateway/a/b")
    assert error.source_errors("gw.yaml#1") == [
        SourceError("gw.yaml#1", "Gateway/a/b", "spec", "is required"),
        SourceError("gw.yaml#1", "Gateway/a/b", "metadata.name", "is required"),
    ]
    assert str(error) == "spec: is required; metadata.name: is required"


def test_plain_object_is_its_own_document() -> None:
    document = doc(SERVICE + "spec: {ports: [{port: 80}]}")
    assert list(iter_documents(document)) == [("", document)]


def test_v1_list_yields_each_item_with_its_location() -> None:
    first = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}
    second = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}
    document = {"apiVersion": "v1", "kind": "List", "items": [first, second]}
    assert list(iter_documents(document)) == [("items[0]", first), ("items[1]", second)]


def test_typed_list_items_inherit_api_version_and_kind() -> None:
    document = {
        "apiVersion": "v1",
        "kind": "ServiceList",
        "items": [{"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}],
    }
    [(where, item)] = iter_documents(document)
    assert where == "items[0]"
    service = parse_object(item)
    assert isinstance(service, Service)
    assert service.meta.name == "a"


def test_list_with_bad_items_is_an_error() -> None:
    with pytest.raises(ObjectError) as caught:
        iter_documents({"apiVersion": "v1", "kind": "List", "items": "nope"})
    assert caught.value.problems == [("items", 'expected a list, got "nope"')]


def test_nested_list_is_an_error() -> None:
    with pytest.raises(ObjectError) as caught:
        parse_object({"apiVersion": "v1", "kind": "List", "items": []})
    assert caught.value.problems == [("kind", "a List cannot be nested inside another List")]
