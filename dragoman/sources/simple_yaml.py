"""The plain YAML most manifests are written in, decoded without building YAML nodes.

A manifest is usually one document of block mappings and sequences, plain scalars and small
flow collections on one line (`ports: [{name: http, port: 80}]`), in printable ASCII. For
such a text `decode_simple` builds the dicts and lists directly, line by line, several times
faster than libyaml's nodes and their construction. It is a subset, and a conservative one:
whatever it is not sure of (quotes, comments, anchors, tags, block scalars, a scalar over
several lines, a key repeated, a key that is not a plain string, an empty flow entry, an
integer too long, anything not printable ASCII, ...) makes it return None, and the text
takes the full loader, which decodes or refuses it with its own message and position. So
what it accepts decodes to what the full loader gives, and it refuses nothing itself.

Plain scalars resolve exactly as the full loader resolves them (the same resolvers: `80` is
an integer, `true` and `on` booleans, `~` null, timestamps stay strings), and are
constructed by PyYAML's own constructors.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from dragoman.sources.bounded_yaml import DEFAULT_LIMITS, MAX_INT_DIGITS

_STR = "tag:yaml.org,2002:str"
_CONSTRUCTED = frozenset(
    {"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int"}
    | {"tag:yaml.org,2002:float"}
)
_INT = "tag:yaml.org,2002:int"

# A character the subset leaves to the full loader wherever it stands: anything but a line
# break and printable ASCII, the comment sign, quotes, escapes.
_OUTSIDE = re.compile(r"[^\n -~]|[#\"'\\]")
# A mapping's entry in block style: a plain key of the characters keys are made of, `:`,
# then the value on the line (if any) after at least one space.
_BLOCK_ENTRY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_./-]*):(?: +(.*))?\Z")
# A plain scalar cannot start with these (indicators), in block or flow style; `-` may
# start one when something other than a space follows (`-1`).
_NOT_FIRST = frozenset("?:,[]{}#&*!|>'\"%@`")
# Inside a flow collection: an indicator, or a plain scalar (no `:` at all, no indicator).
_FLOW_PLAIN = r"[^\[\]{},: ](?:[^\[\]{},:]*[^\[\]{},: ])?"
_FLOW_TOKEN = re.compile(rf" *([\[\]{{}},]|: |{_FLOW_PLAIN})")
_FLOW_INDICATORS = frozenset(("[", "]", "{", "}", ",", ": "))
_FLOW_TEXT = re.compile(rf"(?: *(?:[\[\]{{}},]|: |{_FLOW_PLAIN}))* *")
# A line that is not blank: its indentation; the key when it is a mapping's entry; the rest
# (after the key's `:` and spaces), without trailing spaces.
_LINE = re.compile(
    r"^( *)(?=[^ \n])(?:([A-Za-z0-9_][A-Za-z0-9_./-]*):(?: +|$))?([^\n]*?) *$", re.MULTILINE
)
# A document marker, or what could be one, at the start of a line.
_MARKER = re.compile(r"^(?:---|\.\.\.)", re.MULTILINE)
# Nested this deep, a text is left to the full loader (it counts depth for the limits):
# block collections, and flow ones on a line, each this deep at most, stay well within
# the depth limit.
_MAX_DEPTH = 40
assert DEFAULT_LIMITS.max_depth > 2 * (_MAX_DEPTH + 1) + 1
# Longer texts are left to the full loader: within this length, a text of no anchor or
# alias (none is in the subset) is within the node limit, with room to spare (it holds at
# most a node per character, and one more; `composable_in_c` allows four).
_MAX_LENGTH = DEFAULT_LIMITS.max_nodes // 4 - 1
# Distinct plain scalars whose value is kept (those that are not strings, or look as if).
_CACHE_SIZE = 4096


class _Outside(Exception):
    """The text is not in the subset: the full loader decodes it."""


# How a plain scalar resolves, here and in the full loader (decode.py): as PyYAML's safe
# loader resolves it, except that timestamps stay strings (as in JSON).
IMPLICIT_RESOLVERS = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# Resolvers for every first character would be under None; a first character under no key
# then resolves to a string without trying any (see _scalar).
assert None not in IMPLICIT_RESOLVERS


class _Resolver(yaml.resolver.BaseResolver):
    yaml_implicit_resolvers = IMPLICIT_RESOLVERS


_resolver = _Resolver()
# The first characters of plain scalars that may not be strings, or not be plain scalars at
# all: others are strings as they stand.
_SPECIAL_FIRST = frozenset(c for c in IMPLICIT_RESOLVERS if c) | _NOT_FIRST
_constructor = yaml.constructor.SafeConstructor()
_values: dict[str, Any] = {}
_MISSING = object()


def decode_simple(text: str) -> tuple[list[Any], list[tuple[int, int]]] | None:
    """The one document of `text` and where its root starts ((line, column), from 0), when
    the text is in the subset; None otherwise (also for a text of no document, or several).
    A text it decodes is within the limits of the full loader (`bounded_yaml`)."""
    if len(text) > _MAX_LENGTH or _OUTSIDE.search(text) is not None:
        return None
    try:
        return _decode(text)
    except (_Outside, IndexError):
        return None


def _decode(text: str) -> tuple[list[Any], list[tuple[int, int]]] | None:
    start = 4 if text.startswith("---\n") else 0  # only a bare `---` before the document
    if _MARKER.search(text, start) is not None:
        raise _Outside
    first = _LINE.search(text, start)
    if first is None:
        return None
    lines = _LINE.findall(text, first.start())
    indents = [len(indent) for indent, _, _ in lines]
    indents.append(-1)  # an end below every indentation
    column = indents[0]
    parser = _Block(indents, [key for _, key, _ in lines], [rest for _, _, rest in lines])
    root = parser.node(column, 0)
    if parser.at != len(lines):
        raise _Outside
    return [root], [(text.count("\n", 0, first.start()), column)]


class _Block:
    """Block style, line by line: the line at `at` is indented `indents[at]`; it is a
    mapping's entry when `keys[at]` is not empty (its value on the line: `rests[at]`, maybe
    empty), anything else otherwise (then `rests[at]` is all it holds)."""

    __slots__ = ("at", "indents", "keys", "rests")

    def __init__(self, indents: list[int], keys: list[str], rests: list[str]) -> None:
        self.indents = indents
        self.keys = keys
        self.rests = rests
        self.at = 0

    def node(self, indent: int, depth: int) -> dict[str, Any] | list[Any]:
        """The collection whose first line is the next one, at `indent`."""
        if depth > _MAX_DEPTH:
            raise _Outside
        if self.keys[self.at]:
            return self.mapping(indent, depth)
        rest = self.rests[self.at]
        if rest == "-" or rest.startswith("- "):
            return self.sequence(indent, depth)
        raise _Outside

    def mapping(self, indent: int, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        indents, keys, rests = self.indents, self.keys, self.rests
        at = self.at
        while indents[at] == indent:
            key = keys[at]
            if not key:
                raise _Outside
            if key[0] in _SPECIAL_FIRST:
                key = _scalar(key)
                if type(key) is not str:
                    raise _Outside
            if key in result:
                raise _Outside
            value = rests[at]
            at += 1
            if value:
                result[key] = _value(value)
                continue
            self.at = at
            if indents[at] > indent:
                result[key] = self.node(indents[at], depth + 1)
            elif indents[at] == indent and rests[at].startswith("- ") and not keys[at]:
                result[key] = self.sequence(indent, depth + 1)  # a sequence not indented
            else:
                result[key] = None
            at = self.at
        self.at = at
        if indents[at] > indent:
            raise _Outside  # a line further in than the entry before it ends
        return result

    def sequence(self, indent: int, depth: int) -> list[Any]:
        result: list[Any] = []
        indents, keys, rests = self.indents, self.keys, self.rests
        while indents[self.at] == indent and not keys[self.at]:
            content = rests[self.at]
            if content == "-":
                self.at += 1
                if indents[self.at] > indent:
                    result.append(self.node(indents[self.at], depth + 1))
                else:
                    result.append(None)
                continue
            if not content.startswith("- "):
                raise _Outside
            rest = content[2:].lstrip(" ")
            inner = indent + len(content) - len(rest)
            entry = _BLOCK_ENTRY.match(rest)
            if entry is not None or rest.startswith("- ") or rest == "-":
                # A collection begins on the entry's line: its first line starts there.
                indents[self.at] = inner
                keys[self.at], rests[self.at] = (entry[1], entry[2] or "") if entry else ("", rest)
                result.append(self.node(inner, depth + 1))
            else:
                self.at += 1
                result.append(_value(rest))
        if indents[self.at] > indent:
            raise _Outside
        return result


def _value(text: str) -> Any:
    """A value on the line of its key or entry: a flow collection or a plain scalar."""
    first = text[0]
    if first == "[" or first == "{":
        tokens = _flow_tokens(text)
        value, end = _flow(tokens, 0, 0)
        if end != len(tokens):
            raise _Outside
        return value
    if ": " in text or text[-1] == ":":
        raise _Outside
    return text if first not in _SPECIAL_FIRST else _scalar(text)


def _flow_tokens(text: str) -> list[str]:
    """The tokens of a flow collection: indicators (`[`, `]`, `{`, `}`, `,`, `: `) and plain
    scalars (which cannot be one of those)."""
    if _FLOW_TEXT.fullmatch(text) is None:
        raise _Outside
    return _FLOW_TOKEN.findall(text)


def _flow(tokens: list[str], at: int, depth: int) -> tuple[Any, int]:
    """The flow collection starting at token `at`, and the index of the token after it."""
    if depth > _MAX_DEPTH:
        raise _Outside
    close = "]" if tokens[at] == "[" else "}"
    items: list[Any] = []
    mapping: dict[str, Any] = {}
    at += 1
    while (token := tokens[at]) != close:
        if close == "}":  # a key, then `: `
            key = token if token[0] not in _SPECIAL_FIRST else _scalar(token)
            if type(key) is not str or key in mapping or key in _FLOW_INDICATORS:
                raise _Outside
            if tokens[at + 1] != ": ":
                raise _Outside
            at += 2
            token = tokens[at]
        if token == "[" or token == "{":
            value, at = _flow(tokens, at, depth + 1)
        elif token in _FLOW_INDICATORS:
            raise _Outside
        else:
            value = token if token[0] not in _SPECIAL_FIRST else _scalar(token)
            at += 1
        if close == "}":
            mapping[key] = value
        else:
            items.append(value)
        if tokens[at] == ",":
            at += 1
            if tokens[at] == close:
                raise _Outside  # a trailing comma
        elif tokens[at] != close:
            raise _Outside
    return (mapping if close == "}" else items), at + 1


def _scalar(text: str) -> Any:
    """A plain scalar's value, as the full loader resolves and constructs it."""
    first = text[0]
    if first in _NOT_FIRST or (first == "-" and text[1:2] in ("", " ")):
        raise _Outside
    if first not in IMPLICIT_RESOLVERS:
        return text  # no resolver could make it other than a string
    value = _values.get(text, _MISSING)
    if value is _MISSING:
        # The stubs leave PyYAML's Resolver.resolve untyped.
        tag = _resolver.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        if tag == _STR:
            value = text
        elif tag not in _CONSTRUCTED or (tag == _INT and len(text) > MAX_INT_DIGITS):
            raise _Outside
        else:
            construct = _constructor.yaml_constructors[tag]
            value = construct(_constructor, yaml.ScalarNode(tag, text))
        if len(_values) < _CACHE_SIZE and len(text) <= 64:
            _values[text] = value
    return value
