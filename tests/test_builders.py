"""The shared test builders make objects dragoman reads as they mean, in both forms tests use
(API objects and manifest text)."""

from __future__ import annotations

import pytest
import yaml

from dragoman.objects import EndpointSlice, Gateway, GatewayClass, HTTPRoute, Service
from tests.support.builders import (
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    http_route,
    service,
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
