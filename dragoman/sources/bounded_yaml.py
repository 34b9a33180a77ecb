"""A YAML loader whose work is bounded by limits, not by what a hostile file asks for.

PyYAML's C composer recurses once per nesting level (a 40,000-deep `[[[...]]]` overflows
the C stack and kills the process: no exception to catch), and aliases let a few kilobytes
stand for millions of nodes. So libyaml only tokenizes here (its parser keeps an explicit
stack); the composer below is a loop over its events that refuses, before building
anything further, a document nested deeper than `max_depth` (aliases count with the depth
of what they stand for) or expanding to more than `max_nodes` nodes (an alias counts every
node it stands for). Integers longer than `max_int_digits` are refused instead of being
converted (int() is quadratic in the digit count, and past 4,300 digits raises ValueError).

Most manifests are small and plain: for a text that `composable_in_c` proves within the
depth and size limits by its characters alone (no anchor or alias, few enough nesting
indicators), `PrecheckedLoader` lets libyaml's own composer build the nodes, several times
faster; integers are still bounded, by the constructor.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    ScalarEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

try:  # libyaml's parser when PyYAML was built with it: several times faster
    from yaml._yaml import CParser as _Parser

    HAS_C_COMPOSER = True
except ImportError:  # pragma: no cover
    HAS_C_COMPOSER = False
    from yaml.parser import Parser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    # The same name as libyaml's parser above, in the branch where that one is missing.
    class _Parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            Reader.__init__(self, stream)
            Scanner.__init__(self)
            Parser.__init__(self)


# The marks libyaml's events carry are yaml._yaml.Mark, which the type stubs keep apart from
# yaml.error.Mark, the one they declare nodes and errors to take; PyYAML takes either alike.
# Hence the `arg-type` ignores below that say "libyaml's Mark". And the stubs leave
# Resolver.resolve untyped: the `no-untyped-call` ignores.

# Kubernetes objects nest about 25 levels at most (the Gateway API CRDs' own schemas).
MAX_DEPTH = 100
# Expanded nodes per file: a List of several thousand objects fits; an alias bomb does not.
MAX_NODES = 1_000_000
# Python's own limit for int() of a decimal string (sys.get_int_max_str_digits()).
MAX_INT_DIGITS = 4300
# Recent libyaml (as bundled with PyYAML 6.0.4) refuses, while scanning, flow collections
# nested deeper than this (its scanner looks ahead across a run of `[[[...` before the
# composer sees the first event): a document that deep is over any depth limit below it.
LIBYAML_MAX_DEPTH = 1000
_LIBYAML_DEPTH_PROBLEM = "exceeded maximum nesting depth"


@dataclass(frozen=True, slots=True)
class Limits:
    max_depth: int = MAX_DEPTH
    max_nodes: int = MAX_NODES
    max_int_digits: int = MAX_INT_DIGITS


DEFAULT_LIMITS = Limits()


class LimitError(yaml.MarkedYAMLError):
    """A document over one of the limits; raised before the work the limit guards."""


class _Open:
    """A collection whose end event has not come yet."""

    __slots__ = ("anchor", "depth", "key", "node", "nodes_before")

    def __init__(self, node: SequenceNode | MappingNode, anchor: str | None, nodes_before: int):
        self.node = node
        self.anchor = anchor
        self.nodes_before = nodes_before  # expanded nodes counted before this one began
        self.depth = 1  # levels below and including this node, aliases expanded
        self.key: Node | None = None  # a mapping's key waiting for its value


class BoundedLoader(_Parser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """`yaml.load_all(text, Loader=...)` with the limits of `limits` (a class attribute, so
    a subclass can change them)."""

    limits: Limits = DEFAULT_LIMITS

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._expanded = 0  # nodes of the documents composed so far, aliases expanded

    # The composer interface the constructor calls (replacing the C composer).

    def check_node(self) -> bool:
        with self._libyaml_depth_as_limit():
            if self.check_event(StreamStartEvent):
                self.get_event()
            return not self.check_event(StreamEndEvent)

    def get_node(self) -> Node | None:
        with self._libyaml_depth_as_limit():
            if self.check_event(StreamEndEvent):
                return None
            return self._compose_document()

    def get_single_node(self) -> Node | None:
        with self._libyaml_depth_as_limit():
            return self._get_single_node()

    @contextmanager
    def _libyaml_depth_as_limit(self) -> Iterator[None]:
        """libyaml's own nesting limit, reported as the depth limit it proves exceeded (at
        the place libyaml stopped, beyond the one where the depth limit was crossed)."""
        try:
            yield
        except yaml.MarkedYAMLError as exc:
            if exc.problem != _LIBYAML_DEPTH_PROBLEM or self.limits.max_depth >= LIBYAML_MAX_DEPTH:
                raise
            raise LimitError(
                None,
                None,
                f"nested more than {self.limits.max_depth} levels deep",
                exc.problem_mark,
            ) from None

    def _get_single_node(self) -> Node | None:
        self.get_event()  # StreamStartEvent
        document = None if self.check_event(StreamEndEvent) else self._compose_document()
        if not self.check_event(StreamEndEvent):
            event = self.get_event()
            raise yaml.composer.ComposerError(
                "expected a single document in the stream",
                document.start_mark if document is not None else None,
                "but found another document",
                event.start_mark if event is not None else None,  # type: ignore[arg-type]  # libyaml's Mark
            )
        self.get_event()
        return document

    def _compose_document(self) -> Node:
        start = self.get_event()
        assert isinstance(start, DocumentStartEvent)
        anchors: dict[str, tuple[Node, int, int]] = {}  # anchor -> (node, nodes, depth)
        open_: list[_Open] = []
        nodes = self._expanded  # the limit holds for the whole file, not each document
        root: Node | None = None

        while root is None:
            event = self.get_event()
            depth = len(open_) + 1  # the level this event's node sits at
            if isinstance(event, CollectionEndEvent):
                closed = open_.pop()
                closed.node.end_mark = event.end_mark
                if closed.anchor is not None:
                    anchors[closed.anchor] = (
                        closed.node,
                        nodes - closed.nodes_before,
                        closed.depth,
                    )
                node: Node = closed.node
                height = closed.depth
            elif isinstance(event, AliasEvent):
                if event.anchor not in anchors:
                    raise _unknown_alias(event, open_)
                node, size, height = anchors[event.anchor]
                nodes += size
                self._check(nodes, depth + height - 1, event)
            elif isinstance(event, (ScalarEvent, CollectionStartEvent)):
                nodes += 1
                self._check(nodes, depth, event)
                anchor = event.anchor
                if isinstance(event, CollectionStartEvent):
                    open_.append(_Open(self._collection(event), anchor, nodes - 1))
                    continue
                node = self._scalar(event)
                height = 1
                if anchor is not None:
                    anchors[anchor] = (node, 1, 1)
            else:  # pragma: no cover - libyaml emits nothing else inside a document
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"unexpected {type(event).__name__}",
                    event.start_mark if event is not None else None,  # type: ignore[arg-type]  # libyaml's Mark
                )
            if not open_:
                root = node
                break
            parent = open_[-1]
            parent.depth = max(parent.depth, height + 1)
            if isinstance(parent.node, SequenceNode):
                parent.node.value.append(node)
            elif parent.key is None:
                parent.key = node
            else:
                parent.node.value.append((parent.key, node))
                parent.key = None

        end = self.get_event()
        assert isinstance(end, DocumentEndEvent)
        self._expanded = nodes
        return root

    def _collection(self, event: CollectionStartEvent) -> SequenceNode | MappingNode:
        """The node a collection's start event opens, empty."""
        kind = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            # The stubs leave PyYAML's Resolver.resolve untyped.
            tag = self.resolve(kind, None, event.implicit)  # type: ignore[no-untyped-call]
        return kind(tag, [], event.start_mark, None, flow_style=event.flow_style)  # type: ignore[arg-type]  # libyaml's Mark

    def _scalar(self, event: ScalarEvent) -> ScalarNode:
        tag = event.tag
        if tag is None or tag == "!":
            # Likewise untyped in the stubs.
            tag = self.resolve(ScalarNode, event.value, event.implicit)  # type: ignore[no-untyped-call]
        if tag == "tag:yaml.org,2002:int" and len(event.value) > self.limits.max_int_digits:
            raise LimitError(
                None,
                None,
                f"found an integer of {len(event.value)} characters "
                f"(at most {self.limits.max_int_digits})",
                event.start_mark,  # type: ignore[arg-type]  # libyaml's Mark
            )
        return ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)  # type: ignore[arg-type]  # libyaml's Mark

    def _check(self, nodes: int, depth: int, event: Any) -> None:
        if depth > self.limits.max_depth:
            raise LimitError(
                None,
                None,
                f"nested more than {self.limits.max_depth} levels deep",
                event.start_mark,
            )
        if nodes > self.limits.max_nodes:
            raise LimitError(
                None,
                None,
                f"more than {self.limits.max_nodes} values (aliases count every value they repeat)",
                event.start_mark,
            )


