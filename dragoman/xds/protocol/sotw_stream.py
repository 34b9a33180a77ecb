"""The state-of-the-world xDS stream protocol as a pure state machine: no I/O, no clock.

One `SotwStream` serves one gRPC stream, either ADS (every type, ordered make-before-break)
or a single-type stream (CDS, EDS, LDS or RDS). The shell feeds it each DiscoveryRequest and
each new Snapshot, writes the responses it returns in order, and logs the events it
collects (`take_events`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from itertools import chain

from envoy.service.discovery.v3.discovery_pb2 import DiscoveryRequest

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    FULL_STATE_TYPES,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.events import Ack, Nack, StaleRequest
from dragoman.xds.protocol.make_before_break import endpoints_to_resend
from dragoman.xds.protocol.sotw_state import TypeState
from dragoman.xds.protocol.stream_protocol import StreamProtocol
from dragoman.xds.protocol.subscriptions import WILDCARD, subscription_names
from dragoman.xds.protocol.wire import SotwResponse

# Resources to send and the version_info to send them with.
Plan = tuple[str, Mapping[str, Resource]]
# The types whose resources name clusters, in ADS order: planned first (see on_snapshot).
_NAMING_ORDER = (LISTENER, SCOPED_ROUTE, ROUTE)


class SotwStream(StreamProtocol[TypeState]):
    """Protocol state of one SotW stream. `type_url` None: ADS, else the only type served."""

    def on_request(self, request: DiscoveryRequest, snapshot: Snapshot) -> list[SotwResponse]:
        """Handle one request; `snapshot` is the latest for this stream's node group.

        The request is answered from the snapshot the stream already serves, then any newer
        `snapshot` is pushed in ADS order, so that a request never overtakes that order.
        Raises StreamError for a request the protocol forbids.
        """
        type_url = self._begin(request, snapshot)
        responses = self._answer(request, type_url)
        if snapshot is not self._snapshot:
            responses += self.on_snapshot(snapshot)
        return responses

    def on_snapshot(self, snapshot: Snapshot) -> list[SotwResponse]:
        """Push what `snapshot` changes for the types this stream subscribes to, in ADS order."""
        self._snapshot = snapshot
        # Listener and route plans come first: whether they change decides whether removed
        # clusters must stay a little longer. Their content does not depend on clusters.
        late = {t: self._plan_if_changed(t) for t in _NAMING_ORDER if t in self.types}
        if CLUSTER in self.types:
            # Per-type, the routes are another stream's: `routes_settled` tells of them.
            self._retain_removed_clusters(any(p is not None for p in late.values()))
        responses: list[SotwResponse] = []
        for type_url in self._order():
            plan = late[type_url] if type_url in late else self._plan_if_changed(type_url)
            if plan is not None and type_url in late and self._holds(type_url):
                # Until the clusters just sent are warm: planned again then.
                self.types[type_url].seen_version = None
                self.types[type_url].settled = None  # not sent
                continue
            if plan is not None:
                responses += self._send(type_url, plan)
        if not self.is_ads:
            self._clusters_warmed()  # per-type: wakes the node's streams that wait
        return responses + self._release_clusters()

    # Requests.

    def _answer(self, request: DiscoveryRequest, type_url: str) -> list[SotwResponse]:
        state = self.types.get(type_url)
        first = state is None
        if state is None:
            state = self.types[type_url] = TypeState(type_url)
            self._track(type_url, state)
        elif state.nonce and request.response_nonce != state.nonce:
            # Superseded by a response the client has not seen yet; it will answer that one.
            error = request.error_detail.message if request.HasField("error_detail") else ""
            self._events.append(StaleRequest(type_url, request.response_nonce, state.nonce, error))
            return []
        self._settle(state, request)
        current = self._current(type_url)
        added = _subscribe(state, request.resource_names, current, self.legacy_wildcard)
        full_state = type_url in FULL_STATE_TYPES
        if (
            first
            and full_state
            and self._serves(type_url)
            and state.wildcard
            and request.version_info
            and request.version_info == current.version
        ):
            # A reconnecting wildcard client already runs this exact content (versions are
            # content hashes): answering would only make it rebuild nothing.
            _assume_held(state, current)
            return self._release()
        if not first and self._holds(type_url):
            # The stream may serve a newer snapshot than it sent (held on a push): what
            # names the clusters of that one waits as on a push.
            state.seen_version = None
            return self._release()
        plan = self._plan(state, current, force=added, force_full=first)
        responses = self._send(type_url, plan) if plan is not None else []
        return responses + self._release()

    def _release(self) -> list[SotwResponse]:
        """What waited: listeners and routes for clusters to warm, then removed clusters
        for the routes that named them to be replaced."""
        assert self._snapshot is not None
        held = self.on_snapshot(self._snapshot) if self._clusters_warmed() else []
        self._routes_replaced()
        return held + self._release_clusters()

    def _settle(self, state: TypeState, request: DiscoveryRequest) -> None:
        """Take the ACK or NACK of the response in flight, if this request is one."""
        if not state.in_flight or request.response_nonce != state.nonce:
            return
        state.in_flight = False
        if state.type_url == CLUSTER:
            self.warmth.clusters_answered(state.nonce, self.is_ads)
        elif state.type_url == ENDPOINT:
            # Every CLA sent since the last answer: a client applies responses in order, and
            # the answers to earlier ones were stale when they came (another was in flight).
            self.warmth.endpoints_answered(chain(state.sent_batch, state.unacked))
        full_state = state.type_url in FULL_STATE_TYPES
        if not request.HasField("error_detail"):
            if full_state:
                state.acked_sent, state.acked_whole = state.sent.mapping, state.sent_whole
            state.unacked.clear()
            state.acked_version = state.sent_version
            _accepted(state)
            if not full_state:
                _share_sent_if_equal(state, self._current(state.type_url))
            self._events.append(Ack(state.type_url, state.sent_version, state.nonce))
            return
        nack = Nack(
            type_url=state.type_url,
            version=state.sent_version,
            nonce=state.nonce,
            message=request.error_detail.message,
            code=request.error_detail.code,
            resource_names=state.sent_names,
            kept_version=request.version_info,
        )
        state.last_nack = nack
        state.settled = None  # the client keeps what it had of what it rejected
        state.rejected_version = state.sent_snapshot_version
        state.rejected_names = _rejected_names(state)
        if not full_state:
            state.rejected_digests.update(
                (n, state.sent_batch[n].digest) for n in state.rejected_names
            )
        # The client keeps what it had: forget that it holds the rejected resources.
        if full_state:
            state.sent.share(state.acked_sent)
            state.sent_whole = state.acked_whole
        elif any(n in state.unacked for n in state.sent_batch):
            sent = state.sent.writable()
            for name in [n for n in state.sent_batch if n in state.unacked]:
                before = state.unacked.pop(name)
                if before is None:
                    sent.pop(name, None)
                else:
                    sent[name] = before
        self._events.append(nack)

    # Deciding what to send.

    def _plan_if_changed(self, type_url: str) -> Plan | None:
        state = self.types[type_url]
        current = self._current(type_url)
        if current.version == state.seen_version:
            _adopt(state, current)
            return None
        return self._plan(state, current)

    def _plan(
        self,
        state: TypeState,
        current: TypeSnapshot,
        force: Collection[str] = (),
        force_full: bool = False,
    ) -> Plan | None:
        """What to send for one type, or None. `force`: names to send even if held."""
        if not self._serves(state.type_url):
            return None  # nothing is said about a type the snapshot lacks
        state.seen_version = current.version
        if state.type_url == CLUSTER:
            self.warmth.clusters_seen = current.version
        if state.rejected_version is not None and not state.rejects(current):
            state.rejected_version = None
            state.rejected_names = frozenset()
        if state.type_url in FULL_STATE_TYPES:
            plan = _plan_full_state(state, current, force_full or bool(force))
        else:
            plan = _plan_changes(state, current, force)
        if plan is None:
            _adopt(state, current)
        return plan

    def _send(self, type_url: str, plan: Plan) -> list[SotwResponse]:
        state = self.types[type_url]
        version, resources = plan
        held = state.sent.mapping
        current = self._current(type_url)
        # A first answer of the whole type: every name is new to the client, and what the
        # clusters refer to is gathered once for every stream answered so.
        every = not held and resources is current.resources
        changed: Collection[str] = ()
        if type_url == CLUSTER:
            changed = resources.keys() if every else self._changed_since_sent(state, resources)
        responses = [self._respond(state, version, resources)]
        if changed:
            if every:
                self.warmth.every_cluster_sent(state.nonce, current)
            else:
                self.warmth.clusters_sent(state.nonce, (resources[n] for n in changed), held)
            if self.is_ads and ENDPOINT in self.types:
                responses += self._resend_endpoints(changed)
        return responses

    def _respond(
        self, state: TypeState, version: str, resources: Mapping[str, Resource]
    ) -> SotwResponse:
        current = self._current(state.type_url)
        whole_type = resources is current.resources and version == current.version
        response = self._numbered(
            self.memos.bodies.sotw_response(
                state.type_url, version, resources, self._nonce, whole_type=whole_type
            )
        )
        if state.type_url in FULL_STATE_TYPES:
            state.sent.share(resources)  # never changed in place: may be the snapshot's own
            state.sent_whole = current.version if resources is current.resources else None
        elif not state.sent and resources is current.resources:
            # The first answer to a subscription of every name: hold the snapshot's mapping.
            for name in resources:
                state.unacked.setdefault(name, None)
            state.sent.share(resources)
        else:
            sent = state.sent.writable()
            for name, resource in resources.items():
                state.unacked.setdefault(name, sent.get(name))
                sent[name] = resource
        state.nonce = response.nonce
        state.in_flight = True
        state.sent_version = version
        state.sent_snapshot_version = current.version
        state.sent_batch = resources
        return response

    def _resend_endpoints(self, changed_clusters: Iterable[str]) -> list[SotwResponse]:
        """Envoy keeps a changed EDS cluster warming until a CLA arrives, even an unchanged one."""
        state = self.types[ENDPOINT]
        current = self._current(CLUSTER).resources
        clusters = [current[name] for name in changed_clusters if name in current]
        force = set(endpoints_to_resend(clusters, state))
        if not force:
            return []
        plan = self._plan(state, self._current(ENDPOINT), force=force)
        return [self._respond(state, *plan)] if plan is not None else []

    # Make-before-break removal of clusters.

    def _retain_removed_clusters(self, routes_changing: bool) -> None:
        state = self.types[CLUSTER]
        current = self._current(CLUSTER)
        if current.version == state.seen_version:
            return
        if not state.retained and state.sent_whole is not None:
            # The client holds a whole earlier snapshot: what left it is computed once for
            # every stream holding that snapshot.
            sent = state.sent.mapping
            _, removed = self.memos.whole_diffs.between(sent, state.sent_whole, current)
            gone = {n: sent[n] for n in removed}
        else:
            held = {**state.retained, **state.sent.mapping}
            gone = {n: r for n, r in held.items() if n not in current.resources}
        if gone and (routes_changing or not self._routes_settled()):
            state.retained = gone
        else:
            state.retained = {}

    def _changed_since_sent(
        self, state: TypeState, resources: Mapping[str, Resource]
    ) -> Collection[str]:
        """Names in `resources` whose content differs from what the client holds."""
        current = self._current(state.type_url)
        if resources is current.resources and state.sent_whole is not None:
            sent = state.sent.mapping
            changed, _ = self.memos.whole_diffs.between(sent, state.sent_whole, current)
            return changed
        return _changed(state.sent.mapping, resources)

    def _release_clusters(self) -> list[SotwResponse]:
        """Send the final CDS, without the retained clusters, once the routes are in place."""
        state = self.types.get(CLUSTER)
        if state is None or not state.retained or not self._routes_settled():
            return []
        state.retained = {}
        plan = self._plan(state, self._current(CLUSTER))
        return self._send(CLUSTER, plan) if plan is not None else []


def _subscribe(
    state: TypeState, names: Iterable[str], current: TypeSnapshot, legacy_wildcard: bool
) -> frozenset[str]:
    """Apply a request's resource_names; return the names newly subscribed."""
    requested = list(names)
    if not requested and not state.named:
        # Legacy wildcard: only LDS and CDS, only until the stream names a resource.
        wildcard = legacy_wildcard and state.type_url in FULL_STATE_TYPES
        explicit: frozenset[str] = frozenset()
        state.named = not legacy_wildcard
    else:
        state.named = True
        wildcard = WILDCARD in requested
        named = (n for n in requested if n != WILDCARD) if wildcard else requested
        explicit = subscription_names(named, current)
    before, was_wildcard = state.names, state.wildcard
    added = explicit - before if explicit is not before else frozenset()
    state.wildcard, state.names = wildcard, explicit
    if added & state.rejected_names:
        # Asked for again: sent again, even the content the client rejected.
        state.rejected_names -= added
    for name in added & state.rejected_digests.keys():
        del state.rejected_digests[name]
    # Forget what was sent for names no longer wanted, so a re-subscription sends them again.
    if not state.wildcard:
        if state.type_url in FULL_STATE_TYPES:
            sent, acked = (
                _subscribed_only(state, state.sent.mapping),
                _subscribed_only(state, state.acked_sent),
            )
            if sent is not state.sent.mapping:
                state.sent.share(sent)
                state.sent_whole = None
            if acked is not state.acked_sent:
                state.acked_sent, state.acked_whole = acked, None
        elif was_wildcard or not explicit >= before:  # (else all sent is still wanted)
            unwanted = [n for n in state.sent if n not in state.names]
            if unwanted:
                sent = state.sent.writable()
                for name in unwanted:
                    del sent[name]
                    state.unacked.pop(name, None)
                if not state.in_flight and not state.unacked:
                    # Fewer names (a removed cluster's CLA) may leave exactly the snapshot's
                    # mapping, and no ACK may follow to share it: share it now.
                    _share_sent_if_equal(state, current)
        for name in [n for n in state.retained if n not in state.names]:
            del state.retained[name]
    return added


