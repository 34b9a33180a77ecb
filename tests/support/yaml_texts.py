"""YAML texts where decoders could part ways: the startup benchmark's workload, edge cases
of scalars, tags and errors, texts nested or aliased past every limit, and the examples and
feature manifests cut into documents."""

from __future__ import annotations

from dragoman.sources.bounded_yaml import MAX_DEPTH
from dragoman.sources.decode import split_yaml_documents
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


def yaml_texts() -> list[str]:
    """Every text above, and every example and feature manifest whole and cut into its
    documents."""
    texts = [SERVICE_FILE, *EDGE_CASES, *HOSTILE_YAML.values(), alias_bomb()]
    for source in [every_feature_manifests(), *(p.read_text() for p in EXAMPLES.glob("*.yaml"))]:
        texts.append(source)
        pieces = split_yaml_documents(source)
        texts.extend(piece for _, piece in pieces or ())
    return texts
