"""What an incremental (delta) stream remembers per type."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from dragoman.snapshots.resources import Resource
from dragoman.xds.protocol.events import Nack

# `held` value for a name whose state on the client is unknown: the next response carries
# the resource, or its name in removed_resources (a wildcard client that unsubscribed it).
UNKNOWN = ""

# Responses awaiting an ACK, per type. A client that never answers cannot grow this: the
# oldest are forgotten (their late ACK then counts as a spontaneous request).
MAX_PENDING = 64


@dataclass(frozen=True, slots=True)
class Pending:
    """One response in flight."""

    nonce: str
    system_version: str
    # The resources carried (name, and digest as version): the snapshot's own objects, so a
    # response of 10,000 resources in flight costs its stream one tuple, not 10,000 pairs.
    sent: tuple[Resource, ...]
    removed: tuple[str, ...]
    # What `held` had before this response for each carried name it held (a name absent here
    # was not held), so a NACK can put it back; empty for a stream's first response.
    previous: Mapping[str, str]


@dataclass(slots=True)
class DeltaTypeState:
    """One type's sub-stream of a delta stream."""

    type_url: str
    started: bool = False  # the first request of this type has arrived

    # Subscription. Never changed in place: it may be the snapshot's own name set.
    wildcard: bool = False
    names: Set[str] = frozenset()

    # name -> resource version (the content digest) the client holds, or will once
    # in-flight responses are applied; UNKNOWN forces a resend or a removal.
    # `held` and `acked` are read-only shared maps (`digests_of`) while they equal the
    # snapshot's, which is the usual idle state: change them only through `writable`.
    held: Mapping[str, str] = field(default_factory=dict)
    # Explicitly subscribed names the client has been told do not exist.
    absent: set[str] = field(default_factory=set)
    # name -> version the client ACKed.
    acked: Mapping[str, str] = field(default_factory=dict)
    pending: OrderedDict[str, Pending] = field(default_factory=OrderedDict)

    # name -> (rejected version, the NACK): not sent again until its content changes.
    rejected: dict[str, tuple[str, Nack]] = field(default_factory=dict)
    last_nack: Nack | None = None

    # The TypeSnapshot version last reconciled with; None forces a reconciliation.
    seen_version: str | None = None
    # ADS: removals held back until the routes that may name them are replaced.
    deferred_removals: bool = False
    acked_system_version: str = ""  # system_version_info of the last ACKed response
    last_nonce: str = ""  # of the last response sent

    def subscribes(self, name: str) -> bool:
        return self.wildcard or name in self.names

    @property
    def in_flight(self) -> bool:
        return bool(self.pending)


def writable(mapping: Mapping[str, str]) -> dict[str, str]:
    """`mapping` itself if it is this stream's own dict, else a private copy to change."""
    return mapping if type(mapping) is dict else dict(mapping)


def share_if_equal(mapping: Mapping[str, str], digests: Mapping[str, str]) -> Mapping[str, str]:
    """The shared `digests` in place of an equal private map (an idle stream's usual state)."""
    if mapping is digests or len(mapping) != len(digests):
        return mapping
    return digests if mapping == digests else mapping
