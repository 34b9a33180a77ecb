"""The object cache: API objects become typed objects through the manifest parser; bad
ones are logged naming kind/namespace/name and field, and skipped; repeated deliveries and
status-only writes do not count as changes to what the DAG reads."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dragoman.kubernetes.cache import ObjectCache
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME
from dragoman.objects import ObjectKey
from dragoman.store import Store
from tests.support.builders import http_route, service

SERVICES = KINDS_BY_NAME["Service"]
ROUTES = KINDS_BY_NAME["HTTPRoute"]
CLASSES = KINDS_BY_NAME["GatewayClass"]
GATEWAY_V1 = "gateway.networking.k8s.io/v1"


def test_a_list_becomes_typed_objects_in_the_store() -> None:
    cache = ObjectCache()
    change = cache.replace(
        ("Service", ""),
        SERVICES,
        [service("a", resource_version="1"), service("b", resource_version="2")],
    )
    assert change.objects
    assert sorted(cache.store().services) == [("default", "a"), ("default", "b")]
    # resourceVersion is left out of the typed object: a status write must not rebuild.
    assert cache.store().services[("default", "a")].meta.resource_version == ""


def test_bad_objects_are_logged_once_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    cache = ObjectCache()
    with caplog.at_level(logging.ERROR, logger="dragoman.kubernetes"):
        cache.replace(
            ("Service", ""),
            SERVICES,
            [service("good", resource_version="1"), service("bad", "x", resource_version="2")],
        )
        cache.replace(
            ("Service", ""),
            SERVICES,
            [service("good", resource_version="1"), service("bad", "x", resource_version="2")],
        )
    assert list(cache.store().services) == [("default", "good")]
    errors = [r.getMessage() for r in caplog.records]
    assert len(errors) == 1, errors
    assert "Service/default/bad" in errors[0] and "spec.ports[0].port" in errors[0]
    assert [str(e.object) for e in cache.errors()] == ["Service/default/bad"]

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dragoman.kubernetes"):
        cache.event(
            ("Service", ""), SERVICES, "MODIFIED", service("bad", 8080, resource_version="3")
        )
    assert sorted(cache.store().services) == [("default", "bad"), ("default", "good")]
    assert any(r.getMessage().startswith("resolved:") for r in caplog.records)
    assert cache.errors() == []


def test_unreadable_objects_and_errors_follow_every_event() -> None:
    cache = ObjectCache()
    partition = ("Service", "")
    cache.replace(partition, SERVICES, [service("good", resource_version="1")])
    assert cache.errors() == [] and cache.unreadable() == []
    cache.event(partition, SERVICES, "ADDED", service("bad", "x", resource_version="2"))
    assert [str(e.object) for e in cache.errors()] == ["Service/default/bad"]
    assert [entry.name for entry in cache.unreadable()] == ["bad"]
    # A readable object changing leaves them as they were.
    cache.event(partition, SERVICES, "MODIFIED", service("good", 81, resource_version="3"))
    assert [entry.name for entry in cache.unreadable()] == ["bad"]
    cache.event(partition, SERVICES, "DELETED", service("bad", "x", resource_version="4"))
    assert cache.errors() == [] and cache.unreadable() == []


def test_events_add_change_and_delete() -> None:
    cache = ObjectCache()
    cache.replace(("Service", ""), SERVICES, [])
    assert cache.event(
        ("Service", ""), SERVICES, "ADDED", service("a", resource_version="5")
    ).objects
    assert cache.event(
        ("Service", ""), SERVICES, "MODIFIED", service("a", 81, resource_version="6")
    ).objects
    assert cache.store().services[("default", "a")].ports[0].port == 81
    assert cache.event(
        ("Service", ""), SERVICES, "DELETED", service("a", 81, resource_version="7")
    ).objects
    assert cache.store().services == {}
    assert not cache.event(
        ("Service", ""), SERVICES, "DELETED", service("a", resource_version="7")
    ).any


def test_an_event_delivered_twice_is_applied_once() -> None:
    cache = ObjectCache()
    cache.replace(("Service", ""), SERVICES, [])
    first = cache.event(("Service", ""), SERVICES, "ADDED", service("a", resource_version="5"))
    again = cache.event(("Service", ""), SERVICES, "ADDED", service("a", resource_version="5"))
    assert first.objects and not again.any


def test_a_relist_changes_only_what_differs() -> None:
    cache = ObjectCache()
    cache.replace(
        ("Service", ""),
        SERVICES,
        [service("a", resource_version="1"), service("b", resource_version="2")],
    )
    same = cache.replace(
        ("Service", ""),
        SERVICES,
        [service("a", resource_version="1"), service("b", resource_version="2")],
    )
    assert not same.any
    gone = cache.replace(("Service", ""), SERVICES, [service("a", resource_version="1")])
    assert gone.objects and list(cache.store().services) == [("default", "a")]


def test_a_status_write_changes_statuses_but_not_the_typed_objects() -> None:
    cache = ObjectCache()
    cache.replace(
        ("HTTPRoute", ""), ROUTES, [http_route("r", "web", 80, resource_version="1", generation=1)]
    )
    store = cache.store()
    status = {"parents": [{"controllerName": "x", "parentRef": {"name": "gw"}, "conditions": []}]}
    change = cache.event(
        ("HTTPRoute", ""),
        ROUTES,
        "MODIFIED",
        http_route("r", "web", 80, resource_version="2", generation=1, status=status),
    )
    assert change.statuses and not change.objects
    assert cache.store() is store
    entry = cache.by_key()[ObjectKey("HTTPRoute", "default", "r")]
    assert entry.status == status and entry.resource_version == "2"
    assert (entry.api_version, entry.namespace, entry.name) == (GATEWAY_V1, "default", "r")


def test_cluster_scoped_objects_have_no_namespace() -> None:
    cache = ObjectCache()
    gateway_class = {
        "apiVersion": GATEWAY_V1,
        "kind": "GatewayClass",
        "metadata": {"name": "dragoman", "resourceVersion": "3"},
        "spec": {"controllerName": "dragoman.dev/gateway-controller"},
    }
    cache.replace(("GatewayClass", ""), CLASSES, [gateway_class])
    assert list(cache.by_key()) == [ObjectKey("GatewayClass", "", "dragoman")]
    assert list(cache.store().gateway_classes) == [("", "dragoman")]


def test_synced_once_every_expected_partition_was_listed() -> None:
    cache = ObjectCache()
    cache.expect(("Service", ""))
    cache.expect(("HTTPRoute", "shop"))
    assert not cache.synced
    cache.replace(("Service", ""), SERVICES, [])
    assert cache.unsynced() == [("HTTPRoute", "shop")]
    first = cache.replace(("HTTPRoute", "shop"), ROUTES, [])
    assert cache.synced
    assert first.objects  # the first list of a kind always counts, even when empty


def test_events_patch_the_store_into_what_a_rebuild_gives() -> None:
    """Each event changes one kind's mapping of the last store: the same store as one made
    from every entry, with every other object the same Python object as before."""
    cache = ObjectCache()
    cache.replace(
        ("Service", ""), SERVICES, [service(f"s{i}", resource_version="1") for i in range(5)]
    )
    cache.replace(
        ("HTTPRoute", ""), ROUTES, [http_route("r", "web", 80, resource_version="1", generation=1)]
    )
    events: list[tuple[str, dict[str, Any]]] = [
        ("MODIFIED", service("s1", port=81, resource_version="2")),
        ("ADDED", service("s9", namespace="other", resource_version="3")),
        ("DELETED", service("s2", resource_version="4")),
        (
            "MODIFIED",
            service("s3", port="bad", resource_version="5"),
        ),  # unreadable: leaves the store
        ("MODIFIED", service("s3", port=83, resource_version="6")),  # readable again
        ("DELETED", service("missing", resource_version="7")),
    ]
    for event_type, obj in events:
        before = cache.store()
        cache.event(("Service", ""), SERVICES, event_type, obj)
        after = cache.store()
        assert after == Store.from_objects(e.parsed for e in cache.entries() if e.parsed)
        assert after.http_routes is before.http_routes
        name = obj["metadata"]["name"]
        namespace = obj["metadata"]["namespace"]
        for key, kept in before.services.items():
            if key != (namespace, name):
                assert after.services.get(key) is kept
    assert sorted(cache.store().services) == [
        ("default", "s0"),
        ("default", "s1"),
        ("default", "s3"),
        ("default", "s4"),
        ("other", "s9"),
    ]
    assert cache.store().services[("default", "s3")].ports[0].port == 83


def test_a_key_held_by_two_partitions_makes_the_store_from_every_entry() -> None:
    cache = ObjectCache()
    cache.replace(("Service", ""), SERVICES, [service("a", resource_version="1")])
    cache.replace(("Service", "default"), SERVICES, [service("a", port=82, resource_version="2")])
    cache.store()
    cache.event(("Service", ""), SERVICES, "DELETED", service("a", resource_version="3"))
    # The namespaced partition still holds it: not removed from the store.
    assert cache.store().services[("default", "a")].ports[0].port == 82
