"""metav1.LabelSelector from a decoded manifest, validated as the API server does."""

from __future__ import annotations

from dragoman.objects import LabelSelector, LabelSelectorRequirement
from dragoman.objects.selector import SELECTOR_OPERATORS
from dragoman.sources.fields import Node
from dragoman.sources.formats import QUALIFIED_NAME, Format

_LABEL_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")

LABEL_VALUE = Format(
    "a label value (at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
    "letter or digit, or empty)",
    lambda value: (
        value == ""
        or (
            len(value) <= 63
            and set(value) <= _LABEL_VALUE_CHARS
            and value[0].isalnum()
            and value[-1].isalnum()
        )
    ),
)


def parse_label_selector(node: Node) -> LabelSelector:
    labels = node.string_map("matchLabels")
    labels_node = node.mapping("matchLabels")
    if labels_node is not None:
        for key, value in labels.items():
            if not QUALIFIED_NAME.accepts(key):
                node.expected(labels_node.at(key), QUALIFIED_NAME.expected, key)
            if not LABEL_VALUE.accepts(value):
                node.expected(labels_node.at(key), LABEL_VALUE.expected, value)
    expressions = tuple(_requirement(n) for n in node.mappings("matchExpressions") or [])
    return LabelSelector(match_labels=labels, match_expressions=expressions)


def _requirement(node: Node) -> LabelSelectorRequirement:
    key = node.string("key", required=True, format=QUALIFIED_NAME)
    operator = node.optional_choice("operator", SELECTOR_OPERATORS, required=True)
    values = node.strings("values", format=LABEL_VALUE)
    if operator in ("In", "NotIn") and not values:
        node.report(node.at("values"), f"must be non-empty when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        node.report(node.at("values"), f"must be empty when operator is {operator}")
    # No operator: a placeholder, never seen (the object is refused).
    return LabelSelectorRequirement(key=key, operator=operator or "In", values=values)
