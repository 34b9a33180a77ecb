"""Asking a dragoman for its clients' status over CSDS, and summarizing the answer as rows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

import grpc
from envoy.admin.v3.config_dump_shared_pb2 import ClientResourceStatus
from envoy.config.core.v3.base_pb2 import Node
from envoy.service.status.v3 import csds_pb2_grpc
from envoy.service.status.v3.csds_pb2 import (
    SYNCED,
    ClientConfig,
    ClientStatusRequest,
    ClientStatusResponse,
)

from dragoman.log_text import plain
from dragoman.security.files import TlsFiles, read_pem
from dragoman.snapshots.resources import SHORT_NAMES, ads_ordered
from dragoman.xds.protocol.client_kind import is_grpc_client


def fetch_client_status(
    address: str,
    *,
    timeout: float = 5.0,
    include_contents: bool = False,
    tls: TlsFiles | None = None,
    server_name: str = "",
) -> ClientStatusResponse:
    """FetchClientStatus from the xDS server at `address` ("host:port").

    `tls`: mutual TLS with these files (`trusted_ca` verifies the server, whose certificate
    must name `server_name`, else the host of `address`). Raises grpc.RpcError when the server
    cannot be reached or refuses, TlsFileError when a file cannot be read.
    """
    request = ClientStatusRequest(exclude_resource_contents=not include_contents)
    with channel(address, tls, server_name) as opened:
        stub = csds_pb2_grpc.ClientStatusDiscoveryServiceStub(opened)
        response: ClientStatusResponse = stub.FetchClientStatus(request, timeout=timeout)
    return response


def channel(address: str, tls: TlsFiles | None, server_name: str) -> grpc.Channel:
    """A channel to a dragoman's xDS port, over mutual TLS with `tls`."""
    if tls is None:
        return grpc.insecure_channel(address)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=read_pem(tls.trusted_ca),
        private_key=read_pem(tls.private_key),
        certificate_chain=read_pem(tls.certificate),
    )
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    return grpc.secure_channel(address, credentials, options=options)


# A node's standing for a type or a resource, worst first: nacked, stale, does-not-exist, acked.
RowStatus = Literal["acked", "nacked", "stale", "does-not-exist"]
_WORST_FIRST: tuple[RowStatus, ...] = ("nacked", "stale", "does-not-exist")


@dataclass(frozen=True, slots=True)
class ClientRow:
    """One node's standing for one type (or one resource, with `resource` set)."""

    node: str
    type: str  # CDS, EDS, LDS, RDS or the type URL
    version: str  # the ACKed version; "(n versions)" when resources differ
    status: RowStatus
    resources: int
    error: str
    resource: str = ""
    agent: str = "-"  # the client's name and version, as its node says: "envoy 1.33.2"


def client_rows(response: ClientStatusResponse, *, per_resource: bool = False) -> list[ClientRow]:
    """Rows per node and type: worst status first (nacked, stale, acked), NACK reasons."""
    rows: list[ClientRow] = []
    for config in response.config:
        node = config.node.id or "(no id)"
        if config.node.cluster:
            node = f"{node} ({config.node.cluster})"
        if is_grpc_client(config.node):
            node = f"{node} [gRPC]"
        agent = client_agent(config.node)
        by_type: dict[str, list[ClientConfig.GenericXdsConfig]] = {}
        for entry in config.generic_xds_configs:
            by_type.setdefault(entry.type_url, []).append(entry)
        for type_url in ads_ordered(by_type):
            entries = by_type[type_url]
            short = SHORT_NAMES.get(type_url, type_url)
            if per_resource:
                rows += [
                    ClientRow(
                        node,
                        short,
                        e.version_info,
                        entry_status(e),
                        1,
                        entry_error(e),
                        e.name,
                        agent,
                    )
                    for e in entries
                ]
                continue
            statuses = Counter(entry_status(e) for e in entries)
            status: RowStatus = next((s for s in _WORST_FIRST if statuses[s]), "acked")
            errors = sorted({entry_error(e) for e in entries if entry_error(e)})
            error = "; ".join(errors)
            rows.append(
                ClientRow(node, short, _version(entries), status, len(entries), error, "", agent)
            )
    return rows


def client_agent(node: Node) -> str:
    """What the client says it is: `user_agent_name` and its version ("envoy 1.33.2",
    "gRPC Go 1.70.0"), "-" when it says nothing. Shown escaped: a client chooses the text."""
    version = ""
    if node.HasField("user_agent_build_version"):
        number = node.user_agent_build_version.version
        version = f"{number.major_number}.{number.minor_number}.{number.patch}"
    elif node.user_agent_version:
        version = node.user_agent_version
    agent = " ".join(part for part in (node.user_agent_name, version) if part)
    return plain(agent) if agent else "-"


def entry_status(entry: ClientConfig.GenericXdsConfig) -> RowStatus:
    if entry.client_status == ClientResourceStatus.NACKED:
        return "nacked"
    if entry.client_status == ClientResourceStatus.DOES_NOT_EXIST:
        return "does-not-exist"
    if entry.client_status == ClientResourceStatus.ACKED and entry.config_status == SYNCED:
        return "acked"
    return "stale"


def entry_error(entry: ClientConfig.GenericXdsConfig) -> str:
    return entry.error_state.details if entry.HasField("error_state") else ""


def _version(entries: list[ClientConfig.GenericXdsConfig]) -> str:
    versions = {e.version_info for e in entries if e.version_info}
    if len(versions) == 1:
        return versions.pop()
    return f"({len(versions)} versions)" if versions else "-"


def format_table(rows: list[ClientRow], *, per_resource: bool = False, width: int = 16) -> str:
    """A plain-text table; versions are cut to `width` characters (they are hashes)."""
    header = ["NODE", "CLIENT", "TYPE"]
    if per_resource:
        header.append("RESOURCE")
    header += ["VERSION", "STATUS", "COUNT", "ERROR"]
    lines = [header]
    for row in rows:
        cells = [row.node, row.agent, row.type]
        if per_resource:
            cells.append(row.resource)
        version = row.version if row.version.startswith("(") else row.version[:width]
        cells += [version, row.status, str(row.resources), row.error]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    out = []
    for line in lines:
        padded = [cell.ljust(w) for cell, w in zip(line, widths, strict=False)]
        out.append("  ".join([*padded, line[-1]]).rstrip())
    return "\n".join(out) + "\n"
