"""A small store and the route entries a build makes of it, for the tests of the builder's
parts: web (pod-backed) and api (an external name) Services, an HTTPRoute (to both) and a
GRPCRoute (to api) sharing the listener http (the GRPCRoute keeps it), and an HTTPRoute in
namespace other reaching web by a grant (refused by the listener)."""

from __future__ import annotations

from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.incremental.entries import RouteEntry
from dragoman.dag.options import BuildOptions
from dragoman.objects import ObjectKey
from dragoman.store import Store
from tests.support.builders import (
    Object,
    backend_ref,
    external_service,
    gateway,
    gateway_class,
    grpc_route,
    http_route,
    listener,
    parent_ref,
    reference_grant,
    rule,
    service,
    typed,
)

WEB = ("default", "web")
HTTP = ObjectKey("HTTPRoute", "default", "h")
GRPC = ObjectKey("GRPCRoute", "default", "g")
OTHER = ObjectKey("HTTPRoute", "other", "o")


def store(*more: Object) -> Store:
    """The store, with `more` objects."""
    return Store.from_objects(
        typed(
            gateway_class(),
            gateway(listeners=[listener("http", 8080)]),
            service("web", 80),
            external_service("api", "api.example.net", 80),
            http_route("h", [("/", "web", 80), ("/api", "api", 80)], hostnames=["a.test"]),
            grpc_route("g", "api", 80),
            http_route(
                "o",
                rules=[rule(backend_ref("web", 80, namespace="default"))],
                namespace="other",
                parents=[parent_ref("gw", namespace="default")],
            ),
            reference_grant(
                "to-web", "default", from_kind="HTTPRoute", from_namespace="other", to_name="web"
            ),
            *more,
        )
    )


def entries(options: BuildOptions = BuildOptions(dns_check=True)) -> dict[ObjectKey, RouteEntry]:
    """Every route's entry, as an incremental build made them (what each read recorded)."""
    builder = IncrementalBuild(options)
    builder.build(store())
    made = builder._build
    assert made is not None
    return dict(made.routes.entries)


def many_entries() -> dict[ObjectKey, RouteEntry]:
    """Twelve HTTPRoutes to web; every third also to a Service that does not exist (a
    problem each)."""
    web = service("web", 80)
    routes = [
        http_route(
            f"r{k:02}",
            [("/", "web", 80), *([("/gone", "gone", 80)] if k % 3 == 0 else [])],
        )
        for k in range(12)
    ]
    builder = IncrementalBuild(BuildOptions())
    builder.build(
        Store.from_objects(
            typed(gateway_class(), gateway(listeners=[listener("http", 8080)]), web, *routes)
        )
    )
    assert builder._build is not None
    return dict(builder._build.routes.entries)
