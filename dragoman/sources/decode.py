"""Bytes of a manifest file become decoded documents (plain dicts, lists and scalars).

YAML is read the way Kubernetes clients read it, with two differences from PyYAML's
defaults: timestamps stay strings (as in JSON), and a key repeated in one mapping is an
error instead of silently keeping the last value.

Files come from whoever can write to the directory: size, nesting depth, expanded size
(aliases) and integer length are bounded before the work they would cost is done, and every
way a file can fail is a DecodeError naming it, never an exception escaping the loader.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from typing import Any

import yaml

from dragoman.sources.bounded_yaml import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    BoundedLoader,
    PrecheckedLoader,
    composable_in_c,
)
from dragoman.sources.simple_yaml import IMPLICIT_RESOLVERS, decode_simple

# A file larger than this is not read at all (Kubernetes stores objects of 1.5 MB at most).
MAX_FILE_BYTES = 16 * 1024 * 1024
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class DecodeError(ValueError):
    """The file is not valid YAML/JSON; the message names the line."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
# How many distinct plain scalars keep their resolved tag (keys and common values repeat in
# every manifest; resolving one means trying several regular expressions).
_TAG_CACHE_SIZE = 4096


class _ManifestLoader(BoundedLoader):
    """libyaml parses; BoundedLoader composes the nodes within its limits (depth, expanded
    size); mappings, sequences and strings (nearly every node of a manifest) are built here in
    one recursive pass (its depth is bounded by the composer's), without PyYAML's generic
    per-node machinery (generators, deep-construction state). Merge keys and uncommon tags
    take PyYAML's own path."""

    yaml_implicit_resolvers = IMPLICIT_RESOLVERS
    _plain_tags: dict[str, str] = {}

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _STR  # quoted: always a string
            # A plain scalar's tag depends on its text alone.
            tag = self._plain_tags.get(value)
            if tag is None:
                # The stubs leave PyYAML's Resolver.resolve untyped.
                tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
                if len(self._plain_tags) < _TAG_CACHE_SIZE and len(value) <= 64:
                    self._plain_tags[value] = tag
            return tag
        return _MAP if kind is yaml.MappingNode else _SEQ

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # Where each document's root node starts: (line, column), both from 0.
        self.document_starts: list[tuple[int, int]] = []

    # No path resolvers are registered: skip PyYAML's bookkeeping for them on every node.
    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass

    def construct_document(self, node: yaml.Node) -> Any:
        self.document_starts.append((node.start_mark.line, node.start_mark.column))
        try:
            return self._build(node, {}, set())
        finally:
            self.constructed_objects = {}
            self.recursive_objects = {}

    def _build(self, node: yaml.Node, built: dict[int, Any], open_: set[int]) -> Any:
        # `built` holds what an anchored node became, so an alias shares it (as in PyYAML).
        known = built.get(id(node), _MISSING)
        if known is not _MISSING:
            return known
        tag = node.tag
        if tag == _STR and isinstance(node, yaml.ScalarNode):
            return node.value
        if id(node) in open_:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "found a recursive alias (an anchor used inside itself)",
                node.start_mark,
            )
        if tag == _MAP and isinstance(node, yaml.MappingNode):
            if any(key.tag == _MERGE for key, _ in node.value):
                value = self.construct_object(node, deep=True)  # PyYAML applies `<<`
            else:
                open_.add(id(node))
                value = {}
                for key_node, value_node in node.value:
                    key = self._build(key_node, built, open_)
                    _check_key(key, value, node, key_node)
                    value[key] = self._build(value_node, built, open_)
                open_.discard(id(node))
        elif tag == _SEQ and isinstance(node, yaml.SequenceNode):
            open_.add(id(node))
            value = [self._build(item, built, open_) for item in node.value]
            open_.discard(id(node))
        else:
            value = self.construct_object(node, deep=True)
        built[id(node)] = value
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # PyYAML's own path (a mapping with merge keys): repeated keys are errors there too.
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue  # `<<: *base` keys may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
            _check_key(key, seen, node, key_node)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


