"""A manifest directory: files, documents, errors with their origin, duplicates, caching."""

from __future__ import annotations

import json
import logging
import os
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dragoman.objects import EndpointSlice, HTTPRoute, ObjectKey, Service
from dragoman.sources import manifests, tree
from dragoman.sources.decode import DecodeError, decode_documents
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import ManifestDirectory
from dragoman.store import Store
from tests.support.builders import (
    backend_ref,
    http_route,
    rule,
    service,
    service_port,
    yaml_text,
)

GW = "gateway.networking.k8s.io/v1"


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def keys(objects: tuple[Any, ...]) -> list[str]:
    return [str(obj.key) for obj in objects]


def test_loads_every_manifest_file_below_the_directory_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", yaml_text(service("b", namespace=None)))
    write(tmp_path, "a/z.yml", yaml_text(service("az", namespace=None)))
    write(tmp_path, "a/y/x.yaml", yaml_text(service("ayx", namespace=None)))
    write(
        tmp_path,
        "c.json",
        json.dumps(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {"name": "b-1", "labels": {"kubernetes.io/service-name": "b"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"]}],
                "ports": [{"port": 8080}],
            }
        ),
    )
    write(tmp_path, ".hidden.yaml", yaml_text(service("hidden", namespace=None)))
    write(tmp_path, ".git/config.yaml", yaml_text(service("git", namespace=None)))
    write(tmp_path, "notes.txt", "not: a manifest")
    write(tmp_path, "README.md", "# docs")

    result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert result.files == 4
    assert keys(result.objects) == [
        "Service/default/ayx",
        "Service/default/az",
        "Service/default/b",
        "EndpointSlice/default/b-1",
    ]
    store = Store.from_objects(result.objects)
    assert set(store.services) == {("default", "ayx"), ("default", "az"), ("default", "b")}
    # The slice is labelled for Service b, as the build finds a Service's slices.
    assert [s.meta.name for s in store.endpoint_slices.values() if s.service_name == "b"] == ["b-1"]


def test_one_bad_document_is_skipped_and_named(tmp_path: Path) -> None:
    write(
        tmp_path,
        "routes.yaml",
        yaml_text(
            service("web", namespace=None),
            # A port given by name: not a number, as a backendRef's port must be.
            http_route(
                "web",
                rules=[rule(backend_ref("web", 80), {"name": "api", "port": "http"})],
                parents=(),
                namespace=None,
            ),
            http_route("other", "web", 80, parents=(), namespace=None),
        ),
    )

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/web", "HTTPRoute/default/other"]
    assert [str(e) for e in result.errors] == [
        "routes.yaml#2 HTTPRoute/default/web: spec.rules[0].backendRefs[1].port: "
        'expected an integer from 1 to 65535, got "http"'
    ]


def test_yaml_syntax_error_names_file_and_line_and_skips_only_that_file(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", yaml_text(service("good", namespace=None)))
    write(
        tmp_path,
        "sub/bad.yaml",
        yaml_text(service("first", namespace=None)) + "---\nkind: Service\nspec: [oops\n",
    )

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/good"]
    [error] = result.errors
    assert (error.origin, error.object, error.field) == ("sub/bad.yaml", "", "")
    assert error.message == (
        "invalid YAML at line 15, column 1: did not find expected ',' or ']' "
        "(while parsing a flow sequence at line 14, column 7) (file skipped)"
    )


def test_a_file_that_stops_decoding_keeps_serving_its_last_good_version(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "routes.yaml",
        yaml_text(service("first", namespace=None))
        + "---\n"
        + yaml_text(service("second", namespace=None)),
    )
    directory = ManifestDirectory(tmp_path)
    assert keys(directory.load().objects) == ["Service/default/first", "Service/default/second"]

    # An editor saves a typo: the objects the file defined stay, and the error says so.
    path.write_text(
        yaml_text(service("first", namespace=None)) + "---\nkind: Service\nspec: [oops\n"
    )
    os.utime(path, ns=(1, 1))
    typo = directory.load()
    assert keys(typo.objects) == ["Service/default/first", "Service/default/second"]
    [error] = typo.errors
    assert error.origin == "routes.yaml"
    assert error.message.endswith("(still serving its previous version (2 objects))")
    assert keys(directory.load().objects) == keys(typo.objects)  # and on the next reload

    # Fixed: the new content replaces the old, the error goes away.
    path.write_text(yaml_text(service("first", namespace=None)))
    assert keys(directory.load().objects) == ["Service/default/first"]
    assert directory.load().errors == ()


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, "bad.json", '{\n  "apiVersion": "v1",\n  "kind": }\n')
    [error] = ManifestDirectory(tmp_path).load().errors
    assert error.origin == "bad.json"
    assert error.message.startswith("invalid JSON at line 3, column 11:")


def test_duplicate_yaml_keys_are_a_syntax_error(tmp_path: Path) -> None:
    write(tmp_path, "dup.yaml", yaml_text(service("web", namespace=None)) + "kind: Service\n")
    [error] = ManifestDirectory(tmp_path).load().errors
    assert "found duplicate key 'kind'" in error.message
    assert "line 12" in error.message


@pytest.mark.parametrize(
    ("document", "named", "field", "message"),
    [
        ("- a\n- b\n", "", "", "expected a mapping (a Kubernetes object), got a list"),
        ("just text\n", "", "", 'expected a mapping (a Kubernetes object), got "just text"'),
        ("metadata: {name: x}\nkind: Service\n", "Service/default/x", "apiVersion", "is required"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "", "kind", "is required"),
    ],
    ids=["list", "scalar", "no-api-version", "no-kind"],
)
def test_documents_that_are_not_objects_are_reported(
    tmp_path: Path, document: str, named: str, field: str, message: str
) -> None:
    write(
        tmp_path,
        "m.yaml",
        yaml_text(service("a", namespace=None))
        + "---\n"
        + document
        + "---\n"
        + yaml_text(service("b", namespace=None)),
    )

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/a", "Service/default/b"]
    assert result.errors == (SourceError("m.yaml#2", named, field, message),)


def test_empty_documents_and_files_are_fine(tmp_path: Path) -> None:
    write(tmp_path, "empty.yaml", "")
    write(tmp_path, "comments.yaml", "# nothing here\n")
    write(
        tmp_path,
        "gaps.yaml",
        "---\n"
        + yaml_text(service("a", namespace=None))
        + "---\n---\n"
        + yaml_text(service("b", namespace=None))
        + "---\n",
    )

    result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert keys(result.objects) == ["Service/default/a", "Service/default/b"]
    assert result.files == 3


def test_duplicate_object_first_in_path_order_wins(tmp_path: Path) -> None:
    write(tmp_path, "a/web.yaml", yaml_text(service("web", port=80, namespace=None)))
    write(
        tmp_path,
        "b.yaml",
        yaml_text(service("other", namespace=None))
        + "---\n"
        + yaml_text(service("web", port=81, namespace=None)),
    )
    write(
        tmp_path, "c.yaml", yaml_text(service("web", port=82, namespace="shop"))
    )  # another namespace

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == [
        "Service/default/web",
        "Service/default/other",
        "Service/shop/web",
    ]
    web = Store.from_objects(result.objects).services[("default", "web")]
    assert web.ports[0].port == 80
    assert [str(e) for e in result.errors] == [
        "b.yaml#2 Service/default/web: already defined at a/web.yaml#1; the first definition wins"
    ]


def test_list_items_are_loaded_and_named_by_index(tmp_path: Path) -> None:
    write(
        tmp_path,
        "list.yaml",
        textwrap.dedent(
            """\
        apiVersion: v1
        kind: List
        items:
        - {apiVersion: v1, kind: Service, metadata: {name: a}, spec: {ports: [{port: 80}]}}
        - {apiVersion: v1, kind: Service, metadata: {name: b}, spec: {ports: [{port: 0}]}}
        - {apiVersion: v1, kind: Pod, metadata: {name: c}}
        - 42
        """
        ),
    )

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/a"]
    assert [str(e) for e in result.errors] == [
        "list.yaml#1.items[1] Service/default/b: spec.ports[0].port: "
        "expected an integer from 1 to 65535, got 0",
        "list.yaml#1.items[3]: expected a mapping (a Kubernetes object), got 42",
    ]


def test_kinds_dragoman_does_not_read_are_skipped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(
        tmp_path,
        "app.yaml",
        textwrap.dedent(
            """\
        apiVersion: v1
        kind: ServiceAccount
        metadata: {name: shop}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web}
        """
        )
        + "---\n"
        + yaml_text(service("web", namespace=None)),
    )
    with caplog.at_level(logging.DEBUG, logger="dragoman.sources"):
        result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert keys(result.objects) == ["Service/default/web"]
    assert "app.yaml#2: ignoring apps/v1 Deployment" in caplog.messages


def test_default_namespace_applies_to_objects_without_one(tmp_path: Path) -> None:
    write(tmp_path, "s.yaml", yaml_text(service("web", namespace=None)))
    result = ManifestDirectory(tmp_path, default_namespace="shop").load()
    assert result.objects[0].key == ObjectKey("Service", "shop", "web")


def test_invalid_utf8_is_reported(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"kind: \xff\xfe\n")
    [error] = ManifestDirectory(tmp_path).load().errors
    assert error.origin == "bin.yaml"
    assert error.message.startswith("not UTF-8 text")


def test_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        ManifestDirectory(tmp_path / "absent").load()


def test_configmap_style_symlinks_are_followed(tmp_path: Path) -> None:
    # A ConfigMap volume: files are links into a hidden, atomically swapped `..data` dir.
    write(tmp_path, "..2024_01/web.yaml", yaml_text(service("web", namespace=None)))
    (tmp_path / "..data").symlink_to("..2024_01")
    (tmp_path / "web.yaml").symlink_to("..data/web.yaml")
    (tmp_path / "loop").symlink_to(".")

    result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert keys(result.objects) == ["Service/default/web"]


def test_broken_symlink_is_reported(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").symlink_to("nowhere.yaml")
    result = ManifestDirectory(tmp_path).load()
    assert result.errors == (SourceError("gone.yaml", "", "", "cannot read: broken symbolic link"),)


def test_unreadable_subdirectory_is_reported_and_the_rest_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "ok.yaml", yaml_text(service("ok", namespace=None)))
    write(tmp_path, "locked/web.yaml", yaml_text(service("web", namespace=None)))
    real_scandir = os.scandir

    # chmod cannot lock out root, so refuse the listing the way the kernel would.
    def scandir(path: Any) -> Any:
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(tree.os, "scandir", scandir)
    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/ok"]
    assert result.errors == (SourceError("locked", "", "", "cannot read: Permission denied"),)


class ParseCounter:
    """Counts parse_object calls by the loader, per object name."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real: Callable[..., Any] = manifests.parse_object

        def counting(doc: Any, **kwargs: Any) -> Any:
            self.names.append(doc["metadata"]["name"])
            return real(doc, **kwargs)

        monkeypatch.setattr(manifests, "parse_object", counting)

    def take(self) -> list[str]:
        names, self.names = self.names, []
        return names


def test_unchanged_files_are_not_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = ParseCounter(monkeypatch)
    write(tmp_path, "a.yaml", yaml_text(service("a", namespace=None)))
    web = write(tmp_path, "web.yaml", yaml_text(service("web", namespace=None)))
    write(tmp_path, "bad.yaml", yaml_text(service("bad", port=0, namespace=None)))
    directory = ManifestDirectory(tmp_path)

    first = directory.load()
    assert sorted(counter.take()) == ["a", "bad", "web"]

    second = directory.load()
    assert counter.take() == []
    assert second.objects == first.objects
    assert second.errors == first.errors  # cached errors are reported again too
    assert (first.changed, second.changed) == (True, False)
    assert len(second.errors) == 1

    web.write_text(yaml_text(service("web", port=8080, namespace=None)))
    third = directory.load()
    assert counter.take() == ["web"]
    assert Store.from_objects(third.objects).services[("default", "web")].ports[0].port == 8080

    os.replace(web, tmp_path / "renamed.yaml")  # same inode, new path: parsed under its name
    fourth = directory.load()
    assert counter.take() == ["web"]
    assert keys(fourth.objects) == keys(third.objects)

    (tmp_path / "renamed.yaml").unlink()
    fifth = directory.load()
    assert counter.take() == []
    assert keys(fifth.objects) == ["Service/default/a"]


def test_load_result_store_indexes_by_kind(tmp_path: Path) -> None:
    write(
        tmp_path,
        "all.yaml",
        yaml_text(service("web", namespace=None))
        + f"---\napiVersion: {GW}\nkind: HTTPRoute\nmetadata: {{name: web}}\nspec: {{}}\n"
        + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        + "metadata: {name: web-1}\naddressType: FQDN\nendpoints: [{addresses: [a.example]}]\n",
    )
    store = Store.from_objects(ManifestDirectory(tmp_path).load().objects)
    assert isinstance(store.services[("default", "web")], Service)
    assert isinstance(store.http_routes[("default", "web")], HTTPRoute)
    assert isinstance(store.endpoint_slices[("default", "web-1")], EndpointSlice)


def test_a_load_told_what_changed_reads_those_files_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = ParseCounter(monkeypatch)
    write(tmp_path, "b.yaml", flow_service("b"))
    write(tmp_path, "c.yaml", flow_service("c"))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    counter.take()

    # Edited without being named: not looked at (the watcher names every change).
    write(tmp_path, "c.yaml", flow_service("c", port=81))
    write(tmp_path, "b.yaml", flow_service("b", port=82))
    write(tmp_path, "a.yaml", flow_service("a"))
    result = directory.load({"b.yaml", "a.yaml"})
    assert sorted(counter.take()) == ["a", "b"]
    assert keys(result.objects) == ["Service/default/a", "Service/default/b", "Service/default/c"]
    ports = {obj.meta.name: obj.ports[0].port for obj in result.objects}
    assert ports == {"a": 80, "b": 82, "c": 80}

    # A named file whose stamp did not change is not parsed, and nothing changed.
    again = directory.load({"a.yaml"})
    assert counter.take() == []
    assert not again.changed
    assert again.objects == result.objects

    (tmp_path / "a.yaml").unlink()
    gone = directory.load({"a.yaml", "never-existed.yaml"})
    assert keys(gone.objects) == ["Service/default/b", "Service/default/c"]
    assert gone.files == 2

    # What a later full load finds agrees with the incremental ones.
    full = ManifestDirectory(tmp_path).load({"ignored.yaml"})  # first load: always full
    assert keys(full.objects) == keys(directory.load().objects)


def test_a_load_told_what_changed_keeps_the_first_definition_rule(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", flow_service("web", port=81))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    write(tmp_path, "a.yaml", flow_service("web", port=82))  # sorts first: its definition wins
    result = directory.load({"a.yaml"})
    assert [obj.ports[0].port for obj in result.objects] == [82]
    assert [e.origin for e in result.errors] == ["b.yaml#1"]
    assert result == ManifestDirectory(tmp_path).load()


def test_files_added_one_load_at_a_time_take_their_place_in_scan_order(tmp_path: Path) -> None:
    """Among many files, a few new ones are placed among the others (not every path sorted
    again); many at once are sorted. Either way the objects come in the order a full load
    finds them: by path components, so `a/z.yaml` before `a.yaml` before `b/a.yaml`."""

    def add(name: str) -> None:
        label = name.removesuffix(".yaml").replace("/", "-")
        write(tmp_path, name, flow_service(f"s-{label}"))

    names = [f"d{k % 5}/s{k:02}.yaml" if k % 3 else f"s{k:02}.yaml" for k in range(40)]
    for name in names[:32]:
        add(name)
    directory = ManifestDirectory(tmp_path)
    directory.load()
    for name in (*names[32:36], "a/z.yaml", "a.yaml", "b/a.yaml", "0.yaml"):  # one by one
        add(name)
        result = directory.load({name})
        assert keys(result.objects) == keys(ManifestDirectory(tmp_path).load().objects)
    batch = names[36:]  # several at once, with a removal
    for name in batch:
        add(name)
    (tmp_path / names[5]).unlink()
    result = directory.load({*batch, names[5]})
    assert keys(result.objects) == keys(ManifestDirectory(tmp_path).load().objects)
    objects = keys(result.objects)
    assert objects.index("Service/default/s-a-z") < objects.index("Service/default/s-a")
    assert objects.index("Service/default/s-a") < objects.index("Service/default/s-b-a")


def test_a_load_told_what_changed_reports_unreadable_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", flow_service("a"))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    (tmp_path / "a.yaml").unlink()
    (tmp_path / "a.yaml").symlink_to("missing-target.yaml")
    result = directory.load({"a.yaml"})
    assert keys(result.objects) == ["Service/default/a"]  # its last good version
    assert [(e.origin, e.message) for e in result.errors] == [
        (
            "a.yaml",
            "cannot read: broken symbolic link (still serving its previous version (1 objects))",
        )
    ]
    assert replace(result, changed=False) == directory.load()  # a full load finds the same
    fresh = ManifestDirectory(tmp_path).load()  # a first load has nothing to keep serving
    assert fresh.objects == ()
    assert [e.message for e in fresh.errors] == ["cannot read: broken symbolic link"]
    assert directory.unreadable() == {"a.yaml"}
    (tmp_path / "a.yaml").unlink()
    write(tmp_path, "a.yaml", flow_service("a", port=81))
    assert directory.load({"a.yaml"}).errors == ()
    assert directory.unreadable() == frozenset()


def test_the_unreadable_files_kept_between_loads_follow_each_load(tmp_path: Path) -> None:
    """Asked before each load, the answer is brought up to date by the load, not found
    from every record again: it must be what the records say."""
    for name in ("a", "b", "c"):
        write(tmp_path, f"{name}.yaml", flow_service(name))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    assert directory.unreadable() == frozenset()
    (tmp_path / "a.yaml").unlink()
    (tmp_path / "a.yaml").symlink_to("missing-target.yaml")  # kept: its last good version
    (tmp_path / "b.yaml").unlink()
    (tmp_path / "b.yaml").mkdir()
    directory.load({"a.yaml", "b.yaml"})
    assert directory.unreadable() == {"a.yaml", "b.yaml"}
    (tmp_path / "a.yaml").unlink()
    write(tmp_path, "a.yaml", flow_service("a", port=81))
    write(tmp_path, "d.yaml", flow_service("d"))
    directory.load({"a.yaml", "d.yaml"})
    assert directory.unreadable() == {"b.yaml"}
    (tmp_path / "b.yaml").rmdir()
    directory.load({"b.yaml"})  # gone
    assert directory.unreadable() == frozenset()


def break_by_symlink_loop(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.name)


def break_by_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("break_file", [break_by_symlink_loop, break_by_directory])
@pytest.mark.parametrize("told", [True, False], ids=["told-what-changed", "full-load"])
def test_a_file_that_cannot_be_read_keeps_serving_its_last_good_version(
    tmp_path: Path, break_file: Callable[[Path], None], told: bool
) -> None:
    write(tmp_path, "a.yaml", flow_service("a"))
    write(tmp_path, "b.yaml", flow_service("b"))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    break_file(tmp_path / "a.yaml")
    result = directory.load({"a.yaml"} if told else None)
    assert keys(result.objects) == ["Service/default/a", "Service/default/b"]
    assert [(e.origin, e.message.split(":")[0]) for e in result.errors] == [
        ("a.yaml", "cannot read")
    ]
    assert result.errors[0].message.endswith("(still serving its previous version (1 objects))")
    assert "a.yaml" in directory.unreadable()
    # Still unreadable: nothing changed.
    assert not directory.load({"a.yaml"} if told else None).changed
    # Repaired: the new version is served.
    path = tmp_path / "a.yaml"
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink()
    write(tmp_path, "a.yaml", flow_service("a", port=81))
    repaired = directory.load({"a.yaml"} if told else None)
    assert repaired.errors == ()
    assert [s.ports[0].port for s in Store.from_objects(repaired.objects).services.values()] == [
        81,
        80,
    ]


def test_a_read_error_keeps_the_last_good_version_and_is_read_again_with_the_same_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "a.yaml", flow_service("a"))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    real_read = manifests.read_file
    failing = {"on": True}

    def read_file(root: str, relative: str, limit: int) -> Any:
        if failing["on"]:
            return PermissionError(13, "Permission denied")
        return real_read(root, relative, limit)

    monkeypatch.setattr(manifests, "read_file", read_file)
    os.utime(tmp_path / "a.yaml", ns=(1, 1))  # a new stamp: read again, and it fails
    result = directory.load({"a.yaml"})
    assert keys(result.objects) == ["Service/default/a"]
    assert [e.message for e in result.errors] == [
        "cannot read: Permission denied (still serving its previous version (1 objects))"
    ]
    assert directory.unreadable() == {"a.yaml"}
    failing["on"] = False  # a `chmod 644`: the stamp is what it was
    assert directory.load({"a.yaml"}).errors == ()
    assert directory.unreadable() == frozenset()


def flow_service(name: str, port: int = 80) -> str:
    """A Service in flow style, one document of four lines (line numbers are asserted)."""
    return yaml_text(
        service(name, namespace=None, ports=[service_port(port)], selector={}), flow=True
    )


def many_services(names: list[str], port: int = 80) -> str:
    return "---\n".join(flow_service(name, port=port) for name in names)


def test_an_edit_to_one_document_of_a_large_file_parses_that_document_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = ParseCounter(monkeypatch)
    names = [f"s{i}" for i in range(50)]
    path = write(tmp_path, "all.yaml", many_services(names))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    assert len(counter.take()) == 50

    path.write_text(many_services(names).replace("name: s7}", "name: s7b}"))
    edited = directory.load()
    assert counter.take() == ["s7b"]
    assert edited == ManifestDirectory(tmp_path).load()
    counter.take()

    # Documents inserted before the others: every later origin moves, nothing else is parsed.
    path.write_text(flow_service("first", port=0) + "---\n" + path.read_text())
    moved = directory.load()
    assert counter.take() == ["first", "s0"]  # s0 gained the `---` before it
    assert moved == ManifestDirectory(tmp_path).load()
    assert [e.origin for e in moved.errors] == ["all.yaml#1"]


@pytest.mark.parametrize(
    "text",
    [
        "---\n" + flow_service("a") + "---\n" + flow_service("b"),  # a leading marker
        flow_service("a") + "---\n---\n" + flow_service("b") + "---\n",  # empty documents
        flow_service("a") + "--- # a comment after the marker\n" + flow_service("b"),
        flow_service("a") + "...\n---\n" + flow_service("b"),  # an explicit document end
        # A block scalar holding a line that looks like a marker but is indented.
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  x: |\n    ---\n"
        "    not a marker\n---\n" + flow_service("b"),
        flow_service("a") + "---\n" + flow_service("a", port=81),  # a duplicate: the first one wins
        "%YAML 1.1\n---\n" + flow_service("a") + "---\n" + flow_service("b"),  # a directive
        "---\n{apiVersion: v1, kind: Service, metadata: {name: x}}\n--- \n" + flow_service("y"),
    ],
)
def test_a_file_cut_into_documents_means_what_the_whole_file_means(
    tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(manifests, "KEEP_PIECES_FROM", 1)  # reuse pieces of small files too
    import yaml

    from dragoman.sources.decode import split_yaml_documents

    whole = decode_documents(text.encode(), is_json=False)
    pieces = split_yaml_documents(text)
    if pieces is not None:
        assert "".join(piece for _, piece in pieces) == text
        decoded = [d for _, piece in pieces for d in yaml.safe_load_all(piece)]
        assert decoded == list(yaml.safe_load_all(text))
    assert whole == list(yaml.safe_load_all(text))

    write(tmp_path, "all.yaml", text)
    directory = ManifestDirectory(tmp_path)
    first = directory.load()
    write(tmp_path, "all.yaml", flow_service("new") + "---\n" + text)
    again = directory.load()
    assert again == ManifestDirectory(tmp_path).load()
    assert [o.key for o in again.objects[1:]] == [
        o.key for o in first.objects if o.key != again.objects[0].key
    ]


def test_a_yaml_error_in_a_later_document_names_the_files_line(tmp_path: Path) -> None:
    text = many_services(["a", "b"]) + "---\nkind: Service\nmetadata: {name: [oops\n"
    write(tmp_path, "all.yaml", text)
    directory = ManifestDirectory(tmp_path)
    [error] = directory.load().errors
    with pytest.raises(DecodeError) as whole:
        decode_documents(text.encode(), is_json=False)
    assert error.message == f"{whole.value} (file skipped)"
    assert "line 12" in error.message
    # The file keeps serving its last good version once it decoded; here it never did.
    assert directory.load().objects == ()


def test_a_mapping_used_as_a_key_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """`{{name: x}}` (a mapping as a key) is valid YAML: reported, the other files served."""
    (tmp_path / "bad.yaml").write_text("kind: Service\nmetadata: {{name: web}}\n")
    result = ManifestDirectory(tmp_path).load()
    [error] = result.errors
    assert error.origin == "bad.yaml"
    assert "keys must be strings" in error.message


def test_a_load_told_of_edits_and_removals_together_applies_both(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(8)]
    for name in names:
        write(tmp_path, f"{name}.yaml", flow_service(name))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    # Whatever order the paths come in, every edit and every removal counts.
    for name in names[:4]:
        write(tmp_path, f"{name}.yaml", flow_service(name, port=81))
    for name in names[4:]:
        (tmp_path / f"{name}.yaml").unlink()
    result = directory.load({f"{name}.yaml" for name in names})
    assert {obj.meta.name: obj.ports[0].port for obj in result.objects} == dict.fromkeys(
        names[:4], 81
    )
