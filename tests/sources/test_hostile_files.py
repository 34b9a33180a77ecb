"""Files built to exhaust the stack, the CPU or memory: each is reported as a problem with
that file and skipped, while every other file keeps being served. Several of these killed
the process (SIGSEGV in the C YAML composer) or escaped as tracebacks before the loader
bounded depth, expanded size and integer length ahead of the work they cost."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dragoman.sources.bounded_yaml import MAX_DEPTH, MAX_NODES
from dragoman.sources.decode import MAX_FILE_BYTES, DecodeError, decode_documents
from dragoman.sources.manifests import ManifestDirectory
from dragoman.sources.tree import MAX_DIRECTORY_DEPTH

GOOD = """
apiVersion: v1
kind: Service
metadata: {name: good, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""
# Refusing these must not depend on a machine's speed; this only catches a hang.
QUICKLY_S = 10.0

DEEP = 40_000
HOSTILE_FILES: dict[str, str] = {
    # The probe's exact file: 80 KB that crashed render, status and serve with SIGSEGV.
    "flow.yaml": "x: " + "[" * DEEP + "]" * DEEP + "\n",
    # Over the depth limit, within libyaml's own (recent libyaml stops at 1,000 flow levels).
    "flow-over-limit.yaml": "x: " + "[" * (MAX_DEPTH + 50) + "]" * (MAX_DEPTH + 50) + "\n",
    "flow-mappings.yaml": "x: " + "{a: " * DEEP + "b" + "}" * DEEP + "\n",
    # Block style: compact nested sequences nest one level per "- ".
    "block.yaml": "x:\n" + "- " * DEEP + "a\n",
    # Complex keys nest one level per "? ".
    "complex-keys.yaml": "? " * DEEP + "a\n",
    # Block mappings by indentation (deep enough to pass any sane limit).
    "indented.yaml": "".join(" " * level + f"k{level}:\n" for level in range(2 * MAX_DEPTH))
    + " " * 2 * MAX_DEPTH
    + "v\n",
    "deep.json": '{"x": ' + "[" * 5_000 + "]" * 5_000 + "}",
    "big-int.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: a, generation: "
    + "9" * 5_000
    + "}\n",
    "big-int.json": '{"apiVersion": "v1", "kind": "Service", "metadata": {"generation": '
    + "9" * 5_000
    + "}}",
    # int() of a sexagesimal integer multiplies a growing number per component: quadratic.
    "sexagesimal.yaml": "x: 1" + ":59" * 200_000 + "\n",
    "surrogate.json": '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "\\ud800"}}',
}


def write(directory: Path, name: str, text: str) -> None:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def route_alias_bomb() -> str:
    """The probe's 9.7 KB HTTPRoute: 1,000 rules, each the same 1,000 matches by alias."""
    matches = "\n".join(f"    - path: {{type: PathPrefix, value: /p{i}}}" for i in range(1000))
    rules = ", ".join(["*rule"] * 999)
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: bomb, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  x-matches: &matches
{matches}
  rules: [&rule {{matches: *matches, backendRefs: [{{name: good, port: 80}}]}}, {rules}]
"""


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_hostile_file_is_reported_and_the_rest_is_served(tmp_path: Path, name: str) -> None:
    write(tmp_path, "good.yaml", GOOD)
    write(tmp_path, name, HOSTILE_FILES[name])

    started = time.monotonic()
    result = ManifestDirectory(tmp_path).load()

    assert time.monotonic() - started < QUICKLY_S
    assert [str(obj.key) for obj in result.objects] == ["Service/default/good"]
    [error] = result.errors
    assert error.origin == name
    assert "file skipped" in error.message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # Where libyaml itself stops, or (older libyaml) where the limit was crossed.
        ("flow.yaml", "nested more than 100 levels deep"),
        (
            "flow-over-limit.yaml",
            f"invalid YAML at line 1, column {MAX_DEPTH + 3}: nested more than 100 levels deep",
        ),
        ("block.yaml", "nested more than 100 levels deep"),
        ("complex-keys.yaml", "nested more than 100 levels deep"),
        ("deep.json", "invalid JSON: nested more than 100 levels deep"),
        ("big-int.yaml", "found an integer of 5000 characters (at most 4300)"),
        ("big-int.json", "found an integer of 5000 digits (at most 4300)"),
        ("surrogate.json", "unpaired UTF-16 surrogate"),
    ],
)
def test_hostile_file_errors_say_what_limit_and_where(name: str, expected: str) -> None:
    with pytest.raises(DecodeError) as raised:
        decode_documents(HOSTILE_FILES[name].encode(), is_json=name.endswith(".json"))
    assert expected in str(raised.value)


def test_render_survives_the_probe_file(tmp_path: Path) -> None:
    """In a process of its own: a crash in C code would kill it (exit 139), not raise."""
    write(tmp_path, "good.yaml", GOOD)
    write(tmp_path, "flow.yaml", HOSTILE_FILES["flow.yaml"])
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "render", "--manifests", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "flow.yaml: invalid YAML at line 1" in result.stderr
    assert "nested more than 100 levels deep" in result.stderr


def test_nesting_up_to_the_limit_is_read() -> None:
    depth = MAX_DEPTH - 1  # the document's own mapping is a level too
    [document] = decode_documents(("x: " + "[" * depth + "]" * depth).encode(), is_json=False)
    assert isinstance(document["x"], list)
    [document] = decode_documents(
        ('{"x": ' + "[" * depth + "]" * depth + "}").encode(), is_json=True
    )
    assert isinstance(document["x"], list)


def test_brackets_inside_json_strings_do_not_count_as_nesting() -> None:
    text = '{"regex": "' + "[" * 500 + '\\"[", "x": [1]}'
    [document] = decode_documents(text.encode(), is_json=True)
    assert document["x"] == [1]


@pytest.mark.parametrize("text", [alias_bomb(), route_alias_bomb()], ids=["laughs", "route"])
def test_aliases_are_bounded_by_the_values_they_stand_for(tmp_path: Path, text: str) -> None:
    write(tmp_path, "good.yaml", GOOD)
    write(tmp_path, "bomb.yaml", text)

    started = time.monotonic()
    result = ManifestDirectory(tmp_path).load()

    assert time.monotonic() - started < QUICKLY_S
    assert [str(obj.key) for obj in result.objects] == ["Service/default/good"]
    [error] = result.errors
    assert error.origin == "bomb.yaml"
    assert f"more than {MAX_NODES} values" in error.message


def test_aliases_within_the_limit_are_expanded() -> None:
    [document] = decode_documents(alias_bomb(levels=3, width=3).encode(), is_json=False)
    assert document["a3"] == [[[["lol"]] * 3] * 3] * 3


def test_alias_depth_counts_toward_the_nesting_limit() -> None:
    half = MAX_DEPTH // 2 + 5
    text = "a: &deep " + "[" * half + "]" * half + "\nb: " + "[" * half + "*deep" + "]" * half
    with pytest.raises(DecodeError, match="nested more than"):
        decode_documents(text.encode(), is_json=False)


def test_recursive_alias_is_an_error() -> None:
    with pytest.raises(DecodeError, match="recursive alias"):
        decode_documents(b"a: &a [1, *a]\n", is_json=False)


def test_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    write(tmp_path, "good.yaml", GOOD)
    with (tmp_path / "huge.yaml").open("wb") as file:
        file.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    result = ManifestDirectory(tmp_path).load()
    assert [str(obj.key) for obj in result.objects] == ["Service/default/good"]
    [error] = result.errors
    assert error.origin == "huge.yaml"
    assert f"larger than {MAX_FILE_BYTES} bytes" in error.message


def test_directories_nested_too_deep_are_reported_and_the_rest_is_served() -> None:
    # Outside pytest's tmp_path: its clean-up of old runs (shutil.rmtree) recurses per level.
    tmp_path = Path(tempfile.mkdtemp(prefix="dragoman-deep-"))
    write(tmp_path, "good.yaml", GOOD)
    deep = tmp_path
    for _ in range(1_000):  # one by one: Path.mkdir(parents=True) recurses itself
        deep = deep / "d"
        deep.mkdir()
    write(deep, "lost.yaml", GOOD.replace("good", "lost"))
    shallow = tmp_path / "/".join(["d"] * MAX_DIRECTORY_DEPTH)
    write(shallow, "kept.yaml", GOOD.replace("good", "kept"))

    try:
        result = ManifestDirectory(tmp_path).load()
    finally:
        _remove_chain(tmp_path / "d")
        (tmp_path / "good.yaml").unlink()
        tmp_path.rmdir()

    assert sorted(str(obj.key) for obj in result.objects) == [
        "Service/default/good",
        "Service/default/kept",
    ]
    [error] = result.errors
    assert error.origin == "/".join(["d"] * (MAX_DIRECTORY_DEPTH + 1))
    assert f"nested more than {MAX_DIRECTORY_DEPTH} directories deep" in error.message


def _remove_chain(top: Path) -> None:
    """Removes a chain of nested directories deepest first (shutil.rmtree recurses, and
    pytest's clean-up of old temporary directories would fail on it)."""
    chain = [top]
    while (chain[-1] / "d").is_dir():
        chain.append(chain[-1] / "d")
    for directory in reversed(chain):
        for entry in directory.iterdir():
            if not entry.is_dir():
                entry.unlink()
        directory.rmdir()


def test_lists_over_their_item_limit_are_not_read_item_by_item(tmp_path: Path) -> None:
    """20,000 bad rules: one problem (the limit), not 20,000 (each rule read)."""
    rules = ", ".join(["{backendRefs: [{name: x}]}"] * 20_000)  # each lacks a port
    write(
        tmp_path,
        "route.yaml",
        f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: many, namespace: default}}
spec:
  rules: [{rules}]
""",
    )
    result = ManifestDirectory(tmp_path).load()
    assert [(e.field, e.message) for e in result.errors] == [
        ("spec.rules", "must have at most 16 items, got 20000")
    ]


def test_the_expanded_size_limit_holds_for_the_whole_file() -> None:
    """Documents each under the limit add up: the bound is per file, not per document."""
    one = alias_bomb(levels=5, width=10)  # about 111,111 values
    decode_documents(one.encode(), is_json=False)
    with pytest.raises(DecodeError, match=f"more than {MAX_NODES} values"):
        decode_documents("---\n".join([one] * 10).encode(), is_json=False)
