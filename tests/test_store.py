"""The store: objects by kind and key, and what with_object says it changed."""

from __future__ import annotations

import dataclasses
import gc

from dragoman.objects import ObjectMeta, Service
from dragoman.store import OBJECT_FIELDS, Store


def bare_service(name: str) -> Service:
    """A typed Service of its name alone: what the store holds needs no manifest."""
    return Service(meta=ObjectMeta(name=name))


def test_with_object_says_which_keys_it_changed_since_an_earlier_store() -> None:
    first = Store.from_objects([bare_service("a")])
    second = first.with_object(Service, ("default", "b"), bare_service("b"))
    third = second.with_object(Service, ("default", "a"), None)

    assert set(third.services) == {("default", "b")}
    assert third.keys_changed_since(first) == {"services": {("default", "a"), ("default", "b")}}
    assert third.keys_changed_since(second) == {"services": {("default", "a")}}
    assert third.keys_changed_since(third) == {}
    # Not made from it: the caller compares the fields.
    assert first.keys_changed_since(third) is None
    assert third.keys_changed_since(Store()) is None
    assert third.keys_changed_since(first, limit=1) is None


def test_a_store_made_any_other_way_claims_no_provenance() -> None:
    first = Store()
    second = first.with_object(Service, ("default", "a"), bare_service("a"))
    replaced = dataclasses.replace(second, services={})
    assert replaced.made_from is None
    assert replaced.keys_changed_since(first) is None
    # Provenance is not part of a store's value.
    assert second == Store.from_objects([bare_service("a")])
    assert "made_from" not in OBJECT_FIELDS


def test_provenance_keeps_no_earlier_store_alive() -> None:
    earlier = Store.from_objects([bare_service("a")])
    later = earlier.with_object(Service, ("default", "b"), bare_service("b"))
    del earlier
    gc.collect()
    assert later.made_from is not None and later.made_from.store() is None
    assert later.keys_changed_since(Store()) is None
