"""The store a reload hands the build: the previous one with the objects a load changed put
in or taken out, equal to the store made anew, and saying which keys it changed."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dragoman.objects import KubeObject
from dragoman.runtime import manifest_serving
from dragoman.runtime.manifest_serving import (
    STEP_OBJECTS_UP_TO,
    ManifestServer,
    ServeConfig,
    updated_stores,
)
from dragoman.store import Store
from tests.support.builders import http_route, service, typed, yaml_text


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


def test_a_server_steps_its_store_by_what_each_load_says_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store a reload makes from a load's delta (never comparing every object) is the
    store made anew of the load's objects."""
    for i in range(3):
        write(
            tmp_path,
            f"svc{i}.yaml",
            yaml_text(service(f"s{i}"), http_route(f"r{i}", f"s{i}", port=80)),
        )
    server = ManifestServer(ServeConfig(manifests=tmp_path, xds_address="127.0.0.1:0"))
    server._apply(server._load(None))

    def compared(*_: object) -> list[Store]:
        raise AssertionError("every object compared")

    monkeypatch.setattr(manifest_serving, "updated_stores", compared)
    edits: list[tuple[str, str | None]] = [
        ("svc1.yaml", yaml_text(service("s1", port=81), http_route("r1", "s1", port=81))),
        ("svc0.yaml", None),
        ("new.yaml", yaml_text(service("s9"))),
        ("svc2.yaml", yaml_text(http_route("r2", "s9", port=80))),
    ]
    for relative, text in edits:
        before = server._store
        assert before is not None
        if text is None:
            (tmp_path / relative).unlink()
        else:
            write(tmp_path, relative, text)
        result = server._load({relative})
        assert result.delta is not None and result.delta.since == server._generation
        server._apply(result)
        assert server._store == Store.from_objects(result.objects)
        assert server._store is not before


def write(root: Path, relative: str, text: str) -> None:
    temporary = root / f".{relative}.tmp"
    temporary.write_text(text)
    os.replace(temporary, root / relative)
