"""An index place holds one key alone, a set once two or more are there, and the key alone
again when one is left; adding a key twice or removing one that is not there changes
nothing."""

from __future__ import annotations

from dragoman.dag.key_index import Held, add_key, keys_at, remove_key
from dragoman.objects import ObjectKey

A, B, C = (ObjectKey("HTTPRoute", "shop", name) for name in ("a", "b", "c"))


def test_one_key_is_held_alone_and_more_in_a_set() -> None:
    index: dict[str, Held[ObjectKey]] = {}
    assert add_key(index, "svc", A) is True  # the place was empty
    assert index["svc"] is A
    assert add_key(index, "svc", A) is False and index["svc"] is A  # twice: still alone
    assert add_key(index, "svc", B) is False
    assert index["svc"] == {A, B}
    add_key(index, "svc", C)
    assert sorted(keys_at(index, "svc")) == [A, B, C]


def test_removing_down_to_one_key_holds_it_alone_again() -> None:
    index: dict[str, Held[ObjectKey]] = {}
    for key in (A, B, C):
        add_key(index, "svc", key)
    assert remove_key(index, "svc", C) is False
    assert remove_key(index, "svc", B) is False
    assert index["svc"] is A
    assert remove_key(index, "svc", B) is False  # not there: nothing changes
    assert index["svc"] is A
    assert remove_key(index, "svc", A) is True  # the place is empty now
    assert "svc" not in index
    assert remove_key(index, "svc", A) is False
    assert list(keys_at(index, "svc")) == []
