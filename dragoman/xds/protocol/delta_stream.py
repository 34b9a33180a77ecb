"""The incremental (delta) xDS stream protocol as a pure state machine: no I/O, no clock.

One `DeltaStream` serves one gRPC stream: ADS (DeltaAggregatedResources, every type, in
make-before-break order) or a single-type stream (DeltaClusters, DeltaEndpoints, ...).
Responses carry only what changed for the client: resources whose version (their content
digest) differs from the one it holds, and `removed_resources` for names it holds or
explicitly asked for that do not exist. The shell feeds requests and snapshots in and
writes the responses out in order, as for `SotwStream`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence

from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    FULL_STATE_TYPES,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.delta_state import MAX_PENDING, UNKNOWN, DeltaTypeState, Pending
from dragoman.xds.protocol.digest_maps import DigestMap, DigestMaps
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest
from dragoman.xds.protocol.make_before_break import endpoints_to_resend
from dragoman.xds.protocol.stream_protocol import StreamProtocol
from dragoman.xds.protocol.subscriptions import WILDCARD, subscription_names
from dragoman.xds.protocol.wire import DeltaResponse

# Removals go after every addition, referrers before what they refer to.
REMOVAL_ORDER: tuple[str, ...] = (LISTENER, SCOPED_ROUTE, ROUTE, SECRET, CLUSTER, ENDPOINT)
# On ADS these wait until the client runs routes that no longer need them.
_HELD_BACK = frozenset({CLUSTER, ENDPOINT})

Plan = tuple[list[Resource], list[str]]  # resources to send, names to remove


class DeltaStream(StreamProtocol[DeltaTypeState]):
    """Protocol state of one delta stream. `type_url` None: ADS, else the only type served."""

    def on_request(self, request: DeltaDiscoveryRequest, snapshot: Snapshot) -> list[DeltaResponse]:
        """Handle one request; `snapshot` is the latest for this stream's node group.

        Subscription changes are honoured whatever the nonce (stale, unknown or absent);
        the nonce only says which response an ACK or NACK is about. The request is answered
        from the snapshot the stream already serves, then a newer `snapshot` is pushed.
        """
        type_url = self._begin(request, snapshot)
        responses = self._answer(request, type_url)
        if snapshot is not self._snapshot:
            responses += self.on_snapshot(snapshot)
        return responses

    def on_snapshot(self, snapshot: Snapshot) -> list[DeltaResponse]:
        """Push what `snapshot` changes: additions in ADS order, then removals."""
        self._snapshot = snapshot
        removals: dict[str, list[str]] = {}
        responses: list[DeltaResponse] = []
        for type_url in self._order():
            state = self.types[type_url]
            if not self._serves(type_url) or self._current(type_url).version == state.seen_version:
                continue
            if self._holds(type_url):
                # Until the clusters just sent are warm: planned again then.
                state.seen_version = None
                continue
            updates, removed = self._plan(state)
            if not self.is_ads:
                if removed and type_url in _HELD_BACK and not self._routes_settled():
                    state.deferred_removals = True  # per-type: the routes are another stream's
                    removed = []
                if updates or removed:
                    responses.append(self._respond(state, updates, removed))
                continue
            if updates:
                responses.append(self._respond(state, updates, []))
                if type_url == CLUSTER:
                    responses += self._resend_endpoints(updates)
            if removed:
                removals[type_url] = removed
        others = sorted(t for t in removals if t not in REMOVAL_ORDER)
        for type_url in [*REMOVAL_ORDER, *others]:
            if type_url in removals:
                responses += self._remove(self.types[type_url], removals[type_url])
        if not self.is_ads:
            self._clusters_warmed()  # per-type: wakes the node's streams that wait
        return responses + self._release_removals()

    # Requests.

    def _answer(self, request: DeltaDiscoveryRequest, type_url: str) -> list[DeltaResponse]:
        state = self.types.get(type_url)
        if state is None:
            state = self.types[type_url] = DeltaTypeState(type_url)
            self._track(type_url, state)
        first = not state.started
        self._settle(state, request)
        current = self._current(type_url)
        changed = _subscribe(state, request, first, current, self.legacy_wildcard)
        if first and state.held and self._serves(type_url):
            # A reconnecting client (its replica went away) holding a version this one
            # served lately, as a whole fleet does: that version's shared map, planned from
            # by the shared diff, not name by name.
            self.memos.digest_maps.digests_of(current)
            shared = self.memos.digest_maps.recent_equal(state.held.mapping)
            if shared is not None:
                state.held.share(shared)
                state.acked.share(shared)
        responses: list[DeltaResponse] = []
        if self._serves(type_url) and changed and not first and self._holds(type_url):
            state.seen_version = None  # answered once the clusters are warm, as on a push
        elif self._serves(type_url) and (first or changed):
            updates, removed = self._plan(state)
            held_back = type_url in _HELD_BACK and not self._routes_settled()
            if held_back and removed:
                state.deferred_removals = True
                removed = []
            if updates or removed or first:
                # The first answer goes even when empty: the client's initialization waits
                # for it (a wildcard CDS/LDS on an empty snapshot, say).
                responses.append(self._respond(state, updates, removed))
            if self.is_ads and type_url == CLUSTER and updates:
                responses += self._resend_endpoints(updates)
        if self._clusters_warmed():
            assert self._snapshot is not None
            responses += self.on_snapshot(self._snapshot)  # what waited for them
        self._routes_replaced()
        return responses + self._release_removals()

    def _settle(self, state: DeltaTypeState, request: DeltaDiscoveryRequest) -> None:
        """Take the ACK or NACK of the response the nonce names, if it is in flight."""
        nonce = request.response_nonce
        if not nonce:
            return  # spontaneous: a subscription change only
        pending = state.pending.pop(nonce, None)
        error = request.error_detail.message if request.HasField("error_detail") else ""
        if pending is None:
            # A response superseded long ago, or one from before a reconnect.
            self._events.append(StaleRequest(state.type_url, nonce, state.last_nonce, error))
            return
        if state.type_url == CLUSTER:
            self.warmth.clusters_answered(nonce, self.is_ads)
        elif state.type_url == ENDPOINT:
            self.warmth.endpoints_answered(r.name for r in pending.sent)
        if not request.HasField("error_detail"):
            if pending.shared_after is not None and state.acked.mapping is pending.shared_before:
                # It ACKed what it held when this went out, and now holds what this brought.
                state.acked.share(pending.shared_after)
                changed, gone = [], []
            else:
                changed = [r for r in pending.sent if state.acked.get(r.name) != r.digest]
                gone = [n for n in pending.removed if n in state.acked]
            if (changed or gone) and self._acks_what_is_held(state, changed, gone):
                state.acked.share(state.held.mapping)  # the shared map: no copy of its own
            elif changed or gone:
                acked = state.acked.writable()
                for resource in changed:
                    acked[resource.name] = resource.digest
                for name in gone:
                    del acked[name]
            if state.rejected:
                for resource in pending.sent:
                    state.rejected.pop(resource.name, None)
            state.acked_system_version = pending.system_version
            if not state.pending and self._serves(state.type_url):
                # Idle again: share the snapshot's digest map when the client holds exactly it.
                digests = self.memos.digest_maps.digests_of(self._current(state.type_url))
                state.held.share_if_equal(digests)
                state.acked.share_if_equal(digests)
            self._events.append(Ack(state.type_url, pending.system_version, nonce))
            return
        nack = Nack(
            type_url=state.type_url,
            version=pending.system_version,
            nonce=nonce,
            message=request.error_detail.message,
            code=request.error_detail.code,
            resource_names=tuple(r.name for r in pending.sent),
            kept_version="",
        )
        state.last_nack = nack
        held = state.held.writable()
        for resource in pending.sent:
            name, version = resource.name, resource.digest
            state.rejected[name] = (version, nack)
            if held.get(name) == version:  # not replaced by a later response since
                before = pending.previous.get(name)
                if before is None:
                    held.pop(name)
                else:
                    held[name] = before
        self._events.append(nack)

    # Deciding what to send.

    def _plan(self, state: DeltaTypeState) -> Plan:
        """Resources the client lacks or holds in another version, and names to remove."""
        current = self._current(state.type_url)
        state.seen_version = current.version
        if state.type_url == CLUSTER:
            self.warmth.clusters_seen = current.version
        available = current.resources
        shared = _plan_from_shared_map(state, current, self.memos.digest_maps)
        if shared is not None:
            return shared
        held = state.held.mapping
        if state.wildcard and not state.names and not state.rejected:
            if not held:
                return list(current.ordered), []  # a first answer: all of it, in order
            # Every name against what the client holds (a reconnecting one names 10,000):
            # comprehensions and a set difference, not the walk below.
            lacking = [r for n, r in available.items() if held.get(n) != r.digest]
            return lacking, sorted(held.keys() - available.keys())
        if state.wildcard:
            # The snapshot's names are already sorted; add the few it lacks.
            extra = {n for n in held if n not in available}
            extra.update(n for n in state.names if n not in available)
            names: Iterable[str] = itertools.chain(available, sorted(extra))
        else:
            names = sorted(state.names | held.keys())
        updates: list[Resource] = []
        removed: list[str] = []
        for name in names:
            resource = available.get(name)
            if resource is not None:
                if held.get(name) == resource.digest:
                    continue
                rejected = state.rejected.get(name)
                if rejected is not None:
                    if rejected[0] == resource.digest:
                        continue  # parked until its content changes
                    del state.rejected[name]
                updates.append(resource)
            elif name in held or (name in state.names and name not in state.absent):
                removed.append(name)
        return updates, removed

    def _respond(
        self, state: DeltaTypeState, updates: list[Resource], removed: list[str]
    ) -> DeltaResponse:
        current = self._current(state.type_url)
        system_version = current.version
        whole = _whole_type(updates, removed, current)
        response = self._numbered(
            self.memos.bodies.delta_response(
                state.type_url, system_version, updates, removed, self._nonce, whole_type=whole
            )
        )
        nonce = response.nonce
        held_before, held_was_shared = state.held.mapping, state.held.is_shared
        previous = (
            {r.name: v for r in updates if (v := held_before.get(r.name)) is not None}
            if held_before
            else {}
        )
        shared = None
        if updates or removed:
            shared = _apply_to_held(state, updates, removed, current, self.memos.digest_maps)
        brought = shared is not None and held_was_shared  # from one read-only map to another
        state.pending[nonce] = Pending(
            nonce=nonce,
            system_version=system_version,
            sent=tuple(updates),
            removed=tuple(removed),
            previous=previous,
            shared_before=held_before if brought else None,
            shared_after=shared if brought else None,
        )
        while len(state.pending) > MAX_PENDING:
            _, forgotten = state.pending.popitem(last=False)
            if state.type_url == ENDPOINT:
                # Its answer will be stale: waiting on its CLAs would hold routes for good.
                self.warmth.endpoints_answered(r.name for r in forgotten.sent)
        state.last_nonce = nonce
        if state.type_url == CLUSTER and whole and not held_before:
            self.warmth.every_cluster_sent(nonce, current)
        elif state.type_url == CLUSTER and updates:
            self.warmth.clusters_sent(nonce, updates, previous)  # what it held before
        return response

    def _acks_what_is_held(
        self, state: DeltaTypeState, changed: Sequence[Resource], gone: Sequence[str]
    ) -> bool:
        """Whether `acked` with this ACK applied is exactly `held`, itself a shared digest map
        and nothing else in flight: then `acked` can be that map too."""
        held = state.held.mapping
        if not isinstance(held, DigestMap) or state.pending:
            return False
        acked = state.acked.mapping
        if not acked:
            return (
                not gone
                and len(changed) == len(held)
                and all(held.get(r.name) == r.digest for r in changed)
            )
        current = self._current(state.type_url)
        if self.memos.digest_maps.shared_map_version(held) != current.version:
            return False
        return self.memos.digest_maps.is_shared_diff(acked, changed, gone, current)

    def _resend_endpoints(self, clusters: Iterable[Resource]) -> list[DeltaResponse]:
        """Envoy keeps a changed EDS cluster warming until a CLA arrives, even an unchanged one."""
        state = self.types.get(ENDPOINT)
        if state is None or not self._serves(ENDPOINT):
            return []
        forced = False
        for service in endpoints_to_resend(clusters, state):
            if service in state.held:
                state.held.writable()[service] = UNKNOWN
                forced = True
        if not forced:
            return []
        updates, removed = self._plan(state)
        if removed:
            state.deferred_removals = True  # after every addition, as always
        return [self._respond(state, updates, [])] if updates else []

    def _remove(self, state: DeltaTypeState, removed: list[str]) -> list[DeltaResponse]:
        if state.type_url in _HELD_BACK and not self._routes_settled():
            state.deferred_removals = True
            return []
        return [self._respond(state, [], removed)]

    def _release_removals(self) -> list[DeltaResponse]:
        """On ADS, send held-back cluster and CLA removals once the routes are in place."""
        responses: list[DeltaResponse] = []
        for type_url in (CLUSTER, ENDPOINT):
            state = self.types.get(type_url)
            if state is None or not state.deferred_removals:
                continue
            if not self._routes_settled():
                break
            state.deferred_removals = False
            updates, removed = self._plan(state)  # updates: normally none left by now
            if updates or removed:
                responses.append(self._respond(state, updates, removed))
        return responses


def _whole_type(updates: Sequence[Resource], removed: Sequence[str], current: TypeSnapshot) -> bool:
    """Whether a response carries every resource of `current` in its order and removes
    nothing (a first answer): its body is then known by the type's version alone."""
    return (
        not removed and len(updates) == len(current.resources) and tuple(updates) == current.ordered
    )


