"""The plain-YAML subset decoded line by line (`decode_simple`) must decode every text it
accepts to what the full loader makes of it, documents and their starts, and leave every
text it is unsure of (or the full loader refuses) to the full loader."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from dragoman.sources.bounded_yaml import composable_in_c
from dragoman.sources.decode import (
    DecodeError,
    _load_yaml,
    decode_documents,
    decode_yaml_positioned,
    split_yaml_documents,
)
from dragoman.sources.simple_yaml import decode_simple
from tests.support.yaml_texts import SERVICE_FILE, yaml_texts

# The startup benchmark's workload, as it writes it: one Service and its route per file (the
# quoted wildcard hostname of the other test's copy is outside the subset).
WORKLOAD_FILE = SERVICE_FILE.replace(', "*.wild.test"', "")

# Texts in the subset, and what each decodes to.
IN_SUBSET = {
    "a: 1\nb: 0x1F\nc: 1_000\nd: 1:30\ne: -7\nf: .inf\ng: on\nh: ~\ni: null\nj: 1e3\n": {
        "a": 1,
        "b": 31,
        "c": 1000,
        "d": 90,
        "e": -7,
        "f": float("inf"),
        "g": True,
        "h": None,
        "i": None,
        "j": "1e3",
    },
    "when: 2024-01-02T03:04:05Z\n": {"when": "2024-01-02T03:04:05Z"},
    "k:\n- x\n- y: 1\n  z: [a, {b: c}]\nnext: {}\n": {
        "k": ["x", {"y": 1, "z": ["a", {"b": "c"}]}],
        "next": {},
    },
    "- - a\n  - b\n-\n- x[0], y-z a:b\n": [["a", "b"], None, "x[0], y-z a:b"],
    "---\n  a:   spaced out   \n\n  b:\n": {"a": "spaced out", "b": None},
    "a:\n    -   b: 1\n        c: 2\n": {"a": [{"b": 1, "c": 2}]},
}

# Texts left to the full loader, valid YAML or not.
OUTSIDE = [
    "a: 'quoted'\n",
    'a: "quoted"\n',
    "a: 1 # a comment\n",
    "a: &x 1\nb: *x\n",
    "a: !!str 1\n",
    "a: |\n  block\n",
    "a: >\n  folded\n",
    "a: b\n  c\n",  # a plain scalar over two lines
    "a: 1\na: 2\n",  # a repeated key
    "1: a\n",  # a key that is no string
    "<<: {a: 1}\n",  # a merge key
    "a: =\n",  # the value tag
    "a: [a, b,]\n",  # a trailing comma
    "a: {b: }\n",  # an empty flow value
    "a: {b:c}\n",
    "a: [b: c]\n",
    "a: [1, 2\n",
    "a: b: c\n",
    "a: b:\n",
    "a: - b\n",
    "a:\n\tb: 1\n",
    "a: b\r\nc: d\r\n",
    "a: caf\u00e9\n",
    "a: b\n---\nc: d\n",  # two documents
    "a: b\n...\n",
    "--- a: b\n",
    "just a scalar\n",
    "",
    "---\n",
    "a: " + "9" * 5000 + "\n",  # an integer over the limit: the full loader refuses it
    "a: ?b\n",
    "a: %b\n",
    "key with spaces: x\n",
    "a:b\n",
    " a: 1\nb: 2\n",
    "a:\n  b: 1\n c: 2\n",
    "x: " + "[" * 60 + "]" * 60 + "\n",  # deeper than the subset goes
]


def _full(text: str) -> Any:
    try:
        return _load_yaml(text, 0, composable_in_c(text))
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        return ("error", type(exc).__name__)


def test_the_workload_is_in_the_subset() -> None:
    for _, piece in split_yaml_documents(WORKLOAD_FILE) or ():
        assert decode_simple(piece) is not None, piece


@pytest.mark.parametrize("text", list(IN_SUBSET))
def test_texts_in_the_subset_decode_as_the_full_loader_decodes_them(text: str) -> None:
    decoded = decode_simple(text)
    assert decoded is not None
    assert decoded[0] == [IN_SUBSET[text]]
    documents, starts = _full(text)
    assert decoded == (documents, list(starts))


@pytest.mark.parametrize("text", OUTSIDE)
def test_texts_outside_the_subset_are_left_to_the_full_loader(text: str) -> None:
    assert decode_simple(text) is None


def test_every_manifest_the_subset_accepts_decodes_as_the_full_loader_decodes_it() -> None:
    accepted = 0
    for text in yaml_texts():
        simple = decode_simple(text)
        if simple is not None:
            accepted += 1
            documents, starts = _full(text)
            assert simple == (documents, list(starts)), text
    assert accepted > 20


def test_refusals_and_their_positions_are_the_full_loaders() -> None:
    # A key repeated deep inside: the subset leaves it, the full loader names the line.
    text = "---\na:\n  b: 1\n  b: 2\n"
    with pytest.raises(DecodeError, match=r"at line 4, column 3: found duplicate key 'b'"):
        decode_documents(text.encode(), is_json=False)
    documents, starts = decode_yaml_positioned("\n\n---\n\n  a: 1\n", first_line=10)
    assert (documents, starts) == ([{"a": 1}], [(15, 3)])


# Scalars and fragments where the subset could part ways with YAML.
TRICKY = [
    "x", "a-b", "-1", "-", "- a", "--x", "---", "...", "1:30", "0x1F", "0o17", "0b101",
    "1_000", "+3", "1e3", "1.5e3", ".5", ".inf", ".NaN", "on", "Off", "yes", "Y", "n",
    "~", "null", "NULL", "true", "False", "2024-01-02", "a b", "a  b", "a: b", "a:", "a:b",
    "?x", ":x", ",x", "x,", "[x", "x]", "{x", "x}", "x[0]", "<<", "=", "!x", "&x", "*x",
    "%x", "@x", "`x", "|", ">", "x # y", "x#y", "http://h/p?q=1", "a, b", "{}", "[]",
    "[a, b]", "[a,b]", "[a , b ]", "{a: b}", "{a: b, c: [d]}", "{a: }", "[a, ]", "[,]",
    "[a: b]", "{a}", "[- a]", "[-1, -x]", "{a: -}", "[a] b", "[[a]]", "[{a: [b, {c: d}]}]",
    "'q'", "123456789012345678901234567890",
]  # fmt: skip


def _random_text(rng: random.Random) -> str:
    """A block document with tricky scalars and fragments, indentations shifted at random."""
    lines: list[str] = []
    indent = 0
    for _ in range(rng.randint(1, 8)):
        roll = rng.random()
        key = rng.choice(["a", "b", "c", "on", "1", "a.b/c", "-a", "a b"])
        value = rng.choice(TRICKY)
        if roll < 0.4:
            line = f"{key}: {value}"
        elif roll < 0.55:
            line = f"{key}:"
        elif roll < 0.75:
            line = f"- {value}"
        elif roll < 0.85:
            line = f"- {key}: {value}"
        elif roll < 0.9:
            line = rng.choice(["-", "- -", f"- - {value}", "---", f"{key}:{value}"])
        else:
            line = value
        indent = max(0, indent + rng.choice([-4, -2, 0, 0, 2, 2, 4, 1]))
        lines.append(" " * indent + line + rng.choice(["", "", " ", "  "]))
    prefix = rng.choice(["", "", "---\n", "\n", "--- \n"])
    return prefix + "\n".join(lines) + rng.choice(["\n", "", "\n\n"])


def test_random_texts_the_subset_accepts_decode_as_the_full_loader_decodes_them() -> None:
    rng = random.Random(7)
    accepted = left = 0
    for _ in range(20_000):
        text = _random_text(rng)
        simple = decode_simple(text)
        if simple is None:
            left += 1
            continue
        accepted += 1
        full = _full(text)
        assert full[0] != "error", text
        assert simple == (full[0], list(full[1])), text
    assert accepted > 500 and left > 5000  # both sides were exercised
