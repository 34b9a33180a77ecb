"""What an incremental (delta) stream remembers per type."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass, field

from dragoman.snapshots.resources import Resource, TypeSnapshot
from dragoman.xds.protocol.copy_on_write import CopyOnWrite
from dragoman.xds.protocol.events import Nack
from dragoman.xds.protocol.resource_status import (
    ClientStatus,
    ConfigStatus,
    ResourceStatus,
    TypeStatus,
    not_held,
)

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
    # When this response brought `held` from a read-only map (nothing, or a shared digest
    # map) to the snapshot's shared digest map: those two. A client that had ACKed exactly
    # the first holds the second once it ACKs this one (no walk of the names it carried).
    shared_before: Mapping[str, str] | None = None
    shared_after: Mapping[str, str] | None = None


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
    # `held` and `acked` hold read-only shared maps (`digests_of`) while they equal the
    # snapshot's, which is the usual idle state, and copy them before any change.
    held: CopyOnWrite[str] = field(default_factory=CopyOnWrite)
    # Explicitly subscribed names the client has been told do not exist.
    absent: set[str] = field(default_factory=set)
    # name -> version the client ACKed.
    acked: CopyOnWrite[str] = field(default_factory=CopyOnWrite)
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

    def rejects(self, current: TypeSnapshot) -> bool:
        """Whether the client rejected the content `current` serves under some name."""
        available = current.resources
        for name, (version, _) in self.rejected.items():
            resource = available.get(name)
            if resource is not None and resource.digest == version:
                return True
        return False

    def held_digest(self, name: str) -> str | None:
        return self.held.get(name)

    def held_resources(self, current: TypeSnapshot) -> Iterator[Resource]:
        """What the client holds (or will) of `current`: a name held at another version
        says only its digest, not its content."""
        available = current.resources
        for name, version in self.held.items():
            resource = available.get(name)
            if resource is not None and resource.digest == version:
                yield resource

    def type_status(self) -> TypeStatus:
        acked = self.acked_system_version
        pending = self.pending
        sent = next(reversed(pending.values())).system_version if pending else acked
        return TypeStatus(
            type_url=self.type_url,
            sent_version=sent,
            acked_version=acked,
            in_flight=self.in_flight,
            last_nack=self.last_nack,
            subscribed=tuple(sorted(self.names)),
            wildcard=self.wildcard,
        )

    def resource_statuses(self, current: TypeSnapshot) -> list[ResourceStatus]:
        """Every resource the client holds or asked for, by name, against `current`."""
        available = current.resources
        names = set(self.held) | set(self.acked) | set(self.rejected) | self.names
        if self.wildcard:
            names.update(available)
        out = []
        for name in sorted(names):
            now = available.get(name)
            acked = self.acked.get(name)
            rejected = self.rejected.get(name)
            if rejected is not None and (now is None or now.digest == rejected[0]):
                out.append(
                    ResourceStatus(
                        self.type_url,
                        name,
                        acked or "",
                        ClientStatus.NACKED,
                        ConfigStatus.ERROR,
                        rejected[1],
                    )
                )
            elif acked is not None:
                synced = now is not None and now.digest == acked
                out.append(
                    ResourceStatus(
                        self.type_url,
                        name,
                        acked,
                        ClientStatus.ACKED,
                        ConfigStatus.SYNCED if synced else ConfigStatus.STALE,
                        resource=now if synced else None,
                    )
                )
            elif now is None and name in self.absent:
                # The client was told in removed_resources: it knows, and agrees.
                out.append(
                    ResourceStatus(
                        self.type_url, name, "", ClientStatus.DOES_NOT_EXIST, ConfigStatus.SYNCED
                    )
                )
            else:
                out.append(not_held(self.type_url, name, name in self.held, now is not None))
        return out
