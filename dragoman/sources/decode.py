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
from typing import Any

import yaml

from dragoman.sources.bounded_yaml import MAX_DEPTH, MAX_INT_DIGITS, BoundedLoader

# A file larger than this is not read at all (Kubernetes stores objects of 1.5 MB at most).
MAX_FILE_BYTES = 16 * 1024 * 1024
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")


class DecodeError(ValueError):
    """The file is not valid YAML/JSON; the message names the line."""


class _ManifestLoader(BoundedLoader):
    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` keys may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
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
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def decode_documents(data: bytes, *, is_json: bool) -> list[Any]:
    """Every document of a file, in order; an empty YAML document decodes to None."""
    if len(data) > MAX_FILE_BYTES:
        raise DecodeError(f"larger than {MAX_FILE_BYTES} bytes ({len(data)} bytes)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    return [_decode_json(text)] if is_json else _decode_yaml(text)


def _decode_yaml(text: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_ManifestLoader))
    except yaml.MarkedYAMLError as exc:
        message = "invalid YAML" + _at(exc.problem_mark) + f": {exc.problem or exc.context}"
        if exc.problem and exc.context:
            # Where the unfinished construct began is often the line to fix.
            message += f" ({exc.context}{_at(exc.context_mark)})"
        raise DecodeError(message) from None
    except yaml.YAMLError as exc:
        raise DecodeError(f"invalid YAML: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        # A constructor failing on a value the limits let through: the file is still bad,
        # and the server must go on.
        raise DecodeError(f"invalid YAML: {type(exc).__name__}: {exc}") from None


def _at(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


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