def _unknown_alias(event: AliasEvent, open_: list[_Open]) -> yaml.composer.ComposerError:
    """The error for an alias to no anchor composed yet: one still open is recursive."""
    recursive = event.anchor in {o.anchor for o in open_}
    what = "a recursive alias" if recursive else "undefined alias"
    problem = f"found {what} {event.anchor!r}"
    return yaml.composer.ComposerError(None, None, problem, event.start_mark)  # type: ignore[arg-type]  # libyaml's Mark


# Every collection a document opens is started by a token of its own, and each such token
# takes one of these characters: `[`, `{`, `?` or `:` (a mapping's explicit key, or the
# value indicator that makes a key of what precedes it), or `-` before a blank (a block
# sequence entry). A chain of nested collections is at most as long as their count.
_COLLECTION_INDICATORS = "[{?:"
_BLOCK_ENTRY = re.compile(r"-(?=[\s\x00]|\Z)")
# An anchor or alias: `&` or `*` before a name character (libyaml's: ASCII letters, digits,
# `_` and `-`). A `*` before anything else cannot start an alias (`"*.example.com"`).
_ANCHOR_OR_ALIAS = re.compile(r"[&*][0-9A-Za-z_-]")
# Nodes per character at most, without aliases: an empty key and an empty value may stand
# beside a `:`, an empty entry beside a `-`.
_NODES_PER_CHARACTER = 4


