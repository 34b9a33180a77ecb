"""Texts whose characters prove them within the YAML limits are composed by libyaml in C:
the proof must hold for every text it accepts, and what such a text decodes to (or the
error it raises) must be what the event-by-event composer makes of it."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from dragoman.sources.bounded_yaml import (
    MAX_DEPTH,
    BoundedLoader,
    LimitError,
    Limits,
    composable_in_c,
)
from dragoman.sources.decode import (
    DecodeError,
    _ManifestLoader,
    _PrecheckedManifestLoader,
    decode_documents,
    split_yaml_documents,
)
from tests.support.feature_manifests import EXAMPLES, every_feature_manifests

DEEP = 40_000
# Nested past any limit in each way YAML nests (the hostile-file tests load them).
HOSTILE_YAML = {
    "flow": "x: " + "[" * DEEP + "]" * DEEP + "\n",
    "flow-mappings": "x: " + "{a: " * DEEP + "b" + "}" * DEEP + "\n",
    "block": "x:\n" + "- " * DEEP + "a\n",
    "complex-keys": "? " * DEEP + "a\n",
    "indented": "".join(" " * level + f"k{level}:\n" for level in range(2 * MAX_DEPTH))
    + " " * 2 * MAX_DEPTH
    + "v\n",
    "sexagesimal": "x: 1" + ":59" * 200_000 + "\n",
    "big-int": "apiVersion: v1\nkind: Service\nmetadata: {name: a, generation: "
    + "9" * 5_000
    + "}\n",
}


def alias_bomb(levels: int = 9, width: int = 10) -> str:
    lines = ['a0: &a0 ["lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


# The startup benchmark's workload: one Service and its route per file.
SERVICE_FILE = """apiVersion: v1
kind: Service
metadata:
  name: svc7
  namespace: default
spec:
  type: ExternalName
  externalName: svc7.example.test
  ports:
    - {name: http, port: 8080}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: svc7
  namespace: default
spec:
  parentRefs: [{name: bench}]
  hostnames: [svc7.bench.test, "*.wild.test"]
  rules:
    - backendRefs: [{name: svc7, port: 8080}]
"""

# Scalars, tags and errors where the two composers could part ways.
EDGE_CASES = [
    "a: 1\nb: 0x1F\nc: 0o17\nd: 1_000\ne: 1:30\nf: -7\ng: +3\n",
    "a: 1.5\nb: .inf\nc: -.Inf\nd: .nan\ne: 1e3\n",
    "a: yes\nb: No\nc: on\nd: ~\ne: null\nf: ''\ng: true\n",
    "when: 2024-01-02T03:04:05Z\ndate: 2024-01-02\n",  # timestamps stay strings
    "a: !!str 12\nb: !!int '12'\nc: !!float '1'\nd: !!binary aGVsbG8=\n",
    "s: !!set {a, b}\no: !!omap [{a: 1}, {b: 2}]\np: !!pairs [{a: 1}]\n",
    "a: |\n  line one\n  line two\nb: >-\n  folded\n  text\n",
    "'quoted key': \"double \\u00e9\"\nplain: it's\n",
    "a: 1\na: 2\n",  # a repeated key
    "m:\n  <<: {a: 1, b: 2}\n  b: 3\n",  # a merge key without anchors, overridden
    "m: {<<: [{a: 1}, {c: 4}], b: 2, b: 3}\n",  # merged, then a repeated key
    "- {a: 1, 2: b, 2: c}\n",  # a repeated key that is no string
    "? [a, b]\n: c\n",  # a list as a key
    "? {a: b}\n: c\n",  # a mapping as a key
    "a: [1, 2\n",  # unclosed
    "a: b\n c: d\n",  # bad indentation
    "a: 'x\n",  # unterminated quote
    "\x07: bell\n",  # a control character
    "a: \ud7ff\ue000\n",
    "- a\n- - b\n  - c\n- {x: [y, {z: w}]}\n",
    "---\n---\na: 1\n...\n---\n",  # empty documents
    "",
    "# only a comment\n",
    "a: !custom x\n",  # an unknown tag
    "a: &anchor 1\n",  # an anchor alone (takes the event path)
    "a: " + "9" * 5000 + "\n",  # an integer over the limit
    "a: " + "9" * 4300 + "\n",  # at the limit
    "x: " + "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2) + "\n",
]


def _texts() -> list[str]:
    texts = [SERVICE_FILE, *EDGE_CASES, *HOSTILE_YAML.values(), alias_bomb()]
    for source in [every_feature_manifests(), *(p.read_text() for p in EXAMPLES.glob("*.yaml"))]:
        texts.append(source)
        pieces = split_yaml_documents(source)
        texts.extend(piece for _, piece in pieces or ())
    return texts


def _outcome(text: str, loader: type) -> Any:
    """What a loader makes of a text: its documents, or its error's message."""
    try:
        return ("documents", list(yaml.load_all(text, Loader=loader)))
    except yaml.MarkedYAMLError as exc:
        return ("error", type(exc).__name__, str(exc))
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        return ("error", type(exc).__name__, str(exc))


