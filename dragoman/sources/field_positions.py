"""Where a field of a manifest is in its file (line and column), for messages that name it.

Loading keeps only where each document starts: a server reading thousands of files needs
the values, not the place of every key. `dragoman check` composes again, as YAML nodes with
their marks, the files it reports problems in (a JSON file becomes the same nodes), and
finds here the node each problem's field path names.
"""

from __future__ import annotations

import bisect
import json
import re

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from dragoman.sources.bounded_yaml import BoundedLoader, PrecheckedLoader, composable_in_c
from dragoman.sources.decode import Position

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# A JSON token: a string, a bracket or punctuation, or a bare scalar (number, true, null).
_NEWLINE = re.compile("\n")
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|[^\s{}\[\],:"]+', re.DOTALL)


def document_nodes(text: str, *, is_json: bool) -> list[Node] | None:
    """The root node of every document of a file's text, in order (a JSON file: one); None
    when the text does not compose (then only where documents start is known)."""
    if is_json:
        return _json_nodes(text)
    loader_class = PrecheckedLoader if composable_in_c(text) else BoundedLoader
    try:
        loader = loader_class(text)
        try:
            roots = []
            while loader.check_node():
                node = loader.get_node()
                if node is not None:
                    roots.append(node)
            return roots
        finally:
            loader.dispose()
    except (yaml.YAMLError, ValueError, RecursionError, MemoryError):
        return None


def field_position(root: Node, path: str) -> Position:
    """Where the field `path` ("spec.rules[0].backendRefs[1].port", "" for the object
    itself) is below `root`, as (line, column) from 1: a mapping's entry at its key, a list's
    item at its value. A field that is not there (a required field left out) is placed at
    the nearest of its ancestors that is."""
    node, mark = root, root.start_mark
    rest = path
    while rest:
        if isinstance(node, SequenceNode) and rest.startswith("["):
            index, closed, after = rest[1:].partition("]")
            if not closed or not index.isdigit() or int(index) >= len(node.value):
                break
            node = node.value[int(index)]
            mark, rest = node.start_mark, after
        elif isinstance(node, MappingNode):
            entry = _entry(node, rest)
            if entry is None:
                break
            key, node, rest = entry
            mark = key.start_mark
        else:
            break
        rest = rest.removeprefix(".")
    return mark.line + 1, mark.column + 1


def _entry(node: MappingNode, path: str) -> tuple[Node, Node, str] | None:
    """The entry of `node` that `path` starts with (its key, its value, the rest of the
    path); the longest key wins, so a key holding dots (`app.kubernetes.io/name`) is found
    whole."""
    found: tuple[Node, Node, str] | None = None
    for key, value in node.value:
        name = key.value if isinstance(key, ScalarNode) else None
        if not isinstance(name, str) or not path.startswith(name):
            continue
        rest = path[len(name) :]
        if rest and rest[0] not in ".[":
            continue
        if found is None or len(rest) < len(found[2]):
            found = key, value, rest
    return found


def _json_nodes(text: str) -> list[Node] | None:
    """A JSON text (already decoded once, so valid) as YAML nodes with their marks."""
    lines = [match.start() for match in _NEWLINE.finditer(text)]

    def mark(index: int) -> yaml.Mark:
        line = bisect.bisect_left(lines, index)
        column = index - (lines[line - 1] + 1 if line else 0)
        return yaml.Mark("", index, line, column, "", 0)  # no buffer kept: no snippet

    open_: list[tuple[MappingNode | SequenceNode, list[Node]]] = []  # with a key waiting
    root: Node | None = None
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in ",:":
            continue
        if token in "}]":
            if not open_:
                return None
            closed: Node = open_.pop()[0]
            if not open_:
                root = closed
            continue
        if token in "{[":
            kind = MappingNode if token == "{" else SequenceNode
            node: Node = kind(_MAP if token == "{" else _SEQ, [], mark(match.start()))
        else:
            try:
                value = json.loads(token) if token.startswith('"') else token
            except ValueError:
                return None
            node = ScalarNode(_STR, str(value), mark(match.start()))
        if open_:
            _attach(open_[-1], node)
        elif root is None:
            root = node
        if isinstance(node, MappingNode | SequenceNode):
            open_.append((node, []))
    return [root] if root is not None and not open_ else None


def _attach(parent_waiting: tuple[MappingNode | SequenceNode, list[Node]], node: Node) -> None:
    """`node` into its collection: a list's item, or a mapping's key or value."""
    parent, waiting = parent_waiting
    if isinstance(parent, SequenceNode):
        parent.value.append(node)
    elif not waiting:
        waiting.append(node)  # a key; its value comes next
    else:
        parent.value.append((waiting.pop(), node))
