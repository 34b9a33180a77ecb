"""Requests read but not yet answered, merged so that a burst costs one answer per type.

A client that sends requests faster than the stream answers them gets, per type, the answer
to the latest state of its requests, never one per request:

- SotW: each request carries the whole subscription, the version held and the nonce it
  answers, so the latest request of a type stands for the ones before it. Only a NACK is
  not superseded by a later request that names the same nonce without an error (Envoy
  sends one when it changes its subscription after rejecting): the error is kept.
- Delta: subscriptions are cumulative, so the changes are merged in order (a name
  subscribed then unsubscribed is unsubscribed, and the other way round), and each ACK or
  NACK is kept by nonce, to be taken before the merged subscription change.

The first request of each type is never merged: it carries the node, the legacy wildcard
(an empty first request) and, for delta, `initial_resource_versions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

# ACKs and NACKs kept per type while waiting: a delta stream has at most this many responses
# in flight worth settling (older ones are stale: `delta_state.MAX_PENDING`).
MAX_SETTLEMENTS = 16


@dataclass(slots=True)
class _DeltaChanges:
    """The merged subscription changes and the ACKs/NACKs of one delta type."""

    type_url: str
    settlements: dict[str, DeltaDiscoveryRequest] = field(default_factory=dict)
    subscribe: dict[str, None] = field(default_factory=dict)  # ordered sets
    unsubscribe: dict[str, None] = field(default_factory=dict)

    def merge(self, request: DeltaDiscoveryRequest) -> None:
        for name in request.resource_names_unsubscribe:
            self.subscribe.pop(name, None)
            self.unsubscribe[name] = None
        for name in request.resource_names_subscribe:
            self.unsubscribe.pop(name, None)
            self.subscribe[name] = None
        nonce = request.response_nonce
        if nonce:
            settlement = DeltaDiscoveryRequest(type_url=request.type_url, response_nonce=nonce)
            if request.HasField("error_detail"):
                settlement.error_detail.CopyFrom(request.error_detail)
            self.settlements.pop(nonce, None)
            self.settlements[nonce] = settlement
            while len(self.settlements) > MAX_SETTLEMENTS:
                del self.settlements[next(iter(self.settlements))]

    def requests(self) -> list[DeltaDiscoveryRequest]:
        requests = list(self.settlements.values())
        if self.subscribe or self.unsubscribe:
            requests.append(
                DeltaDiscoveryRequest(
                    type_url=self.type_url,
                    resource_names_subscribe=list(self.subscribe),
                    resource_names_unsubscribe=list(self.unsubscribe),
                )
            )
        return requests


_Entry: TypeAlias = DiscoveryRequest | DeltaDiscoveryRequest | _DeltaChanges


class RequestMailbox:
    """Requests of one stream waiting to be answered, merged per type (see module doc)."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._mergeable: dict[str, _Entry] = {}  # per type: the entry later ones merge into
        self._seen: set[str] = set()  # types whose first request was put
        self.put_count = 0
        # Requests answered as part of a later one, not on their own.
        self.merged_count = 0

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, request: DiscoveryRequest | DeltaDiscoveryRequest) -> None:
        self.put_count += 1
        type_url = request.type_url
        if type_url not in self._seen:
            self._seen.add(type_url)
            self._entries.append(request)
            return
        entry = self._mergeable.get(type_url)
        if entry is None:
            entry = self._new_entry(request)
            self._mergeable[type_url] = entry
            self._entries.append(entry)
            return
        self.merged_count += 1
        if isinstance(entry, _DeltaChanges):
            assert isinstance(request, DeltaDiscoveryRequest)
            entry.merge(request)
            return
        assert isinstance(request, DiscoveryRequest) and isinstance(entry, DiscoveryRequest)
        merged = _sotw_merged(entry, request)
        # By identity: messages compare by content, and the first request may equal a later one.
        at = next(i for i, e in enumerate(self._entries) if e is entry)
        self._entries[at] = self._mergeable[type_url] = merged

    def take(self) -> list[DiscoveryRequest | DeltaDiscoveryRequest]:
        """The requests to answer, in the order their types first arrived; empties the box."""
        requests: list[DiscoveryRequest | DeltaDiscoveryRequest] = []
        for entry in self._entries:
            if isinstance(entry, _DeltaChanges):
                requests += entry.requests()
            else:
                requests.append(entry)
        self._entries = []
        self._mergeable = {}
        return requests

    @staticmethod
    def _new_entry(request: DiscoveryRequest | DeltaDiscoveryRequest) -> _Entry:
        if isinstance(request, DeltaDiscoveryRequest):
            changes = _DeltaChanges(request.type_url)
            changes.merge(request)
            return changes
        return request


def _sotw_merged(earlier: DiscoveryRequest, later: DiscoveryRequest) -> DiscoveryRequest:
    """`later`, keeping the NACK `earlier` carries for the same nonce."""
    if (
        earlier.HasField("error_detail")
        and not later.HasField("error_detail")
        and earlier.response_nonce == later.response_nonce
    ):
        kept = DiscoveryRequest()
        kept.CopyFrom(later)
        kept.error_detail.CopyFrom(earlier.error_detail)
        return kept
    return later
