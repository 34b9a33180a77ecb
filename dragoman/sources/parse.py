"""One decoded manifest document becomes one typed object, or an ObjectError naming every
problem with its field path.

Only the kinds in `dragoman.objects.kinds` are parsed; anything else (a Deployment, a Knative
`Service` in another API group, ...) is not an error: `parse_object` returns None.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

from dragoman.objects import KubeObject, ObjectMeta
from dragoman.objects.kinds import KINDS, KINDS_BY_GROUP_KIND, KINDS_BY_NAME
from dragoman.sources.errors import FieldProblem, ObjectError, printable
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1123_LABEL, Format
from dragoman.sources.kind_parsers import PARSERS
from dragoman.sources.suggestions import closest

MAX_INT64 = 2**63 - 1


def parse_object(
    doc: Mapping[str, Any], *, default_namespace: str = "default"
) -> KubeObject | None:
    """The typed object a document describes; None for kinds dragoman does not read.

    Raises ObjectError listing every problem. API defaults are applied as the API server
    (or the Gateway API CRD) would; a namespace-less object lands in default_namespace.
    """
    problems: list[FieldProblem] = []
    root = Node(doc, "", problems)
    api_version = root.optional_string("apiVersion", required=True, min_length=1)
    kind = root.optional_string("kind", required=True, min_length=1)
    if api_version is None or kind is None:
        raise ObjectError(problems, describe_object(doc, default_namespace))
    group, _, version = api_version.rpartition("/")
    if (group, kind) == ("", "List"):
        raise ObjectError([("kind", "a List cannot be nested inside another List")])
    known = KINDS_BY_GROUP_KIND.get((group, kind))
    if known is None:
        return None
    if version not in known.versions:
        supported = ", ".join(known.api_version(v) for v in known.versions)
        raise ObjectError(
            [("apiVersion", f"expected {supported} for {kind}, got {describe(api_version)}")],
            describe_object(doc, default_namespace),
        )
    parser = PARSERS[known.type]
    meta = _parse_meta(root, default_namespace if known.namespaced else "", parser.name_format)
    parsed = parser.parse(root, meta)
    if problems:
        raise ObjectError(problems, describe_object(doc, default_namespace))
    return parsed


_GROUPS = frozenset(kind.group for kind in KINDS)
# Kinds are short and many differ by a letter or two (TCPRoute, UDPRoute): only a near
# miss names one.
KIND_CLOSE = 0.8


def misspelled_kind(doc: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """For a document dragoman ignores: (object, field, message) saying which kind it likely
    meant, when its kind is close to one dragoman reads in the same API group (or is one of
    another group dragoman reads); None when it is simply another kind (a Deployment, a
    Knative Service)."""
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return None
    group, _, version = api_version.rpartition("/")
    if group not in _GROUPS:
        return _misspelled_group(doc, kind, group, version)
    object = describe_object(doc)
    elsewhere = KINDS_BY_NAME.get(kind)
    if elsewhere is not None and elsewhere.group != group:  # under another group it reads
        versions = " or ".join(elsewhere.api_version(v) for v in elsewhere.versions)
        message = f"{kind} is read as {versions}; this object is ignored"
        return object, "apiVersion", message
    meant = closest(kind, (k.kind for k in KINDS if k.group == group), cutoff=KIND_CLOSE)
    if meant is None:
        return None
    where = group or "the core group"
    message = (
        f"dragoman reads no kind {printable(kind)} in {where}; this object is ignored. "
        f"Did you mean {meant}?"
    )
    return object, "kind", message


def _misspelled_group(
    doc: Mapping[str, Any], kind: str, group: str, version: str
) -> tuple[str, str, str] | None:
    """For a kind dragoman reads, under an API group close to the one it reads it in
    (`gateway.networking.k8s.oi/v1`): which `apiVersion` was likely meant."""
    known = KINDS_BY_NAME.get(kind)
    if known is None or not known.group or not group:
        return None
    if closest(group, (known.group,), cutoff=KIND_CLOSE) is None:
        return None
    meant = known.api_version(version if version in known.versions else known.versions[0])
    message = (
        f"dragoman reads no {printable(kind)} in {printable(group)}; this object is ignored. "
        f"Did you mean {meant}?"
    )
    return describe_object(doc), "apiVersion", message


def describe_object(doc: Mapping[str, Any], default_namespace: str = "default") -> str:
    """`kind/namespace/name` of a document, as far as it says; "" when it names no object."""
    kind = doc.get("kind")
    metadata = doc.get("metadata")
    if not isinstance(kind, str) or not kind or not isinstance(metadata, Mapping):
        return ""
    name = metadata.get("name")
    namespace = metadata.get("namespace") or default_namespace
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return ""
    if _is_cluster_scoped(doc, kind):
        return printable(f"{kind}/{name}")
    return printable(f"{kind}/{namespace}/{name}")


def _is_cluster_scoped(doc: Mapping[str, Any], kind: str) -> bool:
    api_version = doc.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    known = KINDS_BY_GROUP_KIND.get((group, kind))
    return known is not None and not known.namespaced


def iter_documents(doc: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """The objects one decoded document holds, each with where it sits in the document.

    A plain object yields ("", doc). A `v1 List` (what `kubectl get -o yaml` writes) or a
    typed list such as `ServiceList` yields ("items[0]", item), ... Items of a typed list
    may omit apiVersion and kind, as the API server's own list responses do; they inherit
    them from the list. Raises ObjectError when `items` is not a list.
    """
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return iter([("", doc)])
    group = api_version.rpartition("/")[0]
    item_kind = kind.removesuffix("List")
    is_plain_list = (group, kind) == ("", "List")
    if not is_plain_list and (kind == item_kind or (group, item_kind) not in KINDS_BY_GROUP_KIND):
        return iter([("", doc)])
    items = doc.get("items")
    if items is None:
        return iter([])
    if not isinstance(items, list):
        raise ObjectError([("items", f"expected a list, got {describe(items)}")])
    located = []
    for index, item in enumerate(items):
        if not is_plain_list and isinstance(item, Mapping):
            item = {"apiVersion": api_version, "kind": item_kind, **item}
        located.append((f"items[{index}]", item))
    return iter(located)


def _parse_meta(root: Node, default_namespace: str, name_format: Format) -> ObjectMeta:
    meta = root.mapping("metadata", required=True)
    if meta is None:
        return ObjectMeta(name="", namespace=default_namespace)
    namespace = meta.string("namespace", format=DNS1123_LABEL)
    return ObjectMeta(
        name=meta.string("name", required=True, format=name_format),
        # An empty namespace means "unset", as kubectl reads it; cluster-scoped kinds have none.
        namespace=(namespace or default_namespace) if default_namespace else "",
        generation=meta.integer("generation", minimum=0, maximum=MAX_INT64),
        resource_version=meta.string("resourceVersion", unique=True),
        uid=meta.string("uid", unique=True),
        creation_timestamp=_timestamp(meta),
        labels=meta.string_map("labels"),
        annotations=meta.string_map("annotations"),
    )


def _timestamp(meta: Node) -> str:
    value = meta.raw("creationTimestamp")
    # A YAML loader that resolves timestamps hands over a datetime; keep the API's RFC 3339.
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value.replace(microsecond=0).isoformat() + "Z"
    return meta.string("creationTimestamp", unique=True)
