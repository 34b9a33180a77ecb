"""The shared test builders make objects dragoman reads as they mean, in both forms tests use
(API objects and manifest text)."""

from __future__ import annotations

import pytest
import yaml

from dragoman.objects import (
    BackendTLSPolicy,
    ConfigMap,
    EndpointPort,
    EndpointSlice,
    Gateway,
    GatewayClass,
    GRPCRoute,
    HTTPRoute,
    ListenerSet,
    Namespace,
    ReferenceGrant,
    Secret,
    Service,
    ServicePort,
)
from tests.support.builders import (
    allowed_routes,
    backend_ref,
    backend_tls_policy,
    config_map,
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    grpc_match,
    grpc_route,
    http_route,
    listener,
    listener_set,
    listener_tls,
    local_ref,
    match,
    namespace_object,
    parent_ref,
    reference_grant,
    rule,
    secret,
    service,
    service_port,
    tls_secret,
    typed,
    yaml_text,
)


def test_every_builder_makes_a_valid_object_of_its_kind() -> None:
    documents = [
        gateway_class(),
        gateway(),
        service("web", 80, 8080, app_protocol="kubernetes.io/h2c"),
        external_service("ext", "api.example.com", annotations={"a": "b"}, port_name="https"),
        endpoint_slice("web", 8080, "10.0.0.1", "10.0.0.2", ready=False),
        http_route("r", "web", 80, namespace="shop", kind="HTTPRoute"),
        http_route("paths", [("/a", "web", 80), ("/b", "ext", 443)]),
    ]
    parsed = typed(*documents)
    assert [type(o) for o in parsed] == [
        GatewayClass, Gateway, Service, Service, EndpointSlice, HTTPRoute, HTTPRoute
    ]  # fmt: skip
    _, _, web, ext, slice_, route, paths = parsed
    assert isinstance(web, Service) and isinstance(ext, Service)
    assert (web.ports[0].port, web.ports[0].target_port, web.ports[0].app_protocol) == (
        80,
        8080,
        "kubernetes.io/h2c",
    )
    assert ext.is_external_name and ext.external_name == "api.example.com"
    assert ext.meta.annotations == {"a": "b"} and ext.ports[0].name == "https"
    assert isinstance(slice_, EndpointSlice) and slice_.service_name == "web"
    assert isinstance(route, HTTPRoute) and route.meta.namespace == "shop"
    # A route in another namespace names its Gateway's namespace; one in default need not.
    assert [(p.name, p.namespace) for p in route.parent_refs] == [("gw", "default")]
    assert isinstance(paths, HTTPRoute) and len(paths.rules) == 2
    # The same objects as manifest text.
    assert list(yaml.safe_load_all(yaml_text(*documents))) == documents


def test_rules_with_a_stray_positional_port_are_refused() -> None:
    """Parents given where the single backend's port goes would build a different route."""
    with pytest.raises(TypeError, match="by keyword"):
        http_route("r", [("/", "web", 80)], ("gw",))  # type: ignore[arg-type]


