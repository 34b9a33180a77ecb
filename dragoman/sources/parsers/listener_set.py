"""ListenerSet (gateway.networking.k8s.io/v1) from a decoded manifest, validated as its CRD
validates it: a parentRef naming a Gateway, one to 64 listeners read as a Gateway's are."""

from __future__ import annotations

from dragoman.objects import ListenerSet, ListenerSetParent, ObjectMeta
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, GROUP, KIND
from dragoman.sources.parsers.gateway import listeners_of


def parse_listener_set(root: Node, meta: ObjectMeta) -> ListenerSet:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return ListenerSet(meta=meta)
    parent = spec.mapping("parentRef", required=True)
    nodes = spec.mappings("listeners", required=True, min_items=1, max_items=64) or []
    return ListenerSet(
        meta=meta,
        parent_ref=_parent(parent) if parent is not None else ListenerSetParent(name=""),
        listeners=listeners_of(nodes),
    )


def _parent(node: Node) -> ListenerSetParent:
    return ListenerSetParent(
        name=node.string("name", required=True, min_length=1, max_length=253),
        namespace=node.optional_string("namespace", format=DNS1123_LABEL),
        group=node.string("group", default=GATEWAY_GROUP, format=GROUP),
        kind=node.string("kind", default="Gateway", format=KIND),
    )
