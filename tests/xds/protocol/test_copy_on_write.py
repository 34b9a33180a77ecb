"""The one copy-on-write map both stream protocols hold: shared until the first change."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from dragoman.xds.protocol.copy_on_write import CopyOnWrite
from dragoman.xds.protocol.digest_maps import DigestMap


def test_a_shared_map_is_copied_at_the_first_change_and_never_changed() -> None:
    shared = DigestMap("v1", {"a": "1", "b": "2"})  # read-only: a change would raise
    held = CopyOnWrite[str]()
    held.share(shared)
    assert held.mapping is shared and held.is_shared
    own = held.writable()
    own["a"] = "9"
    assert own is not shared and dict(shared) == {"a": "1", "b": "2"}
    assert held.writable() is own and not held.is_shared  # copied once, then changed in place
    assert dict(held) == {"a": "9", "b": "2"} and held.get("a") == "9" and "b" in held


def test_an_own_map_is_changed_in_place() -> None:
    mine = {"a": "1"}
    held = CopyOnWrite[str]()
    held.own(mine)
    assert held.writable() is mine


def test_an_equal_map_is_given_up_for_the_shared_one() -> None:
    shared = MappingProxyType({"a": 1, "b": 2})
    held = CopyOnWrite[int]()
    held.own({"a": 1, "b": 2})
    held.share_if_equal(shared)
    assert held.mapping is shared
    other = CopyOnWrite[int]()
    other.own({"a": 1, "b": 3})
    other.share_if_equal(shared)
    assert other.mapping is not shared and not other.is_shared
    # With a comparison of one's own (SotW compares resources by digest).
    other.share_if_equal(shared, lambda mine, theirs: mine in (theirs, theirs + 1))
    assert other.mapping is shared


def test_a_holder_starts_empty_and_shared_and_compares_by_content() -> None:
    held = CopyOnWrite[str]()
    assert held == {} and len(held) == 0 and held.is_shared
    held.writable()["a"] = "1"
    assert held == {"a": "1"} and held == CopyOnWrite({"a": "1"})
    with pytest.raises(TypeError):
        hash(held)