def test_nested_parts_build_the_gateway_api_objects_they_name() -> None:
    listeners = [
        listener(),
        listener(
            "https",
            443,
            "HTTPS",
            hostname="*.example.com",
            tls={"certificateRefs": [{"name": "cert"}]},
            allowed_routes=allowed_routes(
                "Selector", selector={"matchLabels": {"a": "b"}}, kinds=["HTTPRoute"]
            ),
        ),
    ]
    documents = [
        gateway("edge", namespace="infra", listeners=listeners, generation=3),
        http_route(
            "r",
            namespace="infra",
            parents=[parent_ref("edge", section="https", port=443), "gw"],
            created="2026-01-01T00:00:00Z",
            rules=[
                rule(
                    backend_ref("v1", 8080, weight=70),
                    backend_ref("v2", 8080, namespace="web", weight=30),
                    matches=[
                        match("/a", path_type="Exact", headers={"x": "1"}, method="GET"),
                        match(
                            query_params=[{"name": "q", "type": "RegularExpression", "value": "."}]
                        ),
                    ],
                    filters=[
                        {
                            "type": "RequestHeaderModifier",
                            "requestHeaderModifier": {"remove": ["x"]},
                        }
                    ],
                )
            ],
        ),
        grpc_route(
            "g",
            rules=[
                rule(
                    backend_ref("v1", 9000), matches=[grpc_match("pkg.S", "M", headers={"v": "2"})]
                )
            ],
        ),
        reference_grant("grant", "web", from_kind="HTTPRoute", from_namespace="infra"),
        service(
            "multi",
            ports=[
                service_port(80, 8080, name="http"),
                service_port(53, name="dns", protocol="UDP"),
            ],
            selector={"app": "x"},
        ),
        backend_tls_policy(
            "p",
            "multi",
            "abc.example.com",
            section="http",
            ca_refs=[local_ref("ConfigMap", "ca")],
            subject_alt_names=[{"type": "URI", "uri": "spiffe://x/y"}],
            created="2026-01-02T00:00:00Z",
            generation=2,
        ),
        config_map("ca", {"ca.crt": "pem"}),
        secret("s", {"k": b"\x00secret"}, namespace="infra"),
        tls_secret("cert", b"chain", b"key", namespace="infra"),
        namespace_object("web", {"team": "web"}),
    ]
    parsed = typed(*documents)
    assert [type(o) for o in parsed] == [
        Gateway, HTTPRoute, GRPCRoute, ReferenceGrant, Service, BackendTLSPolicy, ConfigMap,
        Secret, Secret, Namespace,
    ]  # fmt: skip
    gw, route, grpc, grant, multi, policy, ca, opaque, cert, ns = parsed
    assert isinstance(gw, Gateway) and gw.meta.generation == 3
    assert [(x.name, x.port, x.protocol, x.hostname) for x in gw.listeners] == [
        ("http", 80, "HTTP", None),
        ("https", 443, "HTTPS", "*.example.com"),
    ]
    https = gw.listeners[1]
    assert https.tls is not None and [r.name for r in https.tls.certificate_refs] == ["cert"]
    assert https.allowed_namespaces == "Selector" and https.namespace_selector is not None
    assert https.namespace_selector.match_labels == {"a": "b"}
    assert [k.kind for k in https.allowed_kinds] == ["HTTPRoute"]
    assert isinstance(route, HTTPRoute) and route.meta.creation_timestamp == "2026-01-01T00:00:00Z"
    # A parent given by name gets the Gateway's namespace; one given in full is kept as given.
    assert [(p.name, p.namespace, p.section_name, p.port) for p in route.parent_refs] == [
        ("edge", None, "https", 443),
        ("gw", "default", None, None),
    ]
    [only] = route.rules
    assert [(b.name, b.namespace, b.weight) for b in only.backend_refs] == [
        ("v1", None, 70),
        ("v2", "web", 30),
    ]
    exact, query = only.matches
    assert (exact.path.type, exact.path.value, exact.method) == ("Exact", "/a", "GET")
    assert [(h.name, h.value) for h in exact.headers] == [("x", "1")]
    assert [(q.name, q.type) for q in query.query_params] == [("q", "RegularExpression")]
    assert [f.type for f in only.filters] == ["RequestHeaderModifier"]
    assert isinstance(grpc, GRPCRoute)
    [grpc_rule] = grpc.rules
    [grpc_matched] = grpc_rule.matches
    assert grpc_matched.method is not None
    assert (grpc_matched.method.service, grpc_matched.method.method) == ("pkg.S", "M")
    assert isinstance(grant, ReferenceGrant)
    assert [(f.group, f.kind, f.namespace) for f in grant.from_] == [
        ("gateway.networking.k8s.io", "HTTPRoute", "infra")
    ]
    assert [(t.group, t.kind, t.name) for t in grant.to] == [("", "Service", None)]
    assert isinstance(multi, Service) and multi.selector == {"app": "x"}
    assert [(p.name, p.port, p.target_port, p.protocol) for p in multi.ports] == [
        ("http", 80, 8080, "TCP"),
        ("dns", 53, None, "UDP"),
    ]
    assert isinstance(policy, BackendTLSPolicy) and policy.meta.generation == 2
    assert [(t.name, t.section_name) for t in policy.target_refs] == [("multi", "http")]
    assert [(r.kind, r.name) for r in policy.ca_certificate_refs] == [("ConfigMap", "ca")]
    assert [(n.type, n.value) for n in policy.subject_alt_names] == [("URI", "spiffe://x/y")]
    assert isinstance(ca, ConfigMap) and ca.data == {"ca.crt": "pem"}
    assert isinstance(opaque, Secret) and opaque.data == {"k": b"\x00secret"}
    assert isinstance(cert, Secret) and cert.type == "kubernetes.io/tls"
    assert cert.data == {"tls.crt": b"chain", "tls.key": b"key"}
    assert isinstance(ns, Namespace) and ns.meta.labels == {"team": "web"}