def _subscribed_only(state: TypeState, held: Mapping[str, Resource]) -> Mapping[str, Resource]:
    if all(name in state.names for name in held):
        return held
    return {n: r for n, r in held.items() if n in state.names}


def _share_sent_if_equal(state: TypeState, current: TypeSnapshot) -> None:
    """EDS/RDS, idle again: hold the snapshot's own mapping when it is exactly what the
    client holds (a stream subscribed to every CLA, say), not a private copy of it nor an
    equal mapping of an earlier snapshot."""
    available = current.resources
    if (
        state.settled == current.version
        and len(state.sent) == len(available)
        and (state.wildcard or state.names is current.names or state.names >= current.names)
    ):
        # It holds every resource of the snapshot (`settled`), and as many as it has: those.
        state.sent.share(available)
        return
    state.sent.share_if_equal(available, _same_content)


def _same_content(held: Resource, resource: Resource) -> bool:
    return held.digest == resource.digest


def _adopt(state: TypeState, current: TypeSnapshot) -> None:
    """Nothing to send: hold `current`'s own mapping in place of an equal one of an earlier
    snapshot (a full build makes new objects of unchanged content), so that the earlier
    snapshot's resources are not kept alive by the streams that connected while it was served."""
    available = current.resources
    if state.type_url not in FULL_STATE_TYPES:
        # Only a mapping shared before (a private one is shared again at its next ACK).
        if state.sent.is_shared and not state.in_flight and not state.unacked:
            _share_sent_if_equal(state, current)
        return
    if state.sent_whole == current.version and state.sent.mapping is not available:
        if not state.in_flight and state.sent_batch is state.sent.mapping:
            state.sent_batch = available
        state.sent.share(available)  # the same content: its version hashes it
    if state.acked_whole == current.version:
        state.acked_sent = available


