"""A dict made from another says which keys it put or removed since: those alone, and only
to whoever holds that other mapping."""

from __future__ import annotations

from dragoman.dag.patched_mapping import PatchedDict, changed_keys_since


def test_a_patch_tells_the_keys_put_or_removed_since_its_base() -> None:
    base = PatchedDict({"a": 1, "b": 2, "c": 3})
    patch = PatchedDict(base)
    assert patch == base and changed_keys_since(patch, base) == set()
    patch["a"] = 10
    del patch["b"]
    patch.pop("missing", None)
    patch.update({"d": 4}, e=5)
    patch.setdefault("f", 6)
    patch |= {"g": 7}
    assert patch == {"a": 10, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}
    assert changed_keys_since(patch, base) == {"a", "b", "missing", "d", "e", "f", "g"}
    key, _ = patch.popitem()
    assert key in changed_keys_since(patch, base)  # type: ignore[operator]  # not None here
    patch.clear()
    assert changed_keys_since(patch, base) == {"a", "b", "c", "d", "e", "f", "g", "missing"}


def test_only_the_holder_of_the_base_is_told() -> None:
    base = PatchedDict({"a": 1})
    patch = PatchedDict(base)
    assert changed_keys_since(patch, PatchedDict({"a": 1})) is None  # an equal one: not told
    assert changed_keys_since(patch, patch) is None
    assert changed_keys_since({"a": 1}, base) is None  # a plain dict tells nothing
    # A plain dict as the base (a full build's): nothing to be told against.
    assert changed_keys_since(PatchedDict({"a": 1}), {"a": 1}) is None


def test_a_patch_does_not_keep_its_base_alive() -> None:
    base = PatchedDict({"a": 1})
    patch = PatchedDict(base)
    del base
    assert changed_keys_since(patch, {"a": 1}) is None and patch == {"a": 1}
