"""Manifests named on a command line: files, directories and standard input."""

from __future__ import annotations

import io
from pathlib import Path

from dragoman.sources.decode import MAX_FILE_BYTES
from dragoman.sources.paths import load_paths

SERVICE = """apiVersion: v1
kind: Service
metadata: {name: NAME, namespace: default}
spec: {selector: {app: web}, ports: [{port: 80}]}
"""


def service(name: str) -> str:
    return SERVICE.replace("NAME", name)


def test_files_directories_and_stdin_in_the_order_given(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.yaml").write_text(service("a"))
    (tmp_path / "b.txt").write_text(service("b"))  # a file named is read whatever its suffix
    stdin = io.BytesIO(service("c").encode())
    result = load_paths([str(tmp_path / "dir"), str(tmp_path / "b.txt"), "-"], stdin)
    assert [obj.key.name for obj in result.objects] == ["a", "b", "c"]
    assert result.errors == ()
    assert result.files == 3
    origins = {key.name: origin for key, origin in result.origins.items()}
    assert origins == {
        "a": f"{tmp_path / 'dir'}/a.yaml#1",
        "b": f"{tmp_path / 'b.txt'}#1",
        "c": "-#1",
    }


def test_an_object_defined_twice_keeps_its_first_definition(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(service("a") + "---\n" + service("a"))
    stdin = io.BytesIO(service("a").encode())
    result = load_paths([str(tmp_path / "a.yaml"), "-"], stdin)
    assert len(result.objects) == 1
    assert [(e.origin, e.message) for e in result.errors] == [
        (
            f"{tmp_path / 'a.yaml'}#2",
            f"already defined at {tmp_path / 'a.yaml'}#1; the first definition wins",
        ),
        ("-#1", f"already defined at {tmp_path / 'a.yaml'}#1; the first definition wins"),
    ]


def test_standard_input_is_bounded_as_a_file_is() -> None:
    stdin = io.BytesIO(b"#" * (MAX_FILE_BYTES + 10))
    result = load_paths(["-"], stdin)
    assert result.objects == ()
    assert len(result.errors) == 1
    assert result.errors[0].origin == "-"
    assert "larger than" in result.errors[0].message
    assert stdin.tell() == MAX_FILE_BYTES + 1  # never read further


def test_a_missing_or_invalid_file_is_an_error_of_that_file(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    result = load_paths([str(tmp_path / "nope.yaml"), str(tmp_path / "bad.json")], io.BytesIO())
    assert [e.origin for e in result.errors] == [
        str(tmp_path / "nope.yaml"),
        str(tmp_path / "bad.json"),
    ]
    assert "cannot read" in result.errors[0].message


def test_a_misspelled_kind_is_a_warning_not_an_error(tmp_path: Path) -> None:
    typo = service("a").replace("kind: Service", "kind: Servic")
    other = service("b").replace("apiVersion: v1", "apiVersion: serving.knative.dev/v1")
    (tmp_path / "a.yaml").write_text(typo + "---\n" + other)
    result = load_paths([str(tmp_path)], io.BytesIO())
    assert result.objects == () and result.errors == ()
    [warning] = result.warnings
    assert warning.origin == f"{tmp_path}/a.yaml#1"
    assert warning.severity == "warning" and warning.field == "kind"
    assert warning.message.endswith("Did you mean Service?")
