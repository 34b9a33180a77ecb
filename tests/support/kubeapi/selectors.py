"""Label and field selectors, parsed the way the API server parses query strings."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.kubeapi.errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]

_SET_TERM = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str]

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        return not present


def _split_terms(selector: str) -> list[str]:
    """Splits on commas outside parentheses (`a in (x,y),b` is two terms)."""
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


def parse_label_selector(selector: str) -> list[LabelRequirement]:
    requirements = []
    for term in _split_terms(selector):
        if found := _SET_TERM.match(term):
            values = frozenset(v.strip() for v in found.group(3).split(",") if v.strip())
            requirements.append(LabelRequirement(found.group(1), found.group(2), values))
        elif found := _EQUALITY_TERM.match(term):
            operator = "!=" if found.group(2) == "!=" else "="
            requirements.append(
                LabelRequirement(found.group(1), operator, frozenset([found.group(3)]))
            )
        elif found := _EXISTS_TERM.match(term):
            operator = "!" if found.group(1) else "exists"
            requirements.append(LabelRequirement(found.group(2), operator, frozenset()))
        else:
            raise bad_request(f"unable to parse requirement: {term!r}")
    return requirements


def _field_value(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def parse_field_selector(selector: str, supported: set[str]) -> list[tuple[str, str, str]]:
    """Terms as (field, operator, value); unsupported fields are a 400, as on the server."""
    terms = []
    for term in _split_terms(selector):
        found = _EQUALITY_TERM.match(term)
        if not found:
            raise bad_request(f"invalid selector: {selector!r}; can't understand {term!r}")
        field, operator, value = found.groups()
        if field not in supported:
            raise bad_request(f"field label not supported: {field}")
        terms.append((field, "!=" if operator == "!=" else "=", value))
    return terms


def object_matcher(
    label_selector: str | None, field_selector: str | None, supported_fields: set[str]
) -> Matcher:
    """One predicate over whole objects for both selectors (empty selectors match all)."""
    labels_wanted = parse_label_selector(label_selector or "")
    fields_wanted = parse_field_selector(field_selector or "", supported_fields)

    def matches(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        if not all(requirement.matches(labels) for requirement in labels_wanted):
            return False
        for field, operator, value in fields_wanted:
            if (_field_value(obj, field) == value) != (operator == "="):
                return False
        return True

    return matches
