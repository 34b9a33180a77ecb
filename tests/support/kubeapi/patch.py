"""PATCH bodies: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Strategic merge patch is applied as a merge patch: lists are replaced rather than merged
by key, and `$`-directives are dropped. That is enough for the objects the tests write.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.support.kubeapi.errors import ApiError

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strip_directives(patch: Any) -> Any:
    """Drops strategic-merge directives such as `$patch` and `$setElementOrder/...`."""
    if isinstance(patch, dict):
        return {k: strip_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [strip_directives(item) for item in patch]
    return patch


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _unprocessable(f"invalid JSON pointer: {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    if not parts:
        raise _unprocessable("the root of the document cannot be the target of this operation")
    node = doc
    for part in parts[:-1]:
        node = _child(node, part)
    return node, parts[-1]


def _child(node: Any, part: str) -> Any:
    try:
        if isinstance(node, list):
            return node[int(part)]
        return node[part]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _unprocessable(f"path element {part!r} does not exist") from None


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    node, last = _parent(doc, parts)
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if not 0 <= index <= len(node):
            raise _unprocessable(f"index {last} out of range")
        node.insert(index, copy.deepcopy(value))
    elif isinstance(node, dict):
        node[last] = copy.deepcopy(value)
    else:
        raise _unprocessable(f"cannot add to {path!r}")
    return doc


def _remove(doc: Any, path: str) -> Any:
    node, last = _parent(doc, _pointer(path))
    try:
        if isinstance(node, list):
            del node[int(last)]
        else:
            del node[last]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _unprocessable(f"cannot remove missing path {path!r}") from None
    return doc


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        node = _child(node, part)
    return node


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for operation in operations:
        op, path = operation.get("op"), operation.get("path", "")
        if op == "add":
            doc = _add(doc, path, operation.get("value"))
        elif op == "remove":
            doc = _remove(doc, path)
        elif op == "replace":
            _get(doc, path)  # the target must exist
            value = operation.get("value")
            doc = _add(_remove(doc, path), path, value) if path else copy.deepcopy(value)
        elif op in ("move", "copy"):
            value = copy.deepcopy(_get(doc, operation.get("from", "")))
            if op == "move":
                doc = _remove(doc, operation.get("from", ""))
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation.get("value"):
                raise _unprocessable(f"testing value {path!r} failed")
        else:
            raise _unprocessable(f"unknown JSON patch operation {op!r}")
    return doc
