"""Gateway API ReferenceGrant from decoded manifests, as its CRD validates."""

from __future__ import annotations

from dragoman.objects import ObjectMeta, ReferenceGrant, ReferenceGrantFrom, ReferenceGrantTo
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, GROUP, KIND

MAX_GRANT_ENTRIES = 16


def parse_reference_grant(root: Node, meta: ObjectMeta) -> ReferenceGrant:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return ReferenceGrant(meta=meta)
    from_nodes = spec.mappings("from", required=True, min_items=1, max_items=MAX_GRANT_ENTRIES)
    to_nodes = spec.mappings("to", required=True, min_items=1, max_items=MAX_GRANT_ENTRIES)
    return ReferenceGrant(
        meta=meta,
        from_=tuple(
            ReferenceGrantFrom(
                # group is required but may be "" (the core group), so read it as a string.
                group=_required_group(node),
                kind=node.string("kind", required=True, format=KIND),
                namespace=node.string("namespace", required=True, format=DNS1123_LABEL),
            )
            for node in from_nodes or []
        ),
        to=tuple(
            ReferenceGrantTo(
                group=_required_group(node),
                kind=node.string("kind", required=True, format=KIND),
                name=node.optional_string("name", min_length=1, max_length=253),
            )
            for node in to_nodes or []
        ),
    )


def _required_group(node: Node) -> str:
    if node.raw("group") is None:
        node.report(node.at("group"), 'is required ("" for the core API group)')
        return ""
    return node.string("group", format=GROUP)
