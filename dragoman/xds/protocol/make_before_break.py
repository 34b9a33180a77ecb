"""Make before break, for SotW and delta streams alike: when listeners and routes may name
the clusters just sent, when a removed cluster (and its CLA) may go, and which CLAs a
changed cluster needs again.

A route naming a cluster Envoy is still warming answers 503 (NC, cluster not found): a new
or changed cluster warms until Envoy has applied it and, for an EDS cluster, its CLA. So
listener and route updates wait while `ClusterWarmth` says a cluster sent may be warming:
until the client answered the CDS response that carried it and ACKed the CLA of every EDS
cluster in it. An ADS stream keeps one for itself; the per-type streams of one node share
one, so that their RDS and LDS streams wait for their CDS and EDS streams, and their CDS
and EDS streams keep removed clusters until the RDS and LDS streams replaced the routes.

A cluster removed from the snapshot stays with the client until the routes that may still
name it are replaced: until the client ACKed the current listeners and every route they
fetch. SotW keeps such clusters in its CDS responses a little longer; delta holds back
their removal. Both ask `routes_settled` when they may let go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)

# What waits for clusters to warm: the types whose resources name clusters.
NAMING_TYPES = frozenset({LISTENER, SCOPED_ROUTE, ROUTE})


class HeldType(Protocol):
    """What make-before-break reads of one type's sub-stream, SotW or delta."""

    @property
    def type_url(self) -> str: ...

    @property
    def in_flight(self) -> bool: ...

    def rejects(self, current: TypeSnapshot) -> bool:
        """Whether the client rejected content that `current` still serves."""
        ...

    def held_digest(self, name: str) -> str | None:
        """The content digest the client holds (or will) under `name`."""
        ...

    def held_resources(self, current: TypeSnapshot) -> Iterable[Resource]:
        """What the client holds (or will), as far as known."""
        ...

    def subscribes(self, name: str) -> bool: ...


def routes_settled(types: Mapping[str, HeldType], snapshot: Snapshot) -> bool:
    """True when the client ACKed the current listeners and every route they fetch."""
    listeners, routes, scopes = types.get(LISTENER), types.get(ROUTE), types.get(SCOPED_ROUTE)
    for state in (listeners, routes, scopes):
        if state is not None and (
            state.in_flight or state.rejects(snapshot.of_type(state.type_url))
        ):
            return False
    if scopes is not None:
        # Scopes are fetched whole (no listener names them): every current one, as sent.
        for name, scope in snapshot.of_type(SCOPED_ROUTE).resources.items():
            if scopes.held_digest(name) != scope.digest:
                return False
    if listeners is None or routes is None:
        return True  # this stream does not fetch routes: nothing to wait for
    current_routes = snapshot.of_type(ROUTE).resources
    for listener in listeners.held_resources(snapshot.of_type(LISTENER)):
        for name in listener.references:  # the route configurations it fetches
            route = current_routes.get(name)
            if route is not None and routes.held_digest(name) != route.digest:
                return False  # a route not served at all has nothing to wait for
    return True


def endpoints_to_resend(clusters: Iterable[Resource], endpoints: HeldType) -> list[str]:
    """The CLAs (by service name) of changed EDS clusters the client subscribes to: Envoy
    keeps a changed EDS cluster warming until a CLA arrives, even an unchanged one."""
    services: list[str] = []
    for cluster in clusters:
        # An EDS cluster references the CLA it reads; any other cluster nothing.
        services.extend(s for s in cluster.references if endpoints.subscribes(s))
    return services


