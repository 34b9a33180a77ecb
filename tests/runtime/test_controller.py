"""The controller: a full build on configuration changes, the EDS fast path on endpoint-only
changes, nothing on no change; snapshots reach the cache."""

from __future__ import annotations

import dataclasses

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.envoy.per_type_sources import PerTypeConfigSources
from dragoman.objects import (
    BackendRef,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Gateway,
    GatewayListener,
    HTTPRoute,
    HTTPRouteRule,
    ObjectMeta,
    ParentRef,
    Service,
    ServicePort,
)
from dragoman.runtime.controller import Controller
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE
from dragoman.store import Store
from dragoman.xds.cache import SnapshotCache


def _slice(service: str, *addresses: str, name: str | None = None) -> EndpointSlice:
    return EndpointSlice(
        meta=ObjectMeta(
            name=name or f"{service}-1", labels={"kubernetes.io/service-name": service}
        ),
        endpoints=tuple(Endpoint(addresses=(a,)) for a in addresses),
        ports=(EndpointPort(port=8080, name="http"),),
    )


def _store(*slices: EndpointSlice, route_path_services: tuple[str, ...] = ("a", "b")) -> Store:
    services = [
        Service(
            meta=ObjectMeta(name=name),
            selector={"app": name},
            ports=(ServicePort(port=80, name="http", target_port=8080),),
        )
        for name in route_path_services
    ]
    gateway = Gateway(
        meta=ObjectMeta(name="gw"), listeners=(GatewayListener(name="http", port=8080),)
    )
    route = HTTPRoute(
        meta=ObjectMeta(name="r"),
        parent_refs=(ParentRef(name="gw"),),
        rules=(
            HTTPRouteRule(
                backend_refs=tuple(BackendRef(name=n, port=80) for n in route_path_services)
            ),
        ),
    )
    return Store.from_objects([*services, gateway, route, *slices])


def test_first_update_is_a_full_build_published_to_the_cache() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    result = Controller(cache).update(_store(_slice("a", "10.0.0.1"), _slice("b", "10.0.0.2")))
    assert result.kind == "full"
    snapshot = cache.snapshot_for(ALL_GATEWAYS)
    assert set(snapshot.of_type(CLUSTER).resources) == {"default/a/80", "default/b/80"}
    assert set(snapshot.of_type(ENDPOINT).resources) == {"default/a/80", "default/b/80"}
    assert set(snapshot.of_type(LISTENER).resources) == {"http-8080"}
    assert set(snapshot.of_type(ROUTE).resources) == {"http-8080"}


def test_equal_store_changes_nothing() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    controller.update(_store(_slice("a", "10.0.0.1")))
    generation = cache.generation
    result = controller.update(_store(_slice("a", "10.0.0.1")))
    assert result.kind == "unchanged"
    assert cache.generation == generation


def test_endpoint_only_change_takes_the_fast_path_and_touches_one_cla() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    controller.update(_store(_slice("a", "10.0.0.1"), _slice("b", "10.0.0.2")))
    before = cache.snapshot_for(ALL_GATEWAYS)
    result = controller.update(_store(_slice("a", "10.0.0.1", "10.0.0.3"), _slice("b", "10.0.0.2")))
    assert result.kind == "endpoints"
    after = cache.snapshot_for(ALL_GATEWAYS)
    for type_url in (CLUSTER, LISTENER, ROUTE):
        assert after.of_type(type_url) is before.of_type(type_url)
    old, new = before.of_type(ENDPOINT).resources, after.of_type(ENDPOINT).resources
    assert new["default/b/80"] is old["default/b/80"]  # not even re-serialized
    assert new["default/a/80"].digest != old["default/a/80"].digest
    assert after.of_type(ENDPOINT).version != before.of_type(ENDPOINT).version


def test_configuration_change_rebuilds_and_reports_new_problems_once() -> None:
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    store = _store(_slice("a", "10.0.0.1"), route_path_services=("a",))
    controller.update(store)
    broken = dataclasses.replace(
        store,
        http_routes={
            key: dataclasses.replace(
                route,
                rules=(HTTPRouteRule(backend_refs=(BackendRef(name="missing", port=80),)),),
            )
            for key, route in store.http_routes.items()
        },
    )
    first = controller.update(broken)
    assert first.kind == "incremental"
    assert [p.reason for p in first.new_problems] == ["BackendNotFound"]
    again = controller.update(dataclasses.replace(broken, endpoint_slices={}))
    assert again.kind == "endpoints"
    assert again.new_problems == ()
    assert [p.reason for p in again.problems] == ["BackendNotFound"]