def test_contradicting_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="either a port or its listeners"):
        gateway(port=80, listeners=[listener()])
    with pytest.raises(TypeError, match="either `to` or `rules`"):
        http_route("r", "web", 80, rules=[rule(backend_ref("web", 80))])
    with pytest.raises(TypeError, match="`to` or `rules`"):
        http_route("r")


def test_services_and_slices_with_several_ports() -> None:
    web, ext, slice_ = typed(
        service(
            "web",
            ports=[
                service_port(80, "metrics", name="http"),
                service_port(53, name="dns", protocol="UDP"),
            ],
            namespace="shop",
            selector={"tier": "web"},
        ),
        external_service("ext", "api.example.com", None),
        endpoint_slice(
            "web",
            {"http": 8080, "metrics": 9090},
            "10.0.0.1",
            not_ready=["10.0.0.2"],
            namespace="shop",
            name="web-abc",
        ),
    )
    assert isinstance(web, Service) and isinstance(ext, Service)
    # Only the fields given: no targetPort means the port itself, as the API reads it.
    assert web.ports == (
        ServicePort(80, "http", target_port="metrics"),
        ServicePort(53, "dns", protocol="UDP"),
    )
    assert (web.meta.namespace, web.selector) == ("shop", {"tier": "web"})
    assert ext.is_external_name and ext.ports == ()
    assert isinstance(slice_, EndpointSlice)
    assert (slice_.meta.namespace, slice_.meta.name, slice_.service_name) == (
        "shop",
        "web-abc",
        "web",
    )
    assert slice_.ports == (EndpointPort(8080, "http"), EndpointPort(9090, "metrics"))
    assert [(e.addresses, e.ready) for e in slice_.endpoints] == [
        (("10.0.0.1",), True),
        (("10.0.0.2",), False),
    ]


def test_slices_with_zones_and_ipv6_addresses() -> None:
    [zoned, v6] = typed(
        endpoint_slice("web", 8080, "10.0.0.1", "10.0.1.1", zones={"10.0.1.1": "zone-b"}),
        endpoint_slice("web", 8080, "2001:db8::7", name="web-6", address_type="IPv6"),
    )
    assert isinstance(zoned, EndpointSlice) and isinstance(v6, EndpointSlice)
    assert [(e.addresses, e.zone) for e in zoned.endpoints] == [
        (("10.0.0.1",), ""),
        (("10.0.1.1",), "zone-b"),
    ]
    assert v6.address_type == "IPv6"
    assert [e.addresses for e in v6.endpoints] == [("2001:db8::7",)]


def test_a_port_name_without_a_port_is_refused() -> None:
    with pytest.raises(TypeError, match="need the port"):
        external_service("ext", "api.example.com", None, port_name="https")