@dataclass(slots=True, eq=False)
class ClusterWarmth:
    """Whether clusters sent to one client may still be warming there.

    Pure bookkeeping: the stream machines say what they sent and what the client answered;
    `warm` says whether listeners and routes may go. Nonces are a stream's counter: the
    answer to a CDS response answers every earlier one (a client applies them in order).
    """

    # The CDS version the stream serving clusters last reconciled with (None: no such
    # stream yet). Per-type, a newer snapshot may reach the RDS stream before the CDS one.
    clusters_seen: str | None = None
    # The last CDS response that added or changed a cluster, until the client answers it.
    cluster_nonce: int | None = None
    # CLAs of EDS clusters sent, until the client ACKs (or rejects) them.
    awaited: set[str] = field(default_factory=set)
    # A cluster of another kind the client did not have: a strict-DNS one warms until its
    # first DNS answer, which xDS does not report. The last CDS response carrying one, until
    # answered; then `resolving` for the grace the shell gives it (`grace` starts it and
    # calls `resolved` at its end; None: no grace).
    resolving_nonce: int | None = None
    resolving: bool = False
    grace: Callable[[], None] | None = None
    # Who reads the CLAs (their sub-stream), once known: a client without one fetches none.
    endpoints: HeldType | None = None
    # The client's listener and route sub-streams, once known (`routes_settled` reads them).
    naming: dict[str, HeldType] = field(default_factory=dict)
    # Per-type: wakes the node's streams, when the clusters are warm again and a listener or
    # route waits, or when the routes settled and a cluster removal waits.
    wake: Callable[[], None] | None = None
    waiting: bool = False  # some listener or route update waits for `warm`
    removals_waiting: bool = False  # some cluster or CLA removal waits for the routes

    def clusters_sent(
        self, nonce: str, clusters: Iterable[Resource], held: Mapping[str, object]
    ) -> None:
        """A CDS response carrying `clusters`, those added or changed, went out to a client
        that held `held` (by name) before."""
        any_cluster = fresh = False
        awaited: list[str] = []
        for cluster in clusters:
            any_cluster = True
            if cluster.references:
                awaited.extend(cluster.references)  # an EDS cluster's CLA
            elif cluster.name not in held:
                fresh = True  # maybe strict-DNS: a new name has no old cluster serving
        if any_cluster:
            # Merged as one set: the table is sized for them at once, not grown name by name
            # to twice that (each stream holds it: 0.25 MiB more per stream at 6,000 clusters).
            self._sent(nonce, frozenset(awaited), fresh)

    def every_cluster_sent(self, nonce: str, clusters: TypeSnapshot) -> None:
        """A CDS response carrying every cluster of `clusters` went out to a client that held
        none: `clusters_sent`, with what they refer to gathered once for every such client."""
        if clusters.resources:
            self._sent(nonce, *clusters.referenced)

    def _sent(self, nonce: str, awaited: frozenset[str], fresh: bool) -> None:
        """Clusters went out in the CDS response `nonce`: these CLAs are awaited, and `fresh`
        ones (new names with no CLA, maybe strict DNS) may still be resolving."""
        self.awaited |= awaited
        self.cluster_nonce = int(nonce)
        if fresh and self.grace is not None:
            self.resolving_nonce = int(nonce)

    def clusters_answered(self, nonce: str, ads: bool) -> None:
        """The client ACKed or NACKed the CDS response `nonce`.

        Over ADS, Envoy asks for the CLAs of the clusters it added before it answers their
        CDS response (same stream, in order): a CLA it does not subscribe to by then (a
        proxyless gRPC client's, say) is not awaited.
        """
        if self.resolving_nonce is not None and int(nonce) >= self.resolving_nonce:
            self.resolving_nonce = None
            if self.grace is not None:
                self.resolving = True
                self.grace()
        if self.cluster_nonce is not None and int(nonce) >= self.cluster_nonce:
            self.cluster_nonce = None
            endpoints = self.endpoints
            if endpoints is None:
                self.awaited.clear()
            elif ads:
                self.awaited = {n for n in self.awaited if endpoints.subscribes(n)}

    def clusters_gone(self) -> None:
        """The stream serving clusters ended: nothing of it is awaited any more."""
        self.cluster_nonce = self.clusters_seen = self.resolving_nonce = None

    def resolved(self) -> None:
        """The grace for new clusters' first DNS answers is over."""
        self.resolving = False
        if self.waiting and self.wake is not None:
            self.wake()

    def endpoints_answered(self, names: Iterable[str]) -> None:
        """The client ACKed (or rejected: waiting would not help) these CLAs."""
        if self.awaited:
            self.awaited.difference_update(names)

    def warm(self, snapshot: Snapshot) -> bool:
        """True unless a cluster of `snapshot` may still be warming: not sent yet, its CDS
        response unanswered, or the CLA of an EDS cluster in it (one the snapshot serves)
        not yet ACKed."""
        if self.cluster_nonce is not None or self.resolving:
            return False
        seen = self.clusters_seen
        if seen is not None and seen != snapshot.of_type(CLUSTER).version:
            return False
        if self.awaited:
            available = snapshot.of_type(ENDPOINT).resources
            self.awaited = {n for n in self.awaited if n in available}
        return not self.awaited

    def hold(self, type_url: str, snapshot: Snapshot) -> bool:
        """Whether an update of `type_url` must wait now (and note that one does)."""
        if type_url not in NAMING_TYPES or self.warm(snapshot):
            return False
        self.waiting = True
        return True

    def woken(self, snapshot: Snapshot) -> bool:
        """True once, when the clusters became warm while an update was waiting."""
        if not self.waiting or not self.warm(snapshot):
            return False
        self.waiting = False
        return True
