"""Bytes of a manifest file become decoded documents (plain dicts, lists and scalars).

YAML is read the way Kubernetes clients read it, with two differences from PyYAML's
defaults: timestamps stay strings (as in JSON), and a key repeated in one mapping is an
error instead of silently keeping the last value.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

try:  # libyaml's parser when PyYAML was built with it: several times faster
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


class DecodeError(ValueError):
    """The file is not valid YAML/JSON; the message names the line."""


class _ManifestLoader(_BaseLoader):
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


def _at(mark: yaml.Mark | None) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _decode_json(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # JSON has no line for this; the key is the best pointer there is.
            raise DecodeError(f"invalid JSON: duplicate key {key!r}")
        result[key] = value
    return result
