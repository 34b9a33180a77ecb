"""A place of the index holds the keys added there until they are removed; adding a key twice
or removing one that is not there changes nothing; the first key in and the last key out say
so."""

from __future__ import annotations

from dragoman.dag.key_index import KeyIndex
from dragoman.objects import ObjectKey

A, B, C = (ObjectKey("HTTPRoute", "shop", name) for name in ("a", "b", "c"))


def test_keys_added_are_found_at_their_place() -> None:
    index: KeyIndex[str, ObjectKey] = KeyIndex()
    assert index.add("svc", A) is True  # the place was empty
    assert list(index.keys("svc")) == [A]
    assert index.add("svc", A) is False  # twice: still one
    assert list(index.keys("svc")) == [A] and index.count("svc") == 1
    assert index.add("svc", B) is False
    index.add("svc", C)
    assert sorted(index.keys("svc")) == [A, B, C] and index.count("svc") == 3
    assert list(index.keys("other")) == [] and index.count("other") == 0
    assert "svc" in index and "other" not in index and len(index) == 1


def test_removing_down_to_nothing_empties_the_place() -> None:
    index: KeyIndex[str, ObjectKey] = KeyIndex()
    for key in (A, B, C):
        index.add("svc", key)
    assert index.remove("svc", C) is False
    assert index.remove("svc", B) is False
    assert list(index.keys("svc")) == [A]
    assert index.remove("svc", B) is False  # not there: nothing changes
    assert list(index.keys("svc")) == [A]
    assert index.remove("svc", A) is True  # the place is empty now
    assert "svc" not in index
    assert index.remove("svc", A) is False
    assert list(index.keys("svc")) == []
    # Two keys down to one and back up to two.
    index.add("svc", A)
    index.add("svc", B)
    index.remove("svc", A)
    index.add("svc", C)
    assert sorted(index.keys("svc")) == [B, C]


def test_greatest_key_of_a_place() -> None:
    index: KeyIndex[str, ObjectKey] = KeyIndex()
    assert index.greatest("svc") is None
    index.add("svc", B)
    assert index.greatest("svc") == B
    index.add("svc", A)
    index.add("svc", C)
    assert index.greatest("svc") == C
    index.remove("svc", C)
    assert index.greatest("svc") == B


def test_shared_places_are_those_with_two_keys_or_more() -> None:
    index: KeyIndex[str, ObjectKey] = KeyIndex()
    index.add("alone", A)
    index.add("pair", A)
    index.add("pair", B)
    assert [(at, sorted(keys)) for at, keys in index.shared()] == [("pair", [A, B])]
    index.remove("pair", B)
    assert list(index.shared()) == []


def test_made_at_once_holds_the_same_as_made_key_by_key() -> None:
    index: KeyIndex[str, ObjectKey] = KeyIndex.of({"one": [A], "two": [B, C], "none": []})
    assert list(index.keys("one")) == [A]
    assert sorted(index.keys("two")) == [B, C]
    assert "none" not in index and len(index) == 2
    assert index.remove("two", B) is False and list(index.keys("two")) == [C]


def test_places_of_one_key_cost_no_set_each() -> None:
    """Ten thousand places of one key each: far less than ten thousand one-key sets."""
    import tracemalloc

    keys = [ObjectKey("HTTPRoute", "shop", f"r{i}") for i in range(10_000)]
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        index: KeyIndex[int, ObjectKey] = KeyIndex()
        for place, key in enumerate(keys):
            index.add(place, key)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    one_key_sets = 10_000 * 216  # what a set of one key costs alone, at the least
    assert after - before < one_key_sets / 2