def test_objects_built_from_the_same_parts_share_nothing() -> None:
    """A test may change an object it built; another object of the same parts stays as built."""
    web = backend_ref("web", 80)
    rules = [rule(web, matches=[match("/a")])]
    first = http_route("a", rules=rules)
    second = http_route("b", rules=rules)
    first["spec"]["rules"][0]["backendRefs"][0]["port"] = 81
    first["spec"]["rules"][0]["matches"][0]["path"]["value"] = "/changed"
    assert second["spec"]["rules"][0]["backendRefs"] == [{"name": "web", "port": 80}]
    assert second["spec"]["rules"][0]["matches"][0]["path"]["value"] == "/a"
    assert rules[0]["backendRefs"] == [web] and web == {"name": "web", "port": 80}
    http = listener(allowed_routes=allowed_routes("All"))
    one, two = gateway("one", listeners=[http]), gateway("two", listeners=[http])
    one["spec"]["listeners"][0]["allowedRoutes"]["namespaces"]["from"] = "Same"
    assert two["spec"]["listeners"][0]["allowedRoutes"] == {"namespaces": {"from": "All"}}


def test_gateway_options_listener_sets_and_class_parameters_mean_what_they_say() -> None:
    parameters = {"group": "example.com", "kind": "Config", "name": "c"}
    documents = [
        gateway_class("dragoman", parameters_ref=parameters, generation=7),
        gateway(
            "edge",
            80,
            allowed_listeners="Same",
            addresses=[{"type": "Hostname", "value": "gw.example.com"}],
            tls={"backend": {"clientCertificateRef": {"name": "client"}}},
            infrastructure={"parametersRef": parameters},
        ),
        listener_set(
            "more",
            [
                listener(
                    "tls", 443, "HTTPS", tls=listener_tls("site", {"name": "x", "namespace": "o"})
                )
            ],
            parent="edge",
            parent_namespace="default",
            created="2026-01-01T00:00:00Z",
        ),
        reference_grant(
            "g",
            "o",
            from_kind="Gateway",
            from_namespace="default",
            to_kind="Secret",
            version="v1beta1",
        ),
        external_service(
            "logs", "logs.example.com", 514, protocol="UDP", external_ips=["192.0.2.1"]
        ),
    ]
    assert documents[3]["apiVersion"] == "gateway.networking.k8s.io/v1beta1"
    cls, edge, more, grant, logs = typed(*documents)
    assert isinstance(cls, GatewayClass) and cls.meta.generation == 7
    assert cls.parameters_ref is not None and cls.parameters_ref.name == "c"
    assert isinstance(edge, Gateway) and edge.allowed_listener_sets == "Same"
    assert [(a.type, a.value) for a in edge.addresses] == [("Hostname", "gw.example.com")]
    assert edge.backend_client_certificate is not None
    assert edge.backend_client_certificate.name == "client"
    assert edge.parameters_ref is not None and edge.parameters_ref.kind == "Config"
    assert isinstance(more, ListenerSet) and more.meta.creation_timestamp.startswith("2026")
    assert (more.parent_ref.name, more.parent_ref.namespace) == ("edge", "default")
    [https] = more.listeners
    assert https.tls is not None
    assert [(r.name, r.namespace) for r in https.tls.certificate_refs] == [
        ("site", None),
        ("x", "o"),
    ]
    assert isinstance(grant, ReferenceGrant) and [t.kind for t in grant.to] == ["Secret"]
    assert isinstance(logs, Service) and logs.external_ips == ("192.0.2.1",)
    assert [(p.port, p.protocol) for p in logs.ports] == [(514, "UDP")]
    # An L4 route is a route of that kind: same parentRefs and backendRefs, no matches.
    [tcp] = typed(http_route("db", "web", 5432, kind="TCPRoute", parents=["edge"]))
    assert type(tcp).__name__ == "TCPRoute" and tcp.rules[0].backend_refs[0].port == 5432
