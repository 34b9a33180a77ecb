"""Make before break, for SotW and delta streams alike: when a removed cluster (and its CLA)
may go, and which CLAs a changed cluster needs again.

On ADS, a cluster removed from the snapshot stays with the client until the routes that may
still name it are replaced: until the client ACKed the current listeners and every route
they fetch. SotW keeps such clusters in its CDS responses a little longer; delta holds back
their removal. Both ask `routes_settled` when they may let go.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from dragoman.snapshots.resources import LISTENER, ROUTE, Resource, Snapshot, TypeSnapshot


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
    listeners, routes = types.get(LISTENER), types.get(ROUTE)
    for state in (listeners, routes):
        if state is not None and (
            state.in_flight or state.rejects(snapshot.of_type(state.type_url))
        ):
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
