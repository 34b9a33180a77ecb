"""A manifest directory: files, documents, errors with their origin, duplicates, caching."""

from __future__ import annotations

import json
import logging
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dragoman.objects import EndpointSlice, HTTPRoute, ObjectKey, Service
from dragoman.sources import manifests, tree
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import ManifestDirectory
from dragoman.store import Store

GW = "gateway.networking.k8s.io/v1"


def service(name: str, port: int = 80, namespace: str | None = None) -> str:
    ns = f", namespace: {namespace}" if namespace else ""
    return (
        f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}{ns}}}\n"
        f"spec: {{ports: [{{port: {port}}}]}}\n"
    )


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def keys(objects: tuple[Any, ...]) -> list[str]:
    return [str(obj.key) for obj in objects]


def test_loads_every_manifest_file_below_the_directory_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", service("b"))
    write(tmp_path, "a/z.yml", service("az"))
    write(tmp_path, "a/y/x.yaml", service("ayx"))
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
    write(tmp_path, ".hidden.yaml", service("hidden"))
    write(tmp_path, ".git/config.yaml", service("git"))
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
    assert [s.meta.name for s in store.slices_of("default", "b")] == ["b-1"]


def test_one_bad_document_is_skipped_and_named(tmp_path: Path) -> None:
    write(
        tmp_path,
        "routes.yaml",
        service("web")
        + f"""---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: web}}
spec:
  rules:
  - backendRefs: [{{name: web, port: 80}}, {{name: api, port: http}}]
---
apiVersion: {GW}
kind: HTTPRoute
metadata: {{name: other}}
spec: {{rules: [{{backendRefs: [{{name: web, port: 80}}]}}]}}
""",
    )

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/web", "HTTPRoute/default/other"]
    assert [str(e) for e in result.errors] == [
        "routes.yaml#2 HTTPRoute/default/web: spec.rules[0].backendRefs[1].port: "
        'expected an integer from 1 to 65535, got "http"'
    ]


def test_yaml_syntax_error_names_file_and_line_and_skips_only_that_file(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", service("good"))
    write(tmp_path, "sub/bad.yaml", service("first") + "---\nkind: Service\nspec: [oops\n")

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/good"]
    [error] = result.errors
    assert (error.origin, error.object, error.field) == ("sub/bad.yaml", "", "")
    assert error.message == (
        "invalid YAML at line 8, column 1: did not find expected ',' or ']' "
        "(while parsing a flow sequence at line 7, column 7) (file skipped)"
    )


def test_a_file_that_stops_decoding_keeps_serving_its_last_good_version(tmp_path: Path) -> None:
    path = write(tmp_path, "routes.yaml", service("first") + "---\n" + service("second"))
    directory = ManifestDirectory(tmp_path)
    assert keys(directory.load().objects) == ["Service/default/first", "Service/default/second"]

    # An editor saves a typo: the objects the file defined stay, and the error says so.
    path.write_text(service("first") + "---\nkind: Service\nspec: [oops\n")
    os.utime(path, ns=(1, 1))
    typo = directory.load()
    assert keys(typo.objects) == ["Service/default/first", "Service/default/second"]
    [error] = typo.errors
    assert error.origin == "routes.yaml"
    assert error.message.endswith("(still serving its previous version (2 objects))")
    assert keys(directory.load().objects) == keys(typo.objects)  # and on the next reload

    # Fixed: the new content replaces the old, the error goes away.
    path.write_text(service("first"))
    assert keys(directory.load().objects) == ["Service/default/first"]
    assert directory.load().errors == ()


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    write(tmp_path, "bad.json", '{\n  "apiVersion": "v1",\n  "kind": }\n')
    [error] = ManifestDirectory(tmp_path).load().errors
    assert error.origin == "bad.json"
    assert error.message.startswith("invalid JSON at line 3, column 11:")


def test_duplicate_yaml_keys_are_a_syntax_error(tmp_path: Path) -> None:
    write(tmp_path, "dup.yaml", service("web") + "kind: Service\n")
    [error] = ManifestDirectory(tmp_path).load().errors
    assert "found duplicate key 'kind'" in error.message
    assert "line 5" in error.message


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
    write(tmp_path, "m.yaml", service("a") + "---\n" + document + "---\n" + service("b"))

    result = ManifestDirectory(tmp_path).load()

    assert keys(result.objects) == ["Service/default/a", "Service/default/b"]
    assert result.errors == (SourceError("m.yaml#2", named, field, message),)


def test_empty_documents_and_files_are_fine(tmp_path: Path) -> None:
    write(tmp_path, "empty.yaml", "")
    write(tmp_path, "comments.yaml", "# nothing here\n")
    write(tmp_path, "gaps.yaml", "---\n" + service("a") + "---\n---\n" + service("b") + "---\n")

    result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert keys(result.objects) == ["Service/default/a", "Service/default/b"]
    assert result.files == 3


def test_duplicate_object_first_in_path_order_wins(tmp_path: Path) -> None:
    write(tmp_path, "a/web.yaml", service("web", port=80))
    write(tmp_path, "b.yaml", service("other") + "---\n" + service("web", port=81))
    write(tmp_path, "c.yaml", service("web", port=82, namespace="shop"))  # another namespace

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
        + service("web"),
    )
    with caplog.at_level(logging.DEBUG, logger="dragoman.sources"):
        result = ManifestDirectory(tmp_path).load()

    assert result.errors == ()
    assert keys(result.objects) == ["Service/default/web"]
    assert "app.yaml#2: ignoring apps/v1 Deployment" in caplog.messages


def test_default_namespace_applies_to_objects_without_one(tmp_path: Path) -> None:
    write(tmp_path, "s.yaml", service("web"))
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
    write(tmp_path, "..2024_01/web.yaml", service("web"))
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
    write(tmp_path, "ok.yaml", service("ok"))
    write(tmp_path, "locked/web.yaml", service("web"))
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
    write(tmp_path, "a.yaml", service("a"))
    web = write(tmp_path, "web.yaml", service("web"))
    write(tmp_path, "bad.yaml", service("bad", port=0))
    directory = ManifestDirectory(tmp_path)

    first = directory.load()
    assert sorted(counter.take()) == ["a", "bad", "web"]

    second = directory.load()
    assert counter.take() == []
    assert second == first  # cached errors are reported again too
    assert len(second.errors) == 1

    web.write_text(service("web", port=8080))
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
        service("web")
        + f"---\napiVersion: {GW}\nkind: HTTPRoute\nmetadata: {{name: web}}\nspec: {{}}\n"
        + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        + "metadata: {name: web-1}\naddressType: FQDN\nendpoints: [{addresses: [a.example]}]\n",
    )
    store = Store.from_objects(ManifestDirectory(tmp_path).load().objects)
    assert isinstance(store.services[("default", "web")], Service)
    assert isinstance(store.http_routes[("default", "web")], HTTPRoute)
    assert isinstance(store.endpoint_slices[("default", "web-1")], EndpointSlice)


def test_a_mapping_used_as_a_key_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """`{{name: x}}` (a mapping as a key) is valid YAML: reported, the other files served."""
    (tmp_path / "bad.yaml").write_text("kind: Service\nmetadata: {{name: web}}\n")
    result = ManifestDirectory(tmp_path).load()
    [error] = result.errors
    assert error.origin == "bad.yaml"
    assert "keys must be strings" in error.message
