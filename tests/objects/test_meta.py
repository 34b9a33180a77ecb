"""Values every object shares: the one empty mapping, and the key made once per object."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from dragoman.objects import (
    ConfigMap,
    GatewayClass,
    HTTPRoute,
    LabelSelector,
    Namespace,
    ObjectKey,
    ObjectMeta,
    Secret,
    Service,
)
from dragoman.objects.meta import EMPTY_MAPPING


def test_objects_without_labels_share_one_empty_mapping() -> None:
    first, second = ObjectMeta(name="a"), ObjectMeta(name="b")
    assert first.labels is second.labels is first.annotations is EMPTY_MAPPING
    assert ConfigMap(meta=first).data is Secret(meta=first).data is EMPTY_MAPPING
    assert LabelSelector().match_labels is EMPTY_MAPPING


def test_the_shared_empty_mapping_cannot_be_changed() -> None:
    """Whoever holds it cannot change what every other object sees."""
    shared: object = EMPTY_MAPPING
    with pytest.raises(TypeError):
        shared["key"] = "value"  # type: ignore[index]
    with pytest.raises(TypeError):
        del shared["key"]  # type: ignore[attr-defined]
    for method in ("update", "pop", "setdefault", "clear", "popitem", "__setitem__"):
        assert not hasattr(shared, method), method
    with pytest.raises(AttributeError):
        shared.extra = 1  # type: ignore[attr-defined]
    assert len(EMPTY_MAPPING) == 0 and dict(EMPTY_MAPPING) == {}


def test_the_shared_empty_mapping_reads_and_compares_as_an_empty_dict() -> None:
    assert EMPTY_MAPPING == {} and EMPTY_MAPPING == {}
    assert EMPTY_MAPPING != {"a": "b"}
    assert "a" not in EMPTY_MAPPING and EMPTY_MAPPING.get("a") is None
    assert list(EMPTY_MAPPING.items()) == [] and not EMPTY_MAPPING
    assert {**EMPTY_MAPPING, "a": "b"} == {"a": "b"}
    # Metadata read from a file equals metadata built with an explicit empty dict.
    assert ObjectMeta(name="a") == ObjectMeta(name="a", labels={}, annotations={})


def test_the_shared_empty_mapping_survives_pickling_and_copies_as_itself() -> None:
    """Objects parsed by the worker process come back pickled: still the one mapping."""
    meta = pickle.loads(pickle.dumps(ObjectMeta(name="a"), protocol=pickle.HIGHEST_PROTOCOL))
    assert meta.labels is EMPTY_MAPPING and meta.annotations is EMPTY_MAPPING
    assert copy.copy(EMPTY_MAPPING) is EMPTY_MAPPING
    assert copy.deepcopy(EMPTY_MAPPING) is EMPTY_MAPPING


def test_an_objects_key_is_made_once() -> None:
    service = Service(meta=ObjectMeta(name="web", namespace="shop"))
    assert service.key == ObjectKey("Service", "shop", "web")
    assert service.key is service.key
    assert str(service.key) == "Service/shop/web"


def test_cluster_scoped_kinds_are_keyed_without_a_namespace() -> None:
    assert GatewayClass(meta=ObjectMeta(name="dragoman")).key == ObjectKey(
        "GatewayClass", "", "dragoman"
    )
    assert Namespace(meta=ObjectMeta(name="shop")).key == ObjectKey("Namespace", "", "shop")


def test_the_key_follows_a_replaced_meta_and_stays_out_of_equality() -> None:
    route = HTTPRoute(meta=ObjectMeta(name="a"), hostnames=("a.example",))
    renamed = dataclasses.replace(route, meta=ObjectMeta(name="b"))
    assert renamed.key == ObjectKey("HTTPRoute", "default", "b")
    assert route == HTTPRoute(meta=ObjectMeta(name="a"), hostnames=("a.example",))
    assert "key" not in repr(route)
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.key = ObjectKey("HTTPRoute", "default", "c")  # type: ignore[misc]


def test_a_pickled_object_keeps_its_key() -> None:
    service = Service(meta=ObjectMeta(name="web"), type="ExternalName", external_name="x.test")
    copied = pickle.loads(pickle.dumps(service, protocol=pickle.HIGHEST_PROTOCOL))
    assert copied == service and copied.key == service.key
