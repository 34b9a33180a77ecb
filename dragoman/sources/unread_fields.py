"""The fields of an object's spec its parser never looked at: misspelled (`backendRef` for
`backendRefs`), or fields dragoman does not know, which it ignores.

Found for `dragoman check` alone (a server does not pay for it): the document is parsed
through mappings that note every key the parser asks for, present or not. A key of the
spec it never asked for is reported, with the field it most likely meant among those it
asked for at that place. Only the Gateway API's and dragoman's own kinds are judged so: a
core object (a Service from `kubectl get -o yaml`) holds many fields dragoman has no use
for, on purpose.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from dragoman.objects import KubeObject
from dragoman.objects.kinds import KINDS
from dragoman.sources.errors import FieldProblem, printable
from dragoman.sources.parse import parse_object
from dragoman.sources.suggestions import closest

# The kinds whose every spec field the parser reads (or reports): not the core group's.
_JUDGED_KINDS = frozenset(kind.kind for kind in KINDS if kind.group)


class _Noting(dict[Any, Any]):
    """A mapping that notes the keys asked for (iterating it asks for every key)."""

    __slots__ = ("asked",)

    def __init__(self, items: Mapping[Any, Any]) -> None:
        super().__init__(items)
        self.asked: set[Any] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: Any) -> Any:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[Any]:
        self.asked.update(super().keys())
        return super().__iter__()

    def keys(self) -> Any:
        self.asked.update(super().keys())
        return super().keys()

    def items(self) -> Any:
        self.asked.update(super().keys())
        return super().items()

    def values(self) -> Any:
        self.asked.update(super().keys())
        return super().values()


def _noting(value: Any) -> Any:
    """`value` with every mapping in it noting the keys asked for (depth is bounded by the
    decoder's limit)."""
    if isinstance(value, Mapping):
        return _Noting({key: _noting(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_noting(item) for item in value]
    return value


def parse_noting_unread(
    doc: Mapping[str, Any], *, default_namespace: str = "default"
) -> tuple[KubeObject | None, list[FieldProblem]]:
    """`parse_object`, and the fields of the spec the parser never asked for (field path,
    message), for the kinds judged so. Raises ObjectError as `parse_object` does."""
    kind = doc.get("kind")
    if kind not in _JUDGED_KINDS:
        return parse_object(doc, default_namespace=default_namespace), []
    noting = _noting(doc)
    parsed = parse_object(noting, default_namespace=default_namespace)
    if parsed is None:
        return None, []
    spec = dict.get(noting, "spec")  # not noted: reading it here is not the parser's
    return parsed, list(_unread(spec, "spec", str(kind)))


def _unread(value: Any, path: str, kind: str) -> Iterator[FieldProblem]:
    if isinstance(value, list):
        for index, item in enumerate(value):
            yield from _unread(item, f"{path}[{index}]", kind)
        return
    if not isinstance(value, _Noting) or not value.asked:
        return  # a mapping the parser asked nothing of is taken whole (or refused whole)
    asked = value.asked
    for key in dict.keys(value):
        where = f"{path}.{key}"
        if key in asked:
            yield from _unread(dict.__getitem__(value, key), where, kind)
            continue
        meant = closest(str(key), (k for k in asked if isinstance(k, str)))
        hint = f"; did you mean {meant}?" if meant is not None else ""
        yield printable(where), f"dragoman knows no such field of {kind}: ignored{hint}"
