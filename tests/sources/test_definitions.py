"""What a load took out and put in since the previous one: exactly the difference between
the two loads' objects (by identity), or None where that difference is not what a store
stepped by it would hold (an object defined twice); and a load's objects, read from its files'
records without a tuple of them all unless asked."""

from __future__ import annotations

import os
from pathlib import Path

from dragoman.objects import KubeObject
from dragoman.sources.definitions import ObjectsOf
from dragoman.sources.manifests import LoadResult, ManifestDirectory
from tests.support.builders import http_route, service, yaml_text


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name("." + path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def difference(before: LoadResult, after: LoadResult) -> tuple[set[int], set[int]]:
    """The ids of the objects taken out and put in, found by comparing every object."""
    old, new = set(map(id, before.objects)), set(map(id, after.objects))
    return old - new, new - old


def ids(objects: tuple[KubeObject, ...]) -> set[int]:
    return set(map(id, objects))


def assert_delta_is_the_difference(before: LoadResult, after: LoadResult) -> None:
    # The count of objects is kept as files come and go, not counted again.
    assert len(after.objects) == len(tuple(after.objects)) == len(list(iter(after.objects)))
    assert after.generation == before.generation + 1
    assert after.delta is not None
    assert after.delta.since == before.generation
    removed, added = difference(before, after)
    assert ids(after.delta.removed) == removed
    assert ids(after.delta.added) == added
    assert len(after.delta.removed) == len(removed) and len(after.delta.added) == len(added)


def test_each_load_says_what_it_took_out_and_put_in(tmp_path: Path) -> None:
    for i in range(3):
        write(
            tmp_path,
            f"svc{i}.yaml",
            yaml_text(service(f"s{i}"), http_route(f"r{i}", f"s{i}", port=80)),
        )
    directory = ManifestDirectory(tmp_path)
    first = directory.load()
    assert first.generation == 1 and first.delta is None  # every object: made anew

    write(tmp_path, "svc1.yaml", yaml_text(service("s1", port=81), http_route("r1", "s1", port=80)))
    edited = directory.load({"svc1.yaml"})
    assert_delta_is_the_difference(first, edited)
    assert edited.delta is not None
    assert sorted(str(o.key) for o in edited.delta.added) == [
        "HTTPRoute/default/r1",
        "Service/default/s1",
    ]

    write(tmp_path, "a/new.yaml", yaml_text(service("n")))
    (tmp_path / "svc0.yaml").unlink()
    changed = directory.load({"a/new.yaml", "svc0.yaml"})
    assert_delta_is_the_difference(edited, changed)
    assert changed.delta is not None
    assert sorted(str(o.key) for o in changed.delta.added) == ["Service/default/n"]

    # A full rescan too: only the file edited since is read again.
    write(tmp_path, "svc2.yaml", yaml_text(service("s2", port=82)))
    rescanned = directory.load()
    assert_delta_is_the_difference(changed, rescanned)
    assert rescanned.delta is not None and len(rescanned.delta.removed) == 2


def test_an_unchanged_load_keeps_its_changes_for_the_next(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", yaml_text(service("a")))
    directory = ManifestDirectory(tmp_path)
    first = directory.load()
    write(tmp_path, "b.yaml", yaml_text(service("b")))
    assert directory.load({"a.yaml"}).changed is False  # nothing of a.yaml changed
    second = directory.load({"b.yaml"})
    assert_delta_is_the_difference(first, second)


def test_a_file_that_no_longer_decodes_keeps_its_objects_and_changes_nothing(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a.yaml", yaml_text(service("a")))
    directory = ManifestDirectory(tmp_path)
    first = directory.load()
    write(tmp_path, "a.yaml", "kind: [unclosed\n")
    broken = directory.load({"a.yaml"})
    assert broken.errors
    assert_delta_is_the_difference(first, broken)
    assert broken.delta is not None and not broken.delta.added and not broken.delta.removed


def test_an_object_defined_twice_has_no_delta_until_it_is_defined_once(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", yaml_text(service("web")))
    directory = ManifestDirectory(tmp_path)
    first = directory.load()
    write(tmp_path, "b.yaml", yaml_text(service("web", port=81)))
    twice = directory.load({"b.yaml"})
    assert twice.delta is None  # which one wins depends on every file's order
    assert len(twice.objects) == 1
    (tmp_path / "b.yaml").unlink()
    once = directory.load({"b.yaml"})
    # Its objects are those of the load before; the object taken out was never among them.
    assert ids(once.objects) == ids(first.objects)
    assert once.delta is None
    write(tmp_path, "a.yaml", yaml_text(service("web", port=82)))
    edited = directory.load({"a.yaml"})
    assert_delta_is_the_difference(once, edited)


def test_a_loads_objects_are_read_from_the_records_without_a_tuple_until_asked(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a.yaml", yaml_text(service("a"), http_route("r", "a", port=80)))
    write(tmp_path, "b.yaml", yaml_text(service("b")))
    objects = ManifestDirectory(tmp_path).load().objects
    assert isinstance(objects, ObjectsOf)
    keys = [str(o.key) for o in objects]
    assert keys == ["Service/default/a", "HTTPRoute/default/r", "Service/default/b"]
    assert len(objects) == 3 and objects._tuple is None  # iterated and counted: no tuple
    assert objects[1].key.name == "r" and objects[-1].key.name == "b"
    assert objects == tuple(objects) and tuple(objects) == objects
    again = ManifestDirectory(tmp_path).load().objects  # other objects, equal values
    assert objects == again and objects != again[:2] and objects != list(again)