def _rejected_names(state: TypeState) -> frozenset[str]:
    """The names of a NACKed response whose content differs from what the client ACKed last:
    the resources it may have rejected (all it carried, when none differs)."""
    batch = state.sent_batch
    if state.type_url in FULL_STATE_TYPES:
        acked = state.acked_sent
        differs = [n for n, r in batch.items() if _digest(acked.get(n)) != r.digest]
    else:
        differs = [
            n
            for n, r in batch.items()
            if _digest(state.unacked.get(n, state.sent.get(n))) != r.digest
        ]
    return frozenset(differs) if differs else frozenset(batch)


def _accepted(state: TypeState) -> None:
    """An ACK of a response carrying content rejected earlier: it is rejected no longer."""
    if state.rejected_version is None:
        return
    if state.type_url in FULL_STATE_TYPES:
        if state.sent_snapshot_version == state.rejected_version:
            state.rejected_version, state.rejected_names = None, frozenset()
        return
    for name, resource in state.sent_batch.items():
        if state.rejected_digests.get(name) == resource.digest:
            del state.rejected_digests[name]  # accepted after all (e.g. after a fix elsewhere)
    if state.sent_snapshot_version == state.rejected_version:
        state.rejected_names -= state.sent_batch.keys()
        if not state.rejected_names:
            state.rejected_version = None


