"""What a state-of-the-world stream remembers per type, and what it reports to its shell."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from dragoman.snapshots.resources import FULL_STATE_TYPES, Resource, TypeSnapshot
from dragoman.xds.protocol.copy_on_write import CopyOnWrite
from dragoman.xds.protocol.events import Nack
from dragoman.xds.protocol.resource_status import (
    ClientStatus,
    ConfigStatus,
    ResourceStatus,
    TypeStatus,
    not_held,
)

# Diffs between whole type snapshots kept for reuse: one change, plus a few versions back
# for streams that lag behind.
WHOLE_DIFFS = 8


@dataclass(slots=True)
class TypeState:
    """One type's sub-stream: subscription, last response, what the client holds, NACK state."""

    type_url: str

    # Subscription. Never changed in place: it may be the snapshot's own name set.
    wildcard: bool = False
    names: Set[str] = frozenset()
    # Once a request names a resource, an empty list means "nothing" and no longer wildcard.
    named: bool = False

    # The last response sent.
    nonce: str = ""  # "" until the first response: until then no request can be stale
    in_flight: bool = False  # its ACK or NACK has not arrived yet
    sent_version: str = ""
    sent_snapshot_version: str = ""  # the TypeSnapshot it came from (differs while retaining)
    # What it carried: a reference, often the snapshot's own mapping (no per-stream copy).
    sent_batch: Mapping[str, Resource] = field(default_factory=dict)

    # What the client holds, or will once in-flight responses are applied, by name.
    # LDS/CDS: replaced whole on every response and never changed in place, so a wildcard
    # stream can hold the snapshot's own mapping (no per-stream copy of a thousand clusters).
    # EDS/RDS: updated name by name in this stream's own dict, except while it equals the
    # snapshot's mapping, which it then holds (copied before any change).
    sent: CopyOnWrite[Resource] = field(default_factory=CopyOnWrite)
    # LDS/CDS: what the client held at its last ACK; a NACK puts it back.
    acked_sent: Mapping[str, Resource] = field(default_factory=dict)
    # LDS/CDS: the version of the TypeSnapshot whose own mapping `sent` (`acked_sent`) is,
    # None when it is a selection. Versions hash names and digests, so comparing two of them
    # tells whether the contents differ, with no per-stream walk over every resource.
    sent_whole: str | None = None
    acked_whole: str | None = None
    # EDS/RDS: the values `sent` had at the last ACK for names changed since (None: not
    # held). A NACK restores them, so that the next change sends those resources again.
    unacked: dict[str, Resource | None] = field(default_factory=dict)
    acked_version: str = ""

    last_nack: Nack | None = None
    # The TypeSnapshot version whose content was NACKed: none of it is sent again until the
    # snapshot of this type changes (no NACK ping-pong).
    rejected_version: str | None = None
    rejected_names: frozenset[str] = frozenset()
    # EDS/RDS: the content of each rejected resource. An unrelated change elsewhere in the
    # type must not bring the same rejected content back (one more NACK per change).
    rejected_digests: dict[str, str] = field(default_factory=dict)

    # The TypeSnapshot version `sent` was last reconciled with: a push skips unchanged types.
    seen_version: str | None = None
    # EDS/RDS: the TypeSnapshot version whose every subscribed resource `sent` holds, none
    # rejected (None: unknown). A later snapshot derived from it (TypeSnapshot.derived) is
    # planned from the names it changed alone, not by comparing every resource.
    settled: str | None = None

    # CDS on ADS only: clusters removed from the snapshot but kept in responses until the
    # routes that may still name them are replaced (make-before-break).
    retained: dict[str, Resource] = field(default_factory=dict)

    @property
    def sent_names(self) -> tuple[str, ...]:
        """Names the last response carried, in order."""
        return tuple(self.sent_batch)

    def subscribes(self, name: str) -> bool:
        return self.wildcard or name in self.names

    def rejects(self, current: TypeSnapshot) -> bool:
        """True while `current` is the content the client last rejected."""
        return self.rejected_version == current.version

    def held_digest(self, name: str) -> str | None:
        """The content digest of what the client holds (or will) under `name`."""
        held = self.sent.get(name)
        return held.digest if held is not None else None

    def held_resources(self, current: TypeSnapshot) -> Iterable[Resource]:
        """What the client holds (or will), as sent."""
        return self.sent.values()

    @property
    def sent_digests(self) -> dict[str, str]:
        return {name: r.digest for name, r in self.sent.items()}

    def acked_resources(self) -> Mapping[str, Resource]:
        """What the client ACKed, by name."""
        if self.type_url in FULL_STATE_TYPES:
            return self.acked_sent
        own = {n: r for n, r in self.sent.items() if n not in self.unacked}
        own.update({n: r for n, r in self.unacked.items() if r is not None})
        return own

    def type_status(self) -> TypeStatus:
        return TypeStatus(
            type_url=self.type_url,
            sent_version=self.sent_version,
            acked_version=self.acked_version,
            in_flight=self.in_flight,
            last_nack=self.last_nack,
            subscribed=tuple(sorted(self.names)),
            wildcard=self.wildcard,
        )

    def resource_statuses(self, current: TypeSnapshot) -> list[ResourceStatus]:
        """Every resource the client holds or asked for, by name, against `current`."""
        available = current.resources
        acked = self.acked_resources()
        in_flight = set(self.sent_names) if self.in_flight else set()
        rejected = self.rejected_names if self.rejected_version is not None else frozenset()
        names = set(acked) | in_flight | rejected | self.names
        if self.wildcard:
            names.update(available)
        out = []
        for name in sorted(names):
            now = available.get(name)
            held = acked.get(name)
            version = self.acked_version if held is not None else ""
            if name in rejected and self.last_nack is not None:
                out.append(
                    ResourceStatus(
                        self.type_url,
                        name,
                        version,
                        ClientStatus.NACKED,
                        ConfigStatus.ERROR,
                        self.last_nack,
                        held,
                    )
                )
            elif held is not None:
                synced = name not in in_flight and now is not None and now.digest == held.digest
                config = ConfigStatus.SYNCED if synced else ConfigStatus.STALE
                out.append(
                    ResourceStatus(
                        self.type_url, name, version, ClientStatus.ACKED, config, resource=held
                    )
                )
            else:
                out.append(not_held(self.type_url, name, name in in_flight, now is not None))
        return out


