"""The xDS streams currently connected, for status reporting (CSDS, `dragoman clients`)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from envoy.config.core.v3.base_pb2 import Node

from dragoman.security.identities import Identity
from dragoman.snapshots.gc_pause import fit_to_streams
from dragoman.snapshots.resources import ALL_GATEWAYS
from dragoman.xds.protocol.delta_stream import DeltaStream
from dragoman.xds.protocol.resource_status import ResourceStatus, TypeStatus
from dragoman.xds.protocol.sotw_stream import SotwStream
from dragoman.xds.server.replica import replica_name

# The service a stream is on: ADS, or the per-type service of one type.
XdsService = Literal["ADS", "CDS", "EDS", "LDS", "RDS", "SRDS", "SDS"]


@dataclass(slots=True)
class ConnectedStream:
    """One open stream; `protocol` is its live state machine (read it, don't drive it)."""

    stream_id: int
    service: XdsService
    peer: str
    protocol: SotwStream | DeltaStream
    node_id: str = ""
    node_cluster: str = ""
    group: str = ALL_GATEWAYS
    identified: bool = field(default=False)  # the first request, with the node, has arrived
    # Its node.cluster names a Gateway (`ns/name`) that does not exist: it is served nothing.
    gateway_missing: bool = field(default=False)
    # Mutual TLS: the client certificate's identity (None if it names none), and the group
    # that identity is limited to (None: whatever group the node names).
    authenticated: bool = False
    identity: Identity | None = None
    pinned_group: str | None = None
    connected_at: float = field(default_factory=time.time)  # when it opened (Unix time)
    grpc_client: bool = False  # a proxyless gRPC client, from its first request's node
    # The cache generation its group was last decided at: groups change only with it.
    grouped_at: int = -1

    @property
    def delta(self) -> bool:
        return isinstance(self.protocol, DeltaStream)

    @property
    def node(self) -> Node:
        """The node from the stream's first request (an empty Node until it arrives)."""
        return self.protocol.node if self.protocol.node is not None else Node()

    def type_statuses(self) -> list[TypeStatus]:
        return self.protocol.type_statuses()

    def resource_statuses(self) -> list[ResourceStatus]:
        return self.protocol.resource_statuses()


class StreamRegistry:
    """Open streams by id. Entries are added when a stream opens and removed when it ends; the
    cyclic collector's threshold follows their number (`fit_to_streams`)."""

    def __init__(self, replica: str = "") -> None:
        # The replica these streams are connected to (see replica_name).
        self.replica = replica or replica_name()
        self._streams: dict[int, ConnectedStream] = {}
        self._ids = itertools.count(1)
        # Requests read on every stream, ACKs included: a client still being answered (an
        # Envoy applying 10,000 clusters for seconds, then asking for listeners and routes)
        # keeps it moving.
        self.requests = 0
        # Streams closed so far: what they held is freed then (the memory trimmer's cue).
        self.closed = 0

    def open(
        self, service: XdsService, peer: str, protocol: SotwStream | DeltaStream
    ) -> ConnectedStream:
        stream = ConnectedStream(next(self._ids), service, peer, protocol)
        self._streams[stream.stream_id] = stream
        fit_to_streams(len(self._streams))
        return stream

    def close(self, stream: ConnectedStream) -> None:
        if self._streams.pop(stream.stream_id, None) is not None:
            self.closed += 1
            fit_to_streams(len(self._streams))

    def streams(self) -> list[ConnectedStream]:
        return list(self._streams.values())

    def __iter__(self) -> Iterator[ConnectedStream]:
        return iter(self.streams())

    def __len__(self) -> int:
        return len(self._streams)

    def activity(self) -> tuple[int, int]:
        """Changes while streams come, go or exchange messages: still once every client has
        been answered and has ACKed."""
        return len(self._streams), self.requests