def _digest(resource: Resource | None) -> str | None:
    return resource.digest if resource is not None else None


def _assume_held(state: TypeState, current: TypeSnapshot) -> None:
    held = state.acked_sent = _full_state(state, current)
    state.sent.share(held)
    whole = current.version if held is current.resources else None
    state.sent_whole = state.acked_whole = whole
    state.sent_version = state.acked_version = current.version
    state.seen_version = current.version


def _plan_full_state(state: TypeState, current: TypeSnapshot, force: bool) -> Plan | None:
    """LDS/CDS: the whole subscribed set, when it differs from what the client holds.

    Content the client rejected is not sent again until it changes, unless the client
    subscribes to more names (`force`): their answer must carry the whole set, rejected
    resources included (clients keep what is valid in a response they NACK).
    """
    if state.rejects(current) and not force:
        return None
    desired = _full_state(state, current)
    if not force and _holds(state, desired, current):
        return None
    kept = sorted((n, r.digest) for n, r in state.retained.items() if n in desired)
    version = _retaining_version(current.version, kept) if kept else current.version
    return version, desired


def _full_state(state: TypeState, current: TypeSnapshot) -> Mapping[str, Resource]:
    """The subscribed set; for a plain wildcard, the snapshot's own mapping (shared)."""
    available = current.resources
    kept = {n: r for n, r in state.retained.items() if n not in available and state.subscribes(n)}
    if state.wildcard and not kept:
        return available
    if state.wildcard:
        desired = dict(available)
    else:
        desired = {n: available[n] for n in sorted(state.names) if n in available}
    if kept:
        desired = dict(sorted({**desired, **kept}.items()))
    return desired


