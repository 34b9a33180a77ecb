"""Where a field of a manifest is in its file: its key, a list's item, or the nearest
ancestor present; YAML (block and flow, several documents) and JSON alike."""

from __future__ import annotations

import json

import pytest

from dragoman.sources.decode import decode_yaml_positioned
from dragoman.sources.field_positions import document_nodes, field_position

ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: shop
  labels: {app.kubernetes.io/name: shop, app: web}
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{path: {value: /}}]
    backendRefs:
    - name: web
      port: 80
    - {name: api, port: 0}
"""


@pytest.mark.parametrize(
    ("path", "position"),
    [
        ("", (1, 1)),
        ("kind", (2, 1)),
        ("spec.parentRefs[0]", (7, 16)),
        ("spec.parentRefs[0].name", (7, 17)),
        ("spec.rules[0]", (9, 5)),
        ("spec.rules[0].backendRefs[0].port", (12, 7)),
        ("spec.rules[0].backendRefs[1]", (13, 7)),
        ("spec.rules[0].backendRefs[1].port", (13, 19)),
        ("spec.rules[0].matches[0].path.value", (9, 23)),
        # A key holding dots is found whole, beside a key it starts with.
        ("metadata.labels.app.kubernetes.io/name", (5, 12)),
        ("metadata.labels.app", (5, 42)),
    ],
)
def test_a_field_is_placed_at_its_key_or_item(path: str, position: tuple[int, int]) -> None:
    [root] = document_nodes(ROUTE, is_json=False) or []
    assert field_position(root, path) == position


@pytest.mark.parametrize(
    ("path", "position"),
    [
        ("spec.rules[0].backendRefs[1].weight", (13, 7)),  # a field left out: its mapping
        ("spec.rules[0].backendRefs[7]", (10, 5)),  # past the end: the list's key
        ("spec.hostnames", (6, 1)),
        ("spec.parentRefs[0].name.more", (7, 17)),  # below a scalar: the scalar's key
        ("spec.rules[x]", (8, 3)),
    ],
)
def test_a_missing_field_is_placed_at_its_nearest_ancestor(
    path: str, position: tuple[int, int]
) -> None:
    [root] = document_nodes(ROUTE, is_json=False) or []
    assert field_position(root, path) == position


def test_every_document_of_a_file_starts_where_loading_saw_it_start() -> None:
    text = "# comment\n---\na: {b: 1}\n---\n---\n\n  c:\n  - d: 2\n"
    roots = document_nodes(text, is_json=False) or []
    _, starts = decode_yaml_positioned(text)
    assert [(r.start_mark.line + 1, r.start_mark.column + 1) for r in roots] == starts
    assert field_position(roots[0], "a.b") == (3, 5)
    assert field_position(roots[2], "c[0].d") == (8, 5)


def test_a_json_file_is_placed_as_yaml_is_even_where_yaml_would_refuse_it() -> None:
    # Tabs for indentation and an escaped surrogate pair: valid JSON that YAML refuses.
    document = {"kind": "X", "spec": {"rules": [{"a": 1}, {"b": [1, {"c": "\U0001f600"}]}]}}
    text = json.dumps(document, indent="\t")
    [root] = document_nodes(text, is_json=True) or []
    lines = text.splitlines()

    def where(key: str, occurrence: int = 0) -> tuple[int, int]:
        found = [(n, line.index(f'"{key}"')) for n, line in enumerate(lines) if f'"{key}"' in line]
        line, column = found[occurrence]
        return line + 1, column + 1

    assert field_position(root, "") == (1, 1)
    assert field_position(root, "kind") == where("kind")
    assert field_position(root, "spec.rules[1].b[1].c") == where("c")
    brace = where("c")[0] - 1  # the line of the `{` opening the mapping that lacks `d`
    assert field_position(root, "spec.rules[1].b[1].d") == (brace, lines[brace - 1].index("{") + 1)
    compact = '{"a":{"b":[1,{"c":"x\\"y,:"}],"d":null}}'
    [root] = document_nodes(compact, is_json=True) or []
    assert field_position(root, "a.d") == (1, compact.index('"d"') + 1)
    assert field_position(root, "a.b[1].c") == (1, compact.index('"c"') + 1)


@pytest.mark.parametrize(
    ("text", "is_json"), [("a: [unclosed\n", False), ('{"a": [1}', True), ("}", True)]
)
def test_a_text_that_does_not_compose_has_no_nodes(text: str, is_json: bool) -> None:
    assert document_nodes(text, is_json=is_json) is None


def test_anchors_and_deep_nesting_are_composed_within_the_loading_limits() -> None:
    text = "base: &b {port: 80}\nspec:\n  ports:\n  - *b\n"
    [root] = document_nodes(text, is_json=False) or []
    assert field_position(root, "spec.ports[0].port") == (1, 11)  # where the anchor's is
    assert document_nodes("[" * 5000 + "]" * 5000, is_json=False) is None
