"""Kubernetes label selectors (metav1.LabelSelector): matchLabels and matchExpressions."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from dragoman.objects.meta import no_entries

SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
SELECTOR_OPERATORS: tuple[SelectorOperator, ...] = get_args(SelectorOperator)


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        # NotIn, as in Kubernetes: a missing label is "not in" any set.
        return self.key not in labels or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """Every requirement must hold; an empty selector selects everything."""

    match_labels: Mapping[str, str] = field(default_factory=no_entries)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(key) == value for key, value in self.match_labels.items()) and all(
            requirement.matches(labels) for requirement in self.match_expressions
        )

    def __str__(self) -> str:
        parts = [f"{key}={value}" for key, value in sorted(self.match_labels.items())]
        for requirement in self.match_expressions:
            if requirement.operator == "Exists":
                parts.append(requirement.key)
            elif requirement.operator == "DoesNotExist":
                parts.append(f"!{requirement.key}")
            else:
                values = ",".join(requirement.values)
                parts.append(f"{requirement.key} {requirement.operator.lower()} ({values})")
        return ", ".join(parts) or "(everything)"
