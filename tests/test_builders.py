"""The shared test builders make objects dragoman reads as they mean, in both forms tests use
(API objects and manifest text)."""

from __future__ import annotations

import pytest
import yaml

from dragoman.objects import (
    EndpointPort,
    EndpointSlice,
    Gateway,
    GatewayClass,
    HTTPRoute,
    Service,
    ServicePort,
)
from tests.support.builders import (
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    http_route,
    service,
    service_port,
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


def test_a_port_name_without_a_port_is_refused() -> None:
    with pytest.raises(TypeError, match="need the port"):
        external_service("ext", "api.example.com", None, port_name="https")
