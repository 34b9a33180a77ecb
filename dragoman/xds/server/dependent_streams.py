"""Per-type clients whose EDS or RDS streams never come.

A client on per-type streams learns from the clusters and listeners it ACKs where to fetch
their endpoints and routes: a per-type config source naming its bootstrap's cluster for
dragoman. When the bootstrap calls that cluster something else than the server was told
(`serve --xds-cluster-name`), Envoy never opens the EDS or RDS stream: its clusters and
listeners wait for their initial fetch timeout, then run empty, and nothing reports an
error anywhere. This watch notices and says so, once per stream.

The streams of one per-type client also share what make-before-break knows of its clusters
(`NodeWarmth`): its RDS and LDS streams hold updates until its CDS and EDS streams say the
clusters just sent are warm, and are woken then. A client is its node id on one connection
(Envoy multiplexes its per-type streams to one cluster over one): Envoys sharing a node id
share nothing. An ADS stream is a client of its own. Either is woken, too, when the grace
for a new strict-DNS cluster's first answer ends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Snapshot,
)
from dragoman.xds.protocol.make_before_break import ClusterWarmth
from dragoman.xds.server.stream_registry import ConnectedStream, StreamRegistry, XdsService

logger = logging.getLogger("dragoman.xds")

# Envoy's initial_fetch_timeout is 15 s: by then a healthy client has opened its streams.
DEFAULT_TIMEOUT_S = 15.0
# How long routes naming a new cluster other than EDS wait once Envoy ACKed it: a
# strict-DNS cluster warms until its first DNS answer, and xDS does not say when that came.
DNS_WARMING_S = 0.2
# The per-type stream an ACKed type's resources make the client open, and what it fetches.
# Of a listener's, the first whose type the snapshot serves (a scoped connection manager
# fetches scopes, not route tables).
_Dependent = tuple[XdsService, str, str, str]
_DEPENDENT: dict[str, tuple[_Dependent, ...]] = {
    CLUSTER: (("EDS", ENDPOINT, "clusters", "endpoints"),),
    LISTENER: (
        ("RDS", ROUTE, "listeners", "routes"),
        ("SRDS", SCOPED_ROUTE, "listeners", "scoped routes"),
    ),
}


# How Envoy words its refusal of a config source naming a cluster the bootstrap lacks.
_UNKNOWN_CLUSTER = "must have a statically defined non-EDS cluster"


@dataclass(eq=False)
class NodeWarmth:
    """The ClusterWarmth the streams of one client share, and how to wake them."""

    warmth: ClusterWarmth = field(default_factory=ClusterWarmth)
    wakers: dict[int, Callable[[], None]] = field(default_factory=dict)  # by stream id

    def __post_init__(self) -> None:
        self.warmth.wake = self.wake
        self.warmth.grace = self._grace

    def wake(self) -> None:
        for wake in list(self.wakers.values()):
            wake()

    def _grace(self) -> None:
        asyncio.get_running_loop().call_later(DNS_WARMING_S, self.warmth.resolved)


class DependentStreamWatch:
    def __init__(
        self,
        registry: StreamRegistry,
        cluster_name: Callable[[], str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self._registry = registry
        self._cluster_name = cluster_name
        self._timeout_s = timeout_s
        self._watched: set[int] = set()  # stream ids with a check scheduled or done
        # By (node id, peer, the stream's id for ADS, else 0).
        self._nodes: dict[tuple[str, str, int], NodeWarmth] = {}

    def join(self, stream: ConnectedStream, wake: Callable[[], None]) -> None:
        """A stream identified: give it its client's ClusterWarmth; `wake` is called when it
        should push what it holds (once per stream: a later join keeps the first)."""
        key = _client(stream)
        node = self._nodes.get(key)
        if node is None:
            node = self._nodes[key] = NodeWarmth()
        if stream.stream_id not in node.wakers:
            node.wakers[stream.stream_id] = wake
            stream.protocol.warmth = node.warmth

    def on_ack(self, stream: ConnectedStream, type_url: str, snapshot: Snapshot) -> None:
        """A per-type CDS or LDS stream ACKed: if what it holds needs EDS or RDS, check later
        that the node opened that stream."""
        if stream.service == "ADS" or stream.stream_id in self._watched:
            return
        dependent = next(
            (d for d in _DEPENDENT.get(type_url, ()) if snapshot.of_type(d[1]).resources), None
        )
        if dependent is None:
            return  # nothing to fetch: no stream expected
        self._watched.add(stream.stream_id)
        asyncio.get_running_loop().call_later(self._timeout_s, self._check, stream, dependent)

    def on_nack(self, stream: ConnectedStream, message: str) -> None:
        """Envoy refuses a config source naming a cluster its bootstrap lacks: say which
        name dragoman used, and how to change it."""
        if stream.service != "ADS" and _UNKNOWN_CLUSTER in message:
            logger.warning(
                "xDS %s: node %r has no bootstrap cluster named %r, which the EDS and RDS "
                "config sources it is served name: start dragoman serve with "
                "--xds-cluster-name naming its cluster for dragoman",
                stream.service,
                stream.node_id[:200],
                self._cluster_name(),
            )

    def forget(self, stream: ConnectedStream) -> None:
        self._watched.discard(stream.stream_id)
        key = _client(stream)
        node = self._nodes.get(key)
        if node is None or stream.stream_id not in node.wakers:
            return
        del node.wakers[stream.stream_id]
        if not node.wakers:
            del self._nodes[key]
        elif stream.service == "CDS":
            # Its nonces die with it (the next CDS stream counts from 1 again).
            node.warmth.clusters_gone()
            node.wake()

    def _check(self, stream: ConnectedStream, dependent: _Dependent) -> None:
        if stream.stream_id not in self._watched:
            return  # closed meanwhile
        service, _, held, fetched = dependent
        if any(
            other.service == service and other.node_id == stream.node_id
            for other in self._registry.streams()
        ):
            return
        logger.warning(
            "xDS %s: node %r ACKed %s whose %s come over a per-type %s stream, but opened none "
            "in %g s: its bootstrap's cluster for dragoman is probably not named %r (start "
            "dragoman serve with --xds-cluster-name naming it, or rename the cluster)",
            stream.service,
            stream.node_id[:200],
            held,
            fetched,
            service,
            self._timeout_s,
            self._cluster_name(),
        )


def _client(stream: ConnectedStream) -> tuple[str, str, int]:
    """Which client a stream is: an ADS stream alone, per-type streams by node on one peer."""
    return stream.node_id, stream.peer, stream.stream_id if stream.service == "ADS" else 0