def _plan_changes(state: TypeState, current: TypeSnapshot, force: Collection[str]) -> Plan | None:
    """EDS/RDS: only resources changed or newly requested; never an empty response."""
    available = current.resources
    blocked = state.rejects(current)
    settled = state.settled
    state.settled = None
    derived = current.derived
    candidates: Iterable[str]
    if (
        settled is not None
        and not force
        and not blocked
        and not state.rejected_digests
        and (settled == current.version or (derived is not None and derived[0] == settled))
    ):
        # The client holds every subscribed resource of `settled`: only what changed since
        # may differ (in name order, as below). An ACK of what was sent: nothing.
        changed = derived[1] if derived is not None and settled != current.version else ()
        candidates = sorted(n for n in changed if state.subscribes(n))
    elif state.wildcard or len(available) <= len(state.names):
        candidates = (n for n in available if state.subscribes(n))
    else:
        candidates = sorted(state.names)
    resources: dict[str, Resource] = {}
    rejected = state.rejected_digests
    sent = state.sent.mapping
    for name in candidates:
        resource = available.get(name)
        if resource is None or (blocked and name in state.rejected_names):
            continue
        if name in rejected and name not in force:
            if rejected[name] == resource.digest:
                continue  # the very content the client rejected: not again until it changes
            del rejected[name]
        held = sent.get(name)
        if held is None or held.digest != resource.digest or name in force:
            resources[name] = resource
    if not blocked and not rejected:
        state.settled = current.version  # once these are sent, if any
    if not resources:
        return None
    # Every resource of the snapshot: send (and hold) the snapshot's own mapping.
    return current.version, available if len(resources) == len(available) else resources


def _holds(state: TypeState, desired: Mapping[str, Resource], current: TypeSnapshot) -> bool:
    """LDS/CDS: whether the client holds exactly `desired` already."""
    held = state.sent.mapping
    if held is desired:
        return True
    if desired is current.resources and state.sent_whole is not None:
        # Both are whole type snapshots: their versions hash their contents.
        return state.sent_whole == current.version
    return held.keys() == desired.keys() and not _changed(held, desired)


def _changed(held: Mapping[str, Resource], resources: Mapping[str, Resource]) -> set[str]:
    """Names in `resources` whose content differs from (or is missing in) `held`."""
    if held is resources:
        return set()
    changed = set()
    for name, resource in resources.items():
        before = held.get(name)
        if before is None or before.digest != resource.digest:
            changed.add(name)
    return changed


def _retaining_version(version: str, kept: list[tuple[str, str]]) -> str:
    """A distinct version for a CDS response that still carries removed clusters.

    A client reconnecting with it must not be mistaken for one holding the final state.
    """
    digest = hashlib.sha256()
    for name, resource_digest in kept:
        digest.update(f"{name}\0{resource_digest}\n".encode())
    return f"{version}+{digest.hexdigest()[:8]}"
