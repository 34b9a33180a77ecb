"""v1 Namespace from decoded manifests: its metadata is all dragoman reads."""

from __future__ import annotations

from dragoman.objects import Namespace, ObjectMeta
from dragoman.sources.fields import Node


def parse_namespace(root: Node, meta: ObjectMeta) -> Namespace:
    return Namespace(meta=meta)
