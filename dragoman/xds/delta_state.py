"""What an incremental (delta) stream remembers per type."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import NoReturn

from dragoman.snapshots.resources import Resource, TypeSnapshot
from dragoman.xds.sotw_state import Nack

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


class DigestMap(dict[str, str]):
    """The name -> digest map of one type snapshot, shared by every delta stream holding it.

    Never changed once made: a stream copies it (`writable`) before changing its own. A
    dict for the speed of its lookups; weakly referenceable, so that the maps no stream
    holds any more are let go (10,000 names cost about 200 KiB per map)."""

    __slots__ = ("__weakref__", "version")

    def __init__(self, version: str, digests: Mapping[str, str]) -> None:
        super().__init__(digests)
        self.version = version

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a shared digest map is read-only; copy it with writable()")

    __setitem__ = __delitem__ = _read_only
    pop = popitem = clear = update = setdefault = __ior__ = _read_only  # type: ignore[assignment]


# Digest maps kept although no stream holds them (the latest few, which streams are about to
# take), and diffs between them.
RECENT_MAPS = 4
DIFFS = 64


class DigestMaps:
    """Read-only name -> digest maps of type snapshots, and the diffs between them, shared by
    the delta streams of one SnapshotCache (which owns this).

    A map lives as long as a stream holds it (plus the latest few): a burst of changes
    leaves no map behind per version once every stream has moved on."""

    def __init__(self, recent: int = RECENT_MAPS, diffs: int = DIFFS) -> None:
        self._max_recent, self._max_diffs = recent, diffs
        self._recent: OrderedDict[str, DigestMap] = OrderedDict()
        self._alive: dict[str, weakref.ref[DigestMap]] = {}
        self._diffs: OrderedDict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        """How many maps are alive (held by a stream, or recent)."""
        return len(self._alive)

    def digests_of(self, current: TypeSnapshot) -> Mapping[str, str]:
        """name -> digest of a type snapshot, read-only and shared by every stream.

        Keyed by the type version alone: that version is a hash of these very pairs.
        """
        version = current.version
        found = self._find(version)
        if found is None:
            found = DigestMap(version, {n: r.digest for n, r in current.resources.items()})
            self._alive[version] = weakref.ref(found, self._forget(version))
        self._recent[version] = found
        self._recent.move_to_end(version)
        if len(self._recent) > self._max_recent:
            self._recent.popitem(last=False)
        return found

    def shared_diff(
        self, old_version: str, current: TypeSnapshot
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(changed or added names, removed names) from the digest map of `old_version` to
        `current`'s, computed once for every stream holding exactly the old map.

        Raises KeyError if the old map is no longer kept.
        """
        key = (old_version, current.version)
        found = self._diffs.get(key)
        if found is None:
            old = self._find(old_version)
            if old is None:
                raise KeyError(old_version)
            new = current.resources
            changed = tuple(n for n, r in new.items() if old.get(n) != r.digest)
            removed = tuple(sorted(n for n in old if n not in new))
            found = self._diffs[key] = (changed, removed)
            if len(self._diffs) > self._max_diffs:
                self._diffs.popitem(last=False)
        return found

    def shared_map_version(self, mapping: Mapping[str, str]) -> str | None:
        """The type version whose shared digest map `mapping` is, if it is one of these."""
        if not isinstance(mapping, DigestMap):
            return None
        version = mapping.version
        return version if self._find(version) is mapping else None

    def _find(self, version: str) -> DigestMap | None:
        ref = self._alive.get(version)
        return ref() if ref is not None else None

    def _forget(self, version: str) -> Callable[[weakref.ref[DigestMap]], None]:
        def forget(gone: weakref.ref[DigestMap]) -> None:
            if self._alive.get(version) is gone:  # not replaced by a newer map meanwhile
                del self._alive[version]

        return forget