def composable_in_c(text: str, limits: Limits = DEFAULT_LIMITS) -> bool:
    """True when no document of `text` can be nested deeper than `limits.max_depth` or
    hold more than `limits.max_nodes` nodes, as its characters prove: then libyaml's
    recursive composer is safe to run on it (`PrecheckedLoader`). Conservative: a False
    only means the text takes the event-by-event composer, which finds the exact answer."""
    if not HAS_C_COMPOSER:
        return False
    if _NODES_PER_CHARACTER * (len(text) + 1) > limits.max_nodes:
        return False
    if _ANCHOR_OR_ALIAS.search(text) is not None:
        return False
    starts = sum(map(text.count, _COLLECTION_INDICATORS))
    if starts < limits.max_depth:
        starts += len(_BLOCK_ENTRY.findall(text))
    # The scalar a collection holds is one more level: depth <= starts + 1.
    return starts < limits.max_depth


_INT = "tag:yaml.org,2002:int"


class PrecheckedLoader(BoundedLoader):
    """BoundedLoader for a text `composable_in_c` accepted: libyaml composes the nodes (in
    C); integers longer than `limits.max_int_digits` are refused where they are
    constructed."""

    if HAS_C_COMPOSER:
        check_node = _Parser.check_node
        get_node = _Parser.get_node
        get_single_node = _Parser.get_single_node

    def construct_bounded_int(self, node: ScalarNode) -> int:
        if len(node.value) > self.limits.max_int_digits:
            raise LimitError(
                None,
                None,
                f"found an integer of {len(node.value)} characters "
                f"(at most {self.limits.max_int_digits})",
                node.start_mark,
            )
        return int(self.construct_yaml_int(node))


# The stubs take only PyYAML's own loader classes; this one is a loader all the same.
PrecheckedLoader.add_constructor(_INT, PrecheckedLoader.construct_bounded_int)  # type: ignore[type-var]
