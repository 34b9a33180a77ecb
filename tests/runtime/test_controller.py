"""The controller: a full build on configuration changes, the EDS fast path on endpoint-only
changes, nothing on no change; snapshots reach the cache."""

from __future__ import annotations

import dataclasses

import pytest

from dragoman.dag.model import ALL_GATEWAYS, Dag
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.envoy.translation.translator import Translation
from dragoman.objects import HTTPRoute
from dragoman.runtime.controller import Controller
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER, ROUTE
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.builders import (
    Object,
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    rule,
    service,
    typed,
)
from tests.support.served_digests import served_digests

# The pods behind Services a and b, listening on 8080.
SLICE_A = endpoint_slice("a", 8080, "10.0.0.1")
SLICE_B = endpoint_slice("b", 8080, "10.0.0.2")


def _store(*slices: Object, route_path_services: tuple[str, ...] = ("a", "b")) -> Store:
    """Services behind one route of Gateway `gw` (HTTP on 8080), and their EndpointSlices."""
    backends = [backend_ref(name, 80) for name in route_path_services]
    return Store.from_objects(
        typed(
            *(service(name, 80, 8080) for name in route_path_services),
            gateway(),
            http_route("r", rules=[rule(*backends)]),
            *slices,
        )
    )


def test_first_update_is_a_full_build_published_to_the_cache() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    result = Controller(cache).update(_store(SLICE_A, SLICE_B))
    assert result.kind == "full"
    snapshot = cache.snapshot_for(ALL_GATEWAYS)
    assert set(snapshot.of_type(CLUSTER).resources) == {"default/a/80", "default/b/80"}
    assert set(snapshot.of_type(ENDPOINT).resources) == {"default/a/80", "default/b/80"}
    assert set(snapshot.of_type(LISTENER).resources) == {"http-8080"}
    assert set(snapshot.of_type(ROUTE).resources) == {"http-8080"}


def test_equal_store_changes_nothing() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    controller.update(_store(SLICE_A))
    generation = cache.generation
    result = controller.update(_store(SLICE_A))
    assert result.kind == "unchanged"
    assert cache.generation == generation


def test_endpoint_only_change_takes_the_fast_path_and_touches_one_cla() -> None:
    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    controller.update(_store(SLICE_A, SLICE_B))
    before = cache.snapshot_for(ALL_GATEWAYS)
    result = controller.update(_store(endpoint_slice("a", 8080, "10.0.0.1", "10.0.0.3"), SLICE_B))
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
    store = _store(SLICE_A, route_path_services=("a",))
    controller.update(store)
    (missing,) = typed(http_route("r", "missing", 80))
    assert isinstance(missing, HTTPRoute)
    broken = dataclasses.replace(store, http_routes={key: missing for key in store.http_routes})
    first = controller.update(broken)
    assert first.kind == "incremental"
    assert [p.reason for p in first.new_problems] == ["BackendNotFound"]
    again = controller.update(dataclasses.replace(broken, endpoint_slices={}))
    assert again.kind == "endpoints"
    assert again.new_problems == ()
    assert [p.reason for p in again.problems] == ["BackendNotFound"]


def test_a_prepared_store_is_published_only_by_the_next_update_and_as_a_full_build() -> None:
    """A first load prepares the objects parsed so far (here a route whose Services are not
    parsed yet): nothing is published, and the update of the whole store publishes what a
    build of it from nothing does, problems included."""
    whole = _store(SLICE_A, SLICE_B)
    alone = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    expected = alone.update(whole)

    cache = SnapshotCache(per_type=PerTypeConfigSources())
    controller = Controller(cache)
    generation = cache.generation
    controller.prepare(dataclasses.replace(whole, services={}, endpoint_slices={}))
    controller.prepare(dataclasses.replace(whole, endpoint_slices={}))
    assert cache.generation == generation and controller.dag is None and not controller.snapshots
    result = controller.update(whole)

    assert result.kind == "full"  # the first published
    assert cache.generation != generation
    assert served_digests(controller) == served_digests(alone) != {}
    assert result.problems == expected.problems and result.new_problems == expected.new_problems


def test_the_update_of_the_very_store_prepared_publishes_it() -> None:
    """The build finds nothing changed since the prepare: still the first publication."""
    store = _store(SLICE_A)
    alone = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    alone.update(store)
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    controller.prepare(store)
    assert controller.update(store).kind == "full"
    assert served_digests(controller) == served_digests(alone)
    assert controller.update(store).kind == "unchanged"


def test_a_prepare_that_fails_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed prepare may have built half: the next update builds from nothing."""
    store = _store(SLICE_A, SLICE_B)
    alone = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    alone.update(store)
    controller = Controller(SnapshotCache(per_type=PerTypeConfigSources()))
    controller.prepare(_store(SLICE_A, route_path_services=("a",)))

    def failing(self: Translation, dag: Dag) -> None:
        raise RuntimeError("a bug")

    with monkeypatch.context() as patch:
        patch.setattr(Translation, "translate", failing)
        with pytest.raises(RuntimeError, match="a bug"):
            controller.prepare(store)
    assert controller.builder is None and controller.translation is None
    assert controller.update(store).kind == "full"
    assert served_digests(controller) == served_digests(alone)
