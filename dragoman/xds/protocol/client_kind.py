"""Which kind of xDS client a node is, and the node group variant it is served.

Proxyless gRPC clients get resources of their own (API listeners named like the targets
they dial, LOGICAL_DNS instead of STRICT_DNS): their streams use the group `<group>#grpc`.
"""

from __future__ import annotations

from envoy.config.core.v3.base_pb2 import Node

GRPC_GROUP_SUFFIX = "#grpc"
# Sent by every gRPC implementation (gRFC A27); Envoy never sends it.
GRPC_CLIENT_FEATURE = "envoy.lb.does_not_support_overprovisioning"


def is_grpc_client(node: Node) -> bool:
    """grpcio says user_agent_name "gRPC C-core linux Python", grpc-go "gRPC Go", and so on."""
    return node.user_agent_name.lower().startswith("grpc") or (
        GRPC_CLIENT_FEATURE in node.client_features
    )


def names_gateway(node_cluster: str) -> bool:
    """True when `node.cluster` has the form `<namespace>/<name>` of a Gateway: such a node
    is dedicated to that Gateway, and gets nothing while it does not exist (never every
    Gateway's listeners, which a misspelled or deleted name would otherwise hand out)."""
    namespace, slash, name = node_cluster.partition("/")
    return bool(slash and namespace and name) and "/" not in name


def grpc_group(group: str) -> str:
    return group + GRPC_GROUP_SUFFIX


def split_group(group: str) -> tuple[str, bool]:
    """(the node group, whether the variant is the gRPC clients')."""
    if group.endswith(GRPC_GROUP_SUFFIX):
        return group[: -len(GRPC_GROUP_SUFFIX)], True
    return group, False
