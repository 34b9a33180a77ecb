"""What one connected node holds, from CSDS: the node (what it says it is, when it connected
and from where), the replica serving it, and its resources by type with their versions and
standing. Asked over CSDS like `dragoman clients`, for one node id."""

from __future__ import annotations

from dataclasses import dataclass

from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import (
    ClientConfig,
    ClientStatusRequest,
    ClientStatusResponse,
)
from envoy.type.matcher.v3.node_pb2 import NodeMatcher
from envoy.type.matcher.v3.string_pb2 import StringMatcher

from dragoman.log_text import plain
from dragoman.security.files import TlsFiles
from dragoman.snapshots.resources import SHORT_NAMES, ads_ordered
from dragoman.xds.csds.csds_client import RowStatus, client_agent, entry_error, entry_status
from dragoman.xds.csds.csds_client import channel as csds_channel
from dragoman.xds.csds.csds_service import CONNECTION_KEY, REPLICA_HEADER
from dragoman.xds.protocol.client_kind import is_grpc_client


@dataclass(frozen=True, slots=True)
class HeldResource:
    name: str
    version: str
    status: RowStatus
    error: str
    body: bytes  # the serialized resource; empty for a Secret (CSDS never sends its content)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """One node's configuration as the replica serving it reports it."""

    node: str  # its id, with its cluster and [gRPC] as `dragoman clients` shows them
    agent: str  # "envoy 1.40.0", "-" when the node says nothing
    connected_at: str  # RFC 3339, the first of its open streams; "" if not reported
    peer: str
    streams: int
    replica: str
    resources: dict[str, list[HeldResource]]  # by type URL, in ADS order, names sorted


def fetch_node_configs(
    address: str,
    node_id: str,
    *,
    timeout: float = 5.0,
    tls: TlsFiles | None = None,
    server_name: str = "",
) -> tuple[list[NodeConfig], str]:
    """The configurations of the nodes whose id is `node_id` connected to the replica at
    `address` (one, unless several clusters share the id), and that replica's name. Raises
    grpc.RpcError when the server cannot be reached or refuses."""
    request = ClientStatusRequest(node_matchers=[NodeMatcher(node_id=StringMatcher(exact=node_id))])
    with csds_channel(address, tls, server_name) as opened:
        stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(opened)
        response, call = stub.FetchClientStatus.with_call(request, timeout=timeout)
    replica = dict(call.initial_metadata() or ()).get(REPLICA_HEADER, "")
    return node_configs(response, str(replica)), str(replica)


def node_configs(response: ClientStatusResponse, replica: str) -> list[NodeConfig]:
    return [_node_config(config, replica) for config in response.config]


def _node_config(config: ClientConfig, replica: str) -> NodeConfig:
    node = plain(config.node.id or "(no id)")
    if config.node.cluster:
        node = f"{node} ({plain(config.node.cluster)})"
    if is_grpc_client(config.node):
        node = f"{node} [gRPC]"
    connection = config.node.metadata.fields.get(CONNECTION_KEY)
    fields = connection.struct_value.fields if connection is not None else {}
    by_type: dict[str, list[HeldResource]] = {}
    for entry in config.generic_xds_configs:
        held = HeldResource(
            entry.name,
            entry.version_info,
            entry_status(entry),
            entry_error(entry),
            entry.xds_config.value if entry.HasField("xds_config") else b"",
        )
        by_type.setdefault(entry.type_url, []).append(held)
    return NodeConfig(
        node=node,
        agent=client_agent(config.node),
        connected_at=fields["connected_at"].string_value if "connected_at" in fields else "",
        peer=fields["peer"].string_value if "peer" in fields else "",
        streams=int(fields["streams"].number_value) if "streams" in fields else 0,
        replica=replica,
        resources={
            type_url: sorted(by_type[type_url], key=lambda r: r.name)
            for type_url in ads_ordered(by_type)
        },
    )


def format_node_config(config: NodeConfig, width: int = 16) -> str:
    """The node, then per type its resources: name, version (cut to `width`), standing."""
    since = config.connected_at or "-"
    if config.peer:
        since += f" from {config.peer}"
    if config.streams:
        since += f" ({config.streams} stream{'' if config.streams == 1 else 's'})"
    lines = [
        f"node       {config.node}",
        f"client     {config.agent}",
        f"connected  {since}",
        f"replica    {config.replica or '-'}",
    ]
    for type_url, held in config.resources.items():
        lines += ["", f"{SHORT_NAMES.get(type_url, type_url)}: {len(held)} resources"]
        rows = [("NAME", "VERSION", "STATUS", "ERROR")]
        rows += [(r.name, r.version[:width] or "-", r.status, plain(r.error)) for r in held]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            cells = [cell.ljust(w) for cell, w in zip(row, widths, strict=False)]
            lines.append(("  " + "  ".join([*cells, row[3]])).rstrip())
    return "\n".join(lines) + "\n"
