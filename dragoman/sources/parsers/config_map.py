"""v1 ConfigMap from decoded manifests."""

from __future__ import annotations

from dragoman.objects import ConfigMap, ObjectMeta
from dragoman.sources.fields import Node
from dragoman.sources.parsers.secret import check_data_key


def parse_config_map(root: Node, meta: ObjectMeta) -> ConfigMap:
    data = root.string_map("data")
    node = root.mapping("data")
    if node is not None:
        for key in data:
            check_data_key(node, key, node.at(key))
    return ConfigMap(meta=meta, data=data)