def _apply_to_held(
    state: DeltaTypeState,
    updates: Sequence[Resource],
    removed: Sequence[str],
    current: TypeSnapshot,
    digest_maps: DigestMaps,
) -> Mapping[str, str] | None:
    """What a response sends, applied to what the client holds (and is told is absent); the
    snapshot's shared digest map if `held` is now exactly it."""
    shared = None
    if digest_maps.brings_to_current(state.held.mapping, updates, removed, current):
        # The client will hold exactly the snapshot: share its digest map rather than copy
        # 10,000 names and digests into a map of this stream's own.
        shared = digest_maps.digests_of(current)
        state.held.share(shared)
    else:
        held = state.held.writable()
        for resource in updates:
            held[resource.name] = resource.digest
        for name in removed:
            held.pop(name, None)
        if state.wildcard and len(held) == len(current.resources):
            # A reconnecting client brought up to date from what it named: the shared map
            # from now on, not a copy of its own.
            digests = digest_maps.digests_of(current)
            state.held.share_if_equal(digests)
            shared = digests if state.held.mapping is digests else None
    if state.absent:
        for resource in updates:
            state.absent.discard(resource.name)
    for name in removed:
        if name in state.names:
            state.absent.add(name)
    return shared


def _plan_from_shared_map(
    state: DeltaTypeState, current: TypeSnapshot, digest_maps: DigestMaps
) -> Plan | None:
    """The usual push to an idle stream: a diff computed once for all such streams.

    Applies when the stream holds exactly a shared digest map (`digests_of` an earlier
    version), has nothing parked, and is a wildcard with no explicit names, or subscribes
    to names it all holds or was told do not exist (Envoy's EDS: every cluster's CLA);
    else None (plan name by name: at 5,000 CLAs, a sort and a walk of every name).
    """
    if state.rejected or (state.wildcard and state.names):
        return None
    held = state.held.mapping
    old_version = digest_maps.shared_map_version(held)
    if old_version is None:
        return None
    names = state.names
    if not state.wildcard and not (names - state.absent if state.absent else names) <= held.keys():
        return None
    try:
        changed, removed = digest_maps.shared_diff(old_version, current)
    except KeyError:
        return None
    available = current.resources
    if state.wildcard:
        return [available[n] for n in changed], list(removed)
    # What it holds is the old version; of the rest, only what it subscribes to.
    return [available[n] for n in changed if n in held or n in names], list(removed)


