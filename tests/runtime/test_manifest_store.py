"""The store a reload hands the build: the previous one with the objects a load changed put
in or taken out, equal to the store made anew, and saying which keys it changed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dragoman.objects import KubeObject
from dragoman.runtime.manifest_serving import STEP_OBJECTS_UP_TO, updated_stores
from dragoman.store import Store
from tests.support.builders import http_route, service, typed


def one(document: Mapping[str, Any]) -> KubeObject:
    (obj,) = typed(document)
    return obj


def test_a_few_objects_changed_are_put_into_the_previous_store() -> None:
    web, api, old_route = (
        one(service("web")),
        one(service("api")),
        one(http_route("r", to="web", port=80)),
    )
    before = (web, api, old_route)
    store = Store.from_objects(before)
    new_route, added = (
        one(http_route("r", to="web", port=80, hostnames=["a.example"])),
        one(http_route("s", to="web", port=80)),
    )
    objects = (web, new_route, added)  # api removed, r edited, s added

    steps = updated_stores(store, before, objects)
    made = steps[-1]

    assert made == Store.from_objects(objects)
    assert made.keys_changed_since(store) == {
        "services": {("default", "api")},
        "http_routes": {("default", "r"), ("default", "s")},
    }


def test_many_objects_changed_make_a_store_anew() -> None:
    before = (one(service("web")),)
    store = Store.from_objects(before)
    objects = (
        *before,
        *(one(http_route(f"r{i}", to="web", port=80)) for i in range(STEP_OBJECTS_UP_TO + 1)),
    )

    steps = updated_stores(store, before, objects)
    made = steps[-1]

    assert made == Store.from_objects(objects)
    assert made.keys_changed_since(store) is None  # compared in full by the build


def test_without_a_previous_store_one_is_made() -> None:
    objects = (one(service("web")),)
    assert updated_stores(None, (), objects) == [Store.from_objects(objects)]
