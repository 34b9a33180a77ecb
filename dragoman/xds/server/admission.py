"""Which node a stream serves, whether its certificate lets it, and the node group it gets.

The first request names the node; its certificate's identity (`transport.access_rules`)
decides whether it is served and may pin it to one Gateway's group. A node whose Gateway
appears later moves from the all-gateways group to its own (`regroup`).
"""

from __future__ import annotations

import logging

from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.log_text import plain, quoted
from dragoman.xds.protocol.client_kind import grpc_group, is_grpc_client
from dragoman.xds.server.event_log import MAX_NACK_SHOWN, describe, kind
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import ConnectedStream
from dragoman.xds.transport.access_rules import Refusal, xds_access

logger = logging.getLogger("dragoman.xds")


class Admission:
    """Admits the streams of one server to the node groups of its cache."""

    def __init__(self, cache: SnapshotCache) -> None:
        self.cache = cache

    def identify(
        self, stream: ConnectedStream, request: DiscoveryRequest | DeltaDiscoveryRequest
    ) -> Refusal | None:
        """Take the node from the first request; a Refusal if its certificate forbids it."""
        grpc_client = is_grpc_client(request.node)
        access = xds_access(
            stream.identity, stream.authenticated, request.node.cluster, grpc_client
        )
        if isinstance(access, Refusal):
            logger.warning(
                "xDS %s refused: node=%s cluster=%s identity=%s peer=%s: %s",
                kind(stream),
                quoted(request.node.id),
                quoted(request.node.cluster),
                plain(str(stream.identity)) if stream.identity else "(none)",
                stream.peer,
                quoted(access.message, MAX_NACK_SHOWN),
            )
            return access
        stream.identified = True
        stream.node_id = request.node.id
        stream.node_cluster = request.node.cluster
        stream.pinned_group = access.group
        stream.grpc_client = grpc_client
        stream.group = self._group_for(stream)
        stream.grouped_at = self.cache.generation
        logger.info(
            "xDS %s connected: %s peer=%s%s",
            kind(stream),
            describe(stream),
            stream.peer,
            f" identity={plain(str(stream.identity))}" if stream.identity is not None else "",
            extra={"node": stream.node_id},
        )
        self._check_gateway(stream)
        return None

    def regroup(self, stream: ConnectedStream) -> None:
        """A Gateway created after the node connected takes the node over from the all-group.
        Once per change of the cache (every request and push asks)."""
        if stream.grouped_at == self.cache.generation:
            return
        stream.grouped_at = self.cache.generation
        group = self._group_for(stream)
        if group != stream.group:
            stream.group = group
            logger.info("xDS %s regrouped: %s", kind(stream), describe(stream))
        self._check_gateway(stream)

    def _group_for(self, stream: ConnectedStream) -> str:
        if stream.pinned_group is not None:
            # Its own Gateway only: an empty group until that Gateway exists, never all.
            pinned = stream.pinned_group
            return grpc_group(pinned) if stream.grpc_client else pinned
        return self.cache.group_for(stream.node_cluster, grpc=stream.grpc_client)

    def _check_gateway(self, stream: ConnectedStream) -> None:
        """Warn once when a node's Gateway goes missing (or never existed), and say when it
        appears: such a node is served no listeners meanwhile, never every Gateway's."""
        if not self.cache.ready:
            return
        # The Gateway a client certificate pins the node to, else the one node.cluster names.
        gateway = stream.pinned_group if stream.pinned_group is not None else stream.node_cluster
        missing = self.cache.missing_gateway(gateway)
        if missing == stream.gateway_missing:
            return
        stream.gateway_missing = missing
        if missing:
            logger.warning(
                "xDS %s: the node's Gateway %r does not exist; it gets no listeners until it "
                "does (%s)",
                kind(stream),
                gateway,
                describe(stream),
            )
        else:
            logger.info(
                "xDS %s: Gateway %r exists now (%s)", kind(stream), gateway, describe(stream)
            )