def _subscribe(
    state: DeltaTypeState,
    request: DeltaDiscoveryRequest,
    first: bool,
    current: TypeSnapshot,
    legacy_wildcard: bool,
) -> bool:
    """Apply a request's subscription changes; True if anything may need an answer."""
    subscribe = list(request.resource_names_subscribe)
    unsubscribe = list(request.resource_names_unsubscribe)
    initial: dict[str, str] = {}
    if first:
        state.started = True
        versions = request.initial_resource_versions
        initial = {name: versions[name] for name in versions}  # dict() is slower on a map
        if (
            not subscribe
            and not unsubscribe
            and legacy_wildcard
            and state.type_url in FULL_STATE_TYPES
        ):
            state.wildcard = True  # legacy wildcard: Envoy's first LDS/CDS request
    changed = False
    if subscribe or unsubscribe:
        # Changed in a private set, then shared again (`subscription_names`).
        names = state.names = set(state.names)
        for name in unsubscribe:
            if name == WILDCARD:
                if state.wildcard:
                    state.wildcard = False
                    for held in [n for n in state.held if n not in names]:
                        _forget(state, held)
                    changed = True
            elif name in names:
                names.discard(name)
                state.absent.discard(name)
                if state.wildcard:
                    # Still wanted through the wildcard: the spec asks for the resource (or
                    # its removal) again, since the client may have dropped it.
                    state.held.writable()[name] = UNKNOWN
                    changed = True
                else:
                    _forget(state, name)
            # A name never subscribed: a phantom unsubscribe, ignored.
        for name in subscribe:
            changed = True
            if name == WILDCARD:
                state.wildcard = True
                continue
            names.add(name)
            if name not in initial:
                # Asked for again: sent again, even if the client seems to hold it.
                if name in state.held:
                    state.held.writable().pop(name)
                state.absent.discard(name)
                state.rejected.pop(name, None)
        state.names = subscription_names(names, current)
    if initial:
        # A reconnecting client already holds these, and accepted them: a client keeps only
        # what it accepted. Only what it subscribes to counts. One read-only map for both,
        # copied by whichever changes first.
        holding = (
            initial  # a wildcard subscribes to every name: no need to ask for each
            if state.wildcard
            else {n: v for n, v in initial.items() if state.subscribes(n)}
        )
        state.held.share(holding)
        state.acked.share(holding)
    return changed


def _forget(state: DeltaTypeState, name: str) -> None:
    if name in state.held:
        state.held.writable().pop(name)
    if name in state.acked:
        state.acked.writable().pop(name)
    state.absent.discard(name)
    state.rejected.pop(name, None)
