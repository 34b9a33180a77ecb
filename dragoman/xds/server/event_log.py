"""How the xDS server logs its streams: who a stream serves, what its client answered, and
(at debug level) every response pushed. Every string a client sent is quoted
(`dragoman.log_text`): a node id or a NACK message cannot forge a log line."""

from __future__ import annotations

import logging

from dragoman.log_text import quoted, quoted_list
from dragoman.snapshots.resources import SHORT_NAMES
from dragoman.xds.protocol.client_kind import GRPC_GROUP_SUFFIX, split_group
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest, StreamEvent
from dragoman.xds.protocol.wire import DeltaResponse, Response, SotwResponse
from dragoman.xds.server.stream_registry import ConnectedStream

logger = logging.getLogger("dragoman.xds")

# Envoy's NACK messages name the resource and field at fault: worth more room than a name.
MAX_NACK_SHOWN = 1024


def kind(stream: ConnectedStream) -> str:
    """The stream's service, and whether it is delta: "ADS", "CDS (delta)"."""
    return f"{stream.service} (delta)" if stream.delta else stream.service


def describe(stream: ConnectedStream) -> str:
    """The node a stream serves, and its group."""
    base, grpc = split_group(stream.group)
    group = (base or "(all gateways)") + (GRPC_GROUP_SUFFIX if grpc else "")
    return (
        f"node={quoted(stream.node_id)} cluster={quoted(stream.node_cluster)} group={quoted(group)}"
    )


def short(type_url: str) -> str:
    """CDS, EDS, ... for the types dragoman serves, else the type URL quoted."""
    return SHORT_NAMES.get(type_url) or quoted(type_url)


def log_event(stream: ConnectedStream, event: StreamEvent) -> None:
    if isinstance(event, Nack):
        logger.warning(
            "NACK from node %s: %s version %s rejected (nonce %s, resources %s): %s",
            quoted(stream.node_id),
            short(event.type_url),
            quoted(event.version),
            quoted(event.nonce),
            quoted_list(event.resource_names),
            quoted(event.message, MAX_NACK_SHOWN),
            extra={"node": stream.node_id},
        )
    elif not logger.isEnabledFor(logging.DEBUG):
        return  # every ACK of every stream passes here: its text is not made for nothing
    elif isinstance(event, Ack):
        logger.debug(
            "ACK from node %s: %s version %s (nonce %s)",
            quoted(stream.node_id),
            short(event.type_url),
            quoted(event.version),
            quoted(event.nonce),
        )
    elif isinstance(event, StaleRequest):
        logger.debug(
            "ignored stale %s request from node %s: nonce %s, expected %s%s",
            short(event.type_url),
            quoted(stream.node_id),
            quoted(event.nonce),
            quoted(event.expected_nonce),
            f" (stale NACK: {quoted(event.error_message, MAX_NACK_SHOWN)})"
            if event.error_message
            else "",
        )


def log_push(stream: ConnectedStream, response: Response) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    if isinstance(response, SotwResponse):
        logger.debug(
            "sending %s version %s nonce %s (%d resources) to node %s",
            short(response.type_url),
            response.version_info,
            response.nonce,
            len(response.names),
            quoted(stream.node_id),
        )
    elif isinstance(response, DeltaResponse):
        logger.debug(
            "sending delta %s system version %s nonce %s (%d resources, %d removed) to node %s",
            short(response.type_url),
            response.system_version_info,
            response.nonce,
            len(response.names),
            len(response.removed),
            quoted(stream.node_id),
        )
