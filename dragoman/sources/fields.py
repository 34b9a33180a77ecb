"""Typed reads from a decoded YAML/JSON mapping that collect every problem with its path.

A parser reads through `Node`s and never stops at the first problem: the caller raises one
`ObjectError` with all of them. Reads that fail return a placeholder of the right type,
which is never seen because an object with problems is discarded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from dragoman.objects.meta import EMPTY_MAPPING
from dragoman.sources.errors import FieldProblem
from dragoman.sources.formats import Format
from dragoman.sources.shared import interned, shared_int

REQUIRED = "is required"
# A string enumeration: the values of a Literal.
Choice = TypeVar("Choice", bound=str)
# Strings read into objects are interned (`dragoman.sources.shared`): namespaces, kinds,
# groups, port and Gateway names, label keys, and an object's name beside the references to
# it repeat in thousands of objects. Values read with `unique=True` (a route's hostnames, an
# external name, a uid: one object's own) are kept as read: interning them would only grow
# the interpreter's table of interned strings. Ints are shared too.


def describe(value: Any) -> str:
    """A value as a message shows it: JSON-like scalars, and the type for containers."""
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        return json.dumps(shown)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


def is_integer(value: Any) -> bool:
    # YAML `true` is a bool, and bool is an int in Python; the API server would reject it.
    return isinstance(value, int) and not isinstance(value, bool)


def integer_range(minimum: int, maximum: int) -> str:
    return f"an integer from {minimum} to {maximum}"


class Node:
    """A mapping inside one object, with its field path and the object's problem list."""

    __slots__ = ("data", "path", "problems")

    def __init__(self, data: Mapping[str, Any], path: str, problems: list[FieldProblem]) -> None:
        self.data = data
        self.path = path
        self.problems = problems

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def report(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def expected(self, path: str, expected: str, value: Any) -> None:
        self.report(path, f"expected {expected}, got {describe(value)}")

    def raw(self, key: str) -> Any:
        """The value under key; an explicit null counts as absent, as in the API."""
        return self.data.get(key)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _absent(self, key: str, required: bool) -> bool:
        if self.data.get(key) is not None:
            return False
        if required:
            self.report(self.at(key), REQUIRED)
        return True

    def mapping(self, key: str, *, required: bool = False) -> Node | None:
        if self._absent(key, required):
            return None
        value = self.data[key]
        # `type(...) is dict` first: what a decoder makes, cheaper than the abstract class.
        if type(value) is not dict and not isinstance(value, Mapping):
            self.expected(self.at(key), "a mapping", value)
            return None
        return Node(value, self.at(key), self.problems)

    def mappings(
        self,
        key: str,
        *,
        required: bool = False,
        min_items: int = 0,
        max_items: int | None = None,
    ) -> list[Node] | None:
        """A list of mappings; None when absent, so the caller can apply the API default."""
        items = self._list(key, required=required, min_items=min_items, max_items=max_items)
        if items is None:
            return None
        nodes = []
        for index, item in enumerate(items):
            path = f"{self.at(key)}[{index}]"
            if type(item) is dict or isinstance(item, Mapping):
                nodes.append(Node(item, path, self.problems))
            else:
                self.expected(path, "a mapping", item)
        return nodes

    def _list(
        self, key: str, *, required: bool, min_items: int, max_items: int | None
    ) -> list[Any] | None:
        """The list under key; None when absent, not a list, or longer than max_items."""
        if self._absent(key, required):
            return None
        value = self.data[key]
        if type(value) is not list and (
            isinstance(value, str | bytes) or not isinstance(value, Sequence)
        ):
            self.expected(self.at(key), "a list", value)
            return None
        if len(value) < min_items:
            self.report(self.at(key), f"must have at least {min_items} item(s)")
        if max_items is not None and len(value) > max_items:
            self.report(self.at(key), f"must have at most {max_items} items, got {len(value)}")
            return None  # the object is refused: reading every item would be work for nothing
        return list(value)

    def optional_string(
        self,
        key: str,
        *,
        required: bool = False,
        format: Format | None = None,
        choices: Sequence[str] | None = None,
        min_length: int = 0,
        max_length: int | None = None,
        unique: bool = False,
    ) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                self.report(self.at(key), REQUIRED)
            return None
        if (
            type(value) is str
            and (choices is None or value in choices)
            and min_length <= len(value)
            and (max_length is None or len(value) <= max_length)
            and (format is None or format.accepts(value))
        ):
            # The usual case, checked without making the field's path.
            return value if unique else interned(value)
        return self.check_string(
            value,
            self.at(key),
            format=format,
            choices=choices,
            min_length=min_length,
            max_length=max_length,
            unique=unique,
        )

    def string(
        self,
        key: str,
        *,
        default: str = "",
        required: bool = False,
        format: Format | None = None,
        choices: Sequence[str] | None = None,
        min_length: int = 0,
        max_length: int | None = None,
        unique: bool = False,
    ) -> str:
        value = self.optional_string(
            key,
            required=required,
            format=format,
            choices=choices,
            min_length=min_length,
            max_length=max_length,
            unique=unique,
        )
        return default if value is None else value

    def optional_choice(
        self, key: str, choices: tuple[Choice, ...], *, required: bool = False
    ) -> Choice | None:
        """`optional_string` with `choices`, typed as they are (a Literal's values)."""
        value = self.optional_string(key, required=required, choices=choices)
        return None if value is None else choices[choices.index(value)]

    def choice(self, key: str, choices: tuple[Choice, ...], *, default: Choice) -> Choice:
        """`string` with `choices` and a default, typed as they are."""
        value = self.optional_choice(key, choices)
        return default if value is None else value

    def check_string(
        self,
        value: Any,
        path: str,
        *,
        format: Format | None = None,
        choices: Sequence[str] | None = None,
        min_length: int = 0,
        max_length: int | None = None,
        unique: bool = False,
    ) -> str | None:
        """value itself checked as a string at path; None (and a problem) when it is not one."""
        if not isinstance(value, str):
            self.expected(path, "a string", value)
            return None
        if choices is not None and value not in choices:
            self.expected(path, "one of " + ", ".join(json.dumps(c) for c in choices), value)
            return None
        if format is not None and not format.accepts(value):
            self.expected(path, format.expected, value)
            return None
        if len(value) < min_length:
            self.report(path, f"must be at least {min_length} character(s) long")
            return None
        if max_length is not None and len(value) > max_length:
            self.report(path, f"must be at most {max_length} characters long, got {len(value)}")
            return None
        return value if unique else interned(value)

    def optional_integer(
        self, key: str, *, minimum: int, maximum: int, required: bool = False
    ) -> int | None:
        if self._absent(key, required):
            return None
        value = self.data[key]
        if not is_integer(value) or not minimum <= value <= maximum:
            self.expected(self.at(key), integer_range(minimum, maximum), value)
            return None
        return shared_int(int(value))

    def integer(
        self, key: str, *, minimum: int, maximum: int, default: int = 0, required: bool = False
    ) -> int:
        value = self.optional_integer(key, minimum=minimum, maximum=maximum, required=required)
        return default if value is None else value

    def optional_boolean(self, key: str) -> bool | None:
        if self._absent(key, False):
            return None
        value = self.data[key]
        if not isinstance(value, bool):
            self.expected(self.at(key), "true or false", value)
            return None
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self.optional_boolean(key)
        return default if value is None else value

    def strings(
        self,
        key: str,
        *,
        format: Format | None = None,
        min_items: int = 0,
        max_items: int | None = None,
        required: bool = False,
        unique: bool = False,
    ) -> tuple[str, ...]:
        items = self._list(key, required=required, min_items=min_items, max_items=max_items)
        if items is None:
            return ()
        checked = (
            self.check_string(item, f"{self.at(key)}[{index}]", format=format, unique=unique)
            for index, item in enumerate(items)
        )
        return tuple(value for value in checked if value is not None)

    def string_map(self, key: str) -> Mapping[str, str]:
        """A mapping of strings to strings; absent or empty: the shared EMPTY_MAPPING."""
        node = self.mapping(key)
        if node is None or not node.data:
            return EMPTY_MAPPING
        result = {}
        # A YAML mapping's keys need not be strings, whatever the type of `data` says.
        items: Iterable[tuple[object, object]] = node.data.items()
        for name, value in items:
            if not isinstance(name, str):
                self.expected(node.at(str(name)), "a string key", name)
            elif not isinstance(value, str):
                self.expected(node.at(name), "a string", value)
            else:
                result[interned(name)] = interned(value)
        return result or EMPTY_MAPPING
