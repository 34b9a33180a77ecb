"""Where each document of a manifest file starts: line and column, from 1."""

from __future__ import annotations

from pathlib import Path

from dragoman.sources.decode import decode_yaml_positioned, json_start
from dragoman.sources.manifests import KEEP_PIECES_FROM, ManifestDirectory


def service(name: str) -> str:
    return (
        f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\n"
        "spec: {ports: [{port: 80}]}\n"
    )


def test_a_document_starts_where_its_root_node_does() -> None:
    documents, starts = decode_yaml_positioned("a: 1\n---\n\n  b: 2\n--- \n- x\n", 10)
    assert documents == [{"a": 1}, {"b": 2}, ["x"]]
    assert starts == [(11, 1), (14, 3), (16, 1)]


def test_json_starts_at_its_first_character_that_is_not_white_space() -> None:
    assert json_start(b'{"a": 1}') == (1, 1)
    assert json_start(b'\n\n   {"a": 1}') == (3, 4)
    assert json_start(b'\xef\xbb\xbf {"a": 1}') == (1, 2)


def test_origins_are_placed_in_their_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("# services\n" + service("a") + "---\n" + service("b"))
    (tmp_path / "list.json").write_text(
        '\n{"apiVersion": "v1", "kind": "List", "items": [' + _json_service("c") + "]}"
    )
    result = ManifestDirectory(tmp_path).load()
    places = {key.name: result.position(origin) for key, origin in result.origins.items()}
    assert places == {"a": (2, 1), "b": (7, 1), "c": (2, 1)}
    assert result.position("a.yaml") is None  # a file alone
    assert result.position("a.yaml#9") is None  # no such document


def test_positions_follow_a_piece_that_moved_in_a_large_file(tmp_path: Path) -> None:
    names = [f"s{i}" for i in range(KEEP_PIECES_FROM + 2)]
    path = tmp_path / "many.yaml"
    path.write_text("---\n".join(service(name) for name in names))
    directory = ManifestDirectory(tmp_path)
    directory.load()
    path.write_text("# one more line\n" + "---\n".join(service(name) for name in names[1:]))
    result = directory.load()
    places = {key.name: result.position(origin) for key, origin in result.origins.items()}
    assert places["s1"] == (2, 1)
    assert places["s2"] == (7, 1)


def _json_service(name: str) -> str:
    return (
        '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "' + name + '"}, '
        '"spec": {"ports": [{"port": 80}]}}'
    )


def test_misspelled_kinds_name_the_kind_meant() -> None:
    from dragoman.sources.parse import misspelled_kind

    def doc(api_version: str, kind: str) -> dict[str, object]:
        return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "a"}}

    route = misspelled_kind(doc("gateway.networking.k8s.io/v1", "HTTPRoutes"))
    assert route is not None and route[2].endswith("Did you mean HTTPRoute?")
    lower = misspelled_kind(doc("v1", "service"))
    assert lower is not None and lower[2].endswith("Did you mean Service?")
    wrong_group = misspelled_kind(doc("v1", "HTTPRoute"))
    assert wrong_group is not None and wrong_group[1] == "apiVersion"
    assert "gateway.networking.k8s.io/v1" in wrong_group[2]
    assert misspelled_kind(doc("apps/v1", "Deployment")) is None
    assert misspelled_kind(doc("serving.knative.dev/v1", "Service")) is None  # another group
    assert misspelled_kind(doc("v1", "Pod")) is None