def test_ordinary_manifests_are_composed_in_c() -> None:
    for _, piece in split_yaml_documents(SERVICE_FILE) or ():
        assert composable_in_c(piece)
    assert composable_in_c(SERVICE_FILE)


@pytest.mark.parametrize(
    "text",
    [*HOSTILE_YAML.values(), alias_bomb(), "a: &x 1\n", "b: *x\n"],
    ids=[*HOSTILE_YAML, "laughs", "anchor", "alias"],
)
def test_deep_nesting_anchors_and_aliases_take_the_event_path(text: str) -> None:
    # A long integer is no danger to the composer: the constructor bounds it.
    assert composable_in_c(text) == ("9" * 5000 in text)


def test_a_text_too_long_to_prove_its_node_count_takes_the_event_path() -> None:
    limits = Limits(max_nodes=1_000)
    assert composable_in_c("a: b\n" * 40, limits)
    assert not composable_in_c("a: [" + "b, " * 300 + "]\n", limits)


def test_nesting_indicators_are_counted_up_to_the_depth_limit() -> None:
    limits = Limits(max_depth=5)
    assert composable_in_c("a: {b: [c]}\n", limits)  # 3 indicators: depth at most 4
    assert composable_in_c("a:\n- b\n- c: d\n", limits)  # 4 indicators
    assert not composable_in_c("a:\n- b\n- c: d\n- e\n", limits)  # 5
    # A dash inside a word or a quoted `*` starts nothing.
    assert composable_in_c("a: my-name-is-long-x\nb: '*.example.com'\n", limits)


COMPOSABLE = [text for text in _texts() if composable_in_c(text)]


def test_most_manifests_are_composed_in_c() -> None:
    assert len(COMPOSABLE) > 60  # of 76: the feature manifests' documents, the examples...


@pytest.mark.parametrize("text", COMPOSABLE)
def test_both_composers_decode_the_same(text: str) -> None:
    assert _outcome(text, _PrecheckedManifestLoader) == _outcome(text, _ManifestLoader)


def test_every_text_proven_within_the_limits_is_within_them() -> None:
    """Random nested documents in block, flow and compact styles, against small limits:
    each one `composable_in_c` accepts composes under the exact limits without error."""
    limits = Limits(max_depth=6, max_nodes=400, max_int_digits=20)

    class Exact(BoundedLoader):
        pass

    Exact.limits = limits
    rng = random.Random(14)
    accepted = refused = 0
    for _ in range(3000):
        text = _random_yaml(rng, rng.randint(1, 9))
        try:
            list(yaml.compose_all(text, Loader=Exact))
            over = False
        except LimitError:
            over = True
        except yaml.YAMLError:
            continue  # not YAML at all: both composers raise a parse error
        if composable_in_c(text, limits):
            accepted += 1
            assert not over, text
        else:
            refused += 1
    assert accepted > 300 and refused > 300  # both sides of the bound were exercised


def _random_yaml(rng: random.Random, depth: int) -> str:
    value = _random_value(rng, depth)
    style = rng.choice([None, True, False])
    text = yaml.safe_dump(value, default_flow_style=style, width=rng.choice([20, 80, 1000]))
    if rng.random() < 0.3:  # compact nested sequences: one level per "- " on a line
        text = text.replace("- - ", "- - - ", 1)
    if rng.random() < 0.2:
        text = text.replace("\n", "\n---\n", 1)
    return text


def _random_value(rng: random.Random, depth: int) -> Any:
    if depth <= 0 or rng.random() < 0.2:
        return rng.choice(["x", 1, None, "a-b", "*.w", "", 2.5, True, "k: v"])
    if rng.random() < 0.5:
        return [_random_value(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": _random_value(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_limit_errors_of_prechecked_texts_name_the_line() -> None:
    text = "apiVersion: v1\nkind: Service\nmetadata: {name: a, generation: " + "9" * 5000 + "}\n"
    assert composable_in_c(text)
    with pytest.raises(DecodeError, match=r"at line 3, column \d+: found an integer of 5000"):
        decode_documents(text.encode(), is_json=False)