class _PrecheckedManifestLoader(_ManifestLoader, PrecheckedLoader):
    """_ManifestLoader for a text within the limits by its characters: libyaml composes.
    Such a text has no anchor or alias, so its nodes form a tree: each is built once, and
    none can hold itself (no record of what was built, or is being built, is kept)."""

    def construct_document(self, node: yaml.Node) -> Any:
        self.document_starts.append((node.start_mark.line, node.start_mark.column))
        try:
            return self._build_tree(node)
        finally:
            self.constructed_objects = {}
            self.recursive_objects = {}

    def _build_tree(self, node: yaml.Node) -> Any:
        tag = node.tag
        kind = type(node)
        if tag == _STR and kind is yaml.ScalarNode:
            return node.value
        if tag == _MAP and kind is yaml.MappingNode:
            value: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    return self.construct_object(node, deep=True)  # PyYAML applies `<<`
                key = self._build_tree(key_node)
                if type(key) is not str or key in value:
                    _check_key(key, value, node, key_node)
                value[key] = self._build_tree(value_node)
            return value
        if tag == _SEQ and kind is yaml.SequenceNode:
            return [self._build_tree(item) for item in node.value]
        return self.construct_object(node, deep=True)


_MISSING = object()


def _check_key(key: Any, seen: Container[Any], node: yaml.Node, key_node: yaml.Node) -> None:
    if isinstance(key, str) and key in seen:
        raise yaml.constructor.ConstructorError(
            "while reading a mapping",
            node.start_mark,
            f"found duplicate key {key!r}",
            key_node.start_mark,
        )
    if not isinstance(key, str | int | float | bool | None):
        # `{{a: b}}: c` (a mapping as a key) is valid YAML but no Kubernetes object.
        raise yaml.constructor.ConstructorError(
            "while reading a mapping",
            node.start_mark,
            f"found a {type(key).__name__} as a key; keys must be strings",
            key_node.start_mark,
        )


def decode_documents(data: bytes, *, is_json: bool) -> list[Any]:
    """Every document of a file, in order; an empty YAML document decodes to None."""
    text = decode_text(data)
    return [_decode_json(text)] if is_json else _decode_yaml(text)


# Where a document starts in its file (its root node): (line, column), both from 1.
Position = tuple[int, int]


def json_start(data: bytes) -> Position:
    """Where a JSON document's value starts: its first character that is not white space."""
    data = data.removeprefix(b"\xef\xbb\xbf")  # a byte order mark is no column
    offset = len(data) - len(data.lstrip(b" \t\r\n"))
    before = data[:offset]
    return before.count(b"\n") + 1, offset - (before.rfind(b"\n") + 1) + 1


