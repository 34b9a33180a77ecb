"""Texts whose characters prove them within the YAML limits are composed by libyaml in C:
the proof must hold for every text it accepts, and what such a text decodes to (or the
error it raises) must be what the event-by-event composer makes of it."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from dragoman.sources.bounded_yaml import (
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
from tests.support.yaml_texts import HOSTILE_YAML, SERVICE_FILE, alias_bomb, yaml_texts


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


COMPOSABLE = [text for text in yaml_texts() if composable_in_c(text)]


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