class WholeTypeDiffs:
    """What changed between two whole type snapshots, computed once for every stream that
    holds the first and is served the second (SotW CDS/LDS: a wildcard stream holds the
    snapshot's own mapping). Keyed by the two versions, which are content hashes."""

    def __init__(self, size: int = WHOLE_DIFFS) -> None:
        self._size = size
        self._diffs: OrderedDict[tuple[str, str], tuple[frozenset[str], tuple[str, ...]]] = (
            OrderedDict()
        )

    def between(
        self, held: Mapping[str, Resource], held_version: str, current: TypeSnapshot
    ) -> tuple[frozenset[str], tuple[str, ...]]:
        """(names changed or added, names removed) from `held`, the whole mapping of the
        type snapshot `held_version`, to `current`."""
        key = (held_version, current.version)
        found = self._diffs.get(key)
        if found is not None:
            self._diffs.move_to_end(key)
            return found
        new = current.resources
        derived = current.derived
        if derived is not None and derived[0] == held_version:
            # `current` was made from the very content held, by changing these names alone
            # (versions hash the content): one change among 10,000 walks one name, not all.
            names = derived[1]
            changed = frozenset(
                n for n in names if n in new and _digest(held.get(n)) != new[n].digest
            )
            removed = tuple(sorted(n for n in names if n in held and n not in new))
        else:
            changed = frozenset(n for n, r in new.items() if _digest(held.get(n)) != r.digest)
            removed = tuple(n for n in held if n not in new)
        found = self._diffs[key] = (changed, removed)
        if len(self._diffs) > self._size:
            self._diffs.popitem(last=False)
        return found


def _digest(resource: Resource | None) -> str | None:
    return resource.digest if resource is not None else None