def decode_text(data: bytes) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise DecodeError(f"larger than {MAX_FILE_BYTES} bytes ({len(data)} bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def split_yaml_documents(text: str) -> list[tuple[int, str]] | None:
    """The text cut before each `---` marker: (line number of the piece's first line, minus
    one; the piece). Each piece holds one document (the first may hold none), so a file of
    many documents can decode only the pieces that changed. None when the text uses
    directives (`%YAML`, `%TAG`), whose scope a cut could change.

    The cut is safe: a `---` at the start of a line always starts a document in YAML (it
    ends a block scalar, and is forbidden inside a quoted one)."""
    if text.startswith("%") or "\n%" in text:
        return None
    pieces: list[tuple[int, str]] = []
    start = 0
    line = 0
    for marker in _document_markers(text):
        piece = text[start:marker]
        pieces.append((line, piece))
        line += piece.count("\n")
        start = marker
    pieces.append((line, text[start:]))
    return pieces


def _document_markers(text: str) -> list[int]:
    """Where each document marker starts but at the text's start: `---` at the start of a
    line, alone or followed by a space (str.find, several times faster than a regular
    expression that looks at the start of every line)."""
    markers = []
    at = text.find("\n---")
    while at != -1:
        if text[at + 4 : at + 5] in ("", " ", "\t", "\r", "\n"):
            markers.append(at + 1)
        at = text.find("\n---", at + 4)
    return markers


def decode_yaml_piece(text: str, first_line: int) -> list[Any]:
    """The documents of one piece of `split_yaml_documents`; errors name the file's lines."""
    return _decode_yaml(text, first_line)


def decode_yaml_positioned(text: str, first_line: int = 0) -> tuple[list[Any], list[Position]]:
    """The documents of a YAML text (or a piece of one), each with where it starts."""
    starts: list[Position] = []
    documents = _decode_yaml(text, first_line, starts)
    return documents, starts


def _decode_yaml(text: str, first_line: int = 0, starts: list[Position] | None = None) -> list[Any]:
    simple = decode_simple(text)
    if simple is not None:
        documents, document_starts = simple
    else:
        documents, document_starts = _load_yaml(text, first_line, composable_in_c(text))
    if starts is not None:
        starts.extend((first_line + line + 1, column + 1) for line, column in document_starts)
    return documents


def _load_yaml(
    text: str, first_line: int, prechecked: bool
) -> tuple[list[Any], list[tuple[int, int]]]:
    """The documents of a YAML text by PyYAML and libyaml, and where each root starts."""
    loader_class = _PrecheckedManifestLoader if prechecked else _ManifestLoader
    try:
        loader = loader_class(text)
        try:
            documents = []
            # The stubs leave PyYAML's check_data untyped.
            while loader.check_data():  # type: ignore[no-untyped-call]
                documents.append(loader.get_data())
        finally:
            loader.dispose()
        return documents, loader.document_starts
    except yaml.MarkedYAMLError as exc:
        message = (
            "invalid YAML" + _at(exc.problem_mark, first_line) + f": {exc.problem or exc.context}"
        )
        if exc.problem and exc.context:
            # Where the unfinished construct began is often the line to fix.
            message += f" ({exc.context}{_at(exc.context_mark, first_line)})"
        raise DecodeError(message) from None
    except yaml.YAMLError as exc:
        raise DecodeError(f"invalid YAML: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # A constructor failing on a value the limits let through: the file is still bad,
        # and the server must go on.
        raise DecodeError(f"invalid YAML: {type(exc).__name__}: {exc}") from None


def _at(mark: yaml.Mark | None, first_line: int = 0) -> str:
    return f" at line {first_line + mark.line + 1}, column {mark.column + 1}" if mark else ""


def _decode_json(text: str) -> Any:
    _check_json_depth(text)
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except DecodeError:
        raise
    except (ValueError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"invalid JSON: {type(exc).__name__}: {exc}") from None
    _check_json_strings(document)
    return document


def _check_json_depth(text: str) -> None:
    """Refuses JSON nested deeper than MAX_DEPTH before json.loads recurses into it."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # cannot be deeper than the number of brackets it opens
    depth = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise DecodeError(f"invalid JSON: nested more than {MAX_DEPTH} levels deep")
        else:
            depth -= 1


def _json_int(digits: str) -> int:
    if len(digits) > MAX_INT_DIGITS:
        raise DecodeError(
            f"invalid JSON: found an integer of {len(digits)} digits (at most {MAX_INT_DIGITS})"
        )
    return int(digits)


def _check_json_strings(document: Any) -> None:
    """JSON's \\u escapes can spell half a surrogate pair, which is no Unicode character
    (and cannot be encoded again for Envoy); YAML parsers refuse those themselves."""
    pending = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.keys())
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise DecodeError(
                    "invalid JSON: a string holds an unpaired UTF-16 surrogate "
                    f"({value.encode('utf-8', 'backslashreplace')[:80]!r})"
                ) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # JSON has no line for this; the key is the best pointer there is.
            raise DecodeError(f"invalid JSON: duplicate key {key!r}")
        result[key] = value
    return result
