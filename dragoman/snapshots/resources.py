"""Serialized resources and snapshots: built once per change, shared by every stream."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter

from google.protobuf.message import Message

# Node group served to an Envoy whose `node.cluster` names no Gateway: every Gateway. The DAG
# builds it; serving falls back to it.
ALL_GATEWAYS = ""

CLUSTER = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
LISTENER = "type.googleapis.com/envoy.config.listener.v3.Listener"
ROUTE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
# Scoped RDS: one route table per Host, each its own resource (a Gateway's opt-in).
SCOPED_ROUTE = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
SECRET = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

# Make-before-break order for ADS: clusters, their endpoints, the secrets listeners use (Envoy
# warms a listener until its secrets arrive), listeners, then routes (scoped, then plain).
ADS_ORDER: tuple[str, ...] = (CLUSTER, ENDPOINT, SECRET, LISTENER, SCOPED_ROUTE, ROUTE)

# SotW responses for these types carry the full subscribed set (absence means deletion).
# Envoy subscribes to scoped routes by wildcard and treats each response as the whole set.
FULL_STATE_TYPES = frozenset({CLUSTER, LISTENER, SCOPED_ROUTE})

SHORT_NAMES = {
    CLUSTER: "CDS",
    ENDPOINT: "EDS",
    LISTENER: "LDS",
    SCOPED_ROUTE: "SRDS",
    ROUTE: "RDS",
    SECRET: "SDS",
}

# Types whose bodies hold private keys: served to entitled nodes only, never shown (CSDS).
SECRET_TYPES = frozenset({SECRET})


def ads_ordered(type_urls: Collection[str]) -> list[str]:
    """`type_urls` in ADS order, then any other types sorted."""
    known = [t for t in ADS_ORDER if t in type_urls]
    return known + sorted(t for t in type_urls if t not in ADS_ORDER)


NO_REFERENCES: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    type_url: str
    body: bytes  # deterministic serialization of the message
    digest: str  # sha256 of body, hex: the resource's version
    # The resources of the next type in ADS order this one makes its client fetch, as
    # translation named them: an EDS Cluster's ClusterLoadAssignment, the RouteConfigurations
    # a Listener's connection managers fetch over RDS (not the scopes of a scoped one: those
    # are fetched whole). Serving orders make-before-break by
    # them without reading the body. (A tuple of distinct names: a frozenset of one name,
    # for each of ten thousand EDS clusters, would take 1 MiB more.)
    references: tuple[str, ...] = NO_REFERENCES

    @classmethod
    def of(
        cls, name: str, message: Message, references: tuple[str, ...] = NO_REFERENCES
    ) -> Resource:
        body = message.SerializeToString(deterministic=True)
        return cls.of_bytes(name, type_url_of(message), body, references)

    @classmethod
    def of_bytes(
        cls, name: str, type_url: str, body: bytes, references: tuple[str, ...] = NO_REFERENCES
    ) -> Resource:
        """From an already deterministic serialization."""
        return cls(
            name=name,
            type_url=type_url,
            body=body,
            digest=hashlib.sha256(body).hexdigest(),
            references=references,
        )


def type_url_of(message: Message) -> str:
    """The message's type URL: one string per type, not one per resource (10,000 copies of
    the Cluster's URL)."""
    return sys.intern("type.googleapis.com/" + message.DESCRIPTOR.full_name)


@dataclass(frozen=True, slots=True)
class TypeSnapshot:
    """All resources of one type for one node group, with a content-hash version."""

    resources: Mapping[str, Resource] = field(default_factory=dict)
    version: str = ""
    # frozenset(resources), made on first use and shared by every stream subscribing to
    # exactly these names.
    _names: frozenset[str] | None = field(default=None, init=False, compare=False, repr=False)
    # Made by `replaced` (and `SortedListing.changed`): the version of the snapshot it was
    # made from and the names whose resources differ from that one's, names added or removed
    # included (a stream that holds that one sends only those).
    derived: tuple[str, frozenset[str]] | None = field(default=None, compare=False, repr=False)
    # What `replaced` hashes, made on its first use: the version's listing, and where each
    # name's digest sits in it (shared by the snapshots `replaced` makes: the same names).
    _listing: _Listing | None = field(default=None, init=False, compare=False, repr=False)
    # Every resource in order, and what they refer to: made on first use and shared by every
    # stream answered with the whole type (a delta stream's first answer, say).
    _ordered: tuple[Resource, ...] | None = field(
        default=None, init=False, compare=False, repr=False
    )
    _referenced: tuple[frozenset[str], bool] | None = field(
        default=None, init=False, compare=False, repr=False
    )

    @property
    def names(self) -> frozenset[str]:
        found = self._names
        if found is None:
            found = frozenset(self.resources)
            object.__setattr__(self, "_names", found)  # a cache, not state: frozen otherwise
        return found

    @property
    def ordered(self) -> tuple[Resource, ...]:
        """Every resource, in the order of `resources`."""
        found = self._ordered
        if found is None:
            found = tuple(self.resources.values())
            object.__setattr__(self, "_ordered", found)  # a cache, not state
        return found

    @property
    def referenced(self) -> tuple[frozenset[str], bool]:
        """Every name the resources refer to, and whether some resource refers to none."""
        found = self._referenced
        if found is None:
            names: list[str] = []
            unreferencing = False
            for resource in self.resources.values():
                if resource.references:
                    names.extend(resource.references)
                else:
                    unreferencing = True
            found = (frozenset(names), unreferencing)
            object.__setattr__(self, "_referenced", found)  # a cache, not state
        return found

    @classmethod
    def of(cls, resources: Iterable[Resource]) -> TypeSnapshot:
        return cls._versioned({r.name: r for r in sorted(resources, key=_name)})

    def replaced(self, changed: Mapping[str, Resource]) -> TypeSnapshot:
        """This snapshot with each of `changed` in place of the resource of its name (one
        it holds): itself when none differs; the names' order kept, no sort."""
        held = self.resources
        names = frozenset(n for n, resource in changed.items() if held[n] is not resource)
        if not names:
            return self
        by_name = dict(held)
        by_name.update(changed)
        if any(len(changed[name].digest) != len(held[name].digest) for name in names):
            made = TypeSnapshot._versioned(by_name)
        else:
            listing = self._listed().with_digests({name: changed[name].digest for name in names})
            made = TypeSnapshot(resources=by_name, version=listing.version())
            object.__setattr__(made, "_listing", listing)  # made here, before use
        object.__setattr__(made, "derived", (self.version, names))  # likewise
        # The same names: the set streams compare their subscriptions with, shared.
        object.__setattr__(made, "_names", self._names)
        return made

    def patched(self, changed: Mapping[str, Resource], removed: Collection[str]) -> TypeSnapshot:
        """This snapshot with each of `changed` put in (in place of the resource of its name,
        or as a new one) and the names `removed` taken out: `TypeSnapshot.of` what it then
        holds, without sorting every name again (new names are merged into the sorted ones)."""
        held = self.resources
        gone = [name for name in removed if name in held and name not in changed]
        added = [name for name in changed if name not in held]
        if not gone and not added:
            return self.replaced(changed)
        by_name = dict(held)
        for name in gone:
            del by_name[name]
        by_name.update(changed)
        if added:  # a long sorted run and a short one: merged in one pass
            by_name = dict(sorted(by_name.items(), key=_first))
        made = TypeSnapshot._versioned(by_name)
        # Removed names too: a delta stream's diff and digest map are made from these alone.
        names = frozenset(n for n, resource in changed.items() if held.get(n) is not resource)
        object.__setattr__(made, "derived", (self.version, names | frozenset(gone)))  # before use
        return made

    def _listed(self) -> _Listing:
        found = self._listing
        if found is None:
            found = _Listing.of(self.resources)
            object.__setattr__(self, "_listing", found)  # a cache, not state
        return found

    @classmethod
    def _versioned(cls, by_name: dict[str, Resource]) -> TypeSnapshot:
        """Of resources sorted by name."""
        # One update of "name\0digest\n" lines: the same bytes as hashing them one by one.
        listed = "".join([f"{name}\0{r.digest}\n" for name, r in by_name.items()])
        return cls(resources=by_name, version=_version_of(listed.encode()))


def _version_of(listing: bytes) -> str:
    return hashlib.sha256(listing).hexdigest()[:16]


def version_line(resource: Resource) -> bytes:
    """What one resource adds to its TypeSnapshot's version: the bytes `_versioned` hashes
    for it (which joins them in one step, for speed)."""
    return f"{resource.name}\0{resource.digest}\n".encode()


def version_of_lines(lines: Iterable[bytes]) -> str:
    """The version of a TypeSnapshot whose resources' `version_line`s, in name order, these
    are."""
    return _version_of(b"".join(lines))


@dataclass(frozen=True, slots=True)
class _Listing:
    """The bytes a TypeSnapshot's version hashes, and the offset of each name's digest in
    them: a snapshot with some digests replaced (the same names, each digest as long) is
    hashed after copying these bytes and writing those digests, without a step per name."""

    listing: bytes
    offsets: Mapping[str, int]

    @classmethod
    def of(cls, by_name: Mapping[str, Resource]) -> _Listing:
        lines, offsets, at = [], {}, 0
        for name, resource in by_name.items():
            line = version_line(resource)
            offsets[name] = at + len(line) - len(resource.digest) - 1  # (digests are ASCII)
            lines.append(line)
            at += len(line)
        return cls(b"".join(lines), offsets)

    def with_digests(self, digests: Mapping[str, str]) -> _Listing:
        """These bytes with the digests of these names replaced, each by one as long."""
        made = bytearray(self.listing)
        for name, digest in digests.items():
            start = self.offsets[name]
            made[start : start + len(digest)] = digest.encode()
        return _Listing(bytes(made), self.offsets)

    def version(self) -> str:
        return _version_of(self.listing)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one node group is served: a TypeSnapshot per type URL."""

    types: Mapping[str, TypeSnapshot] = field(default_factory=dict)

    def of_type(self, type_url: str) -> TypeSnapshot:
        return self.types.get(type_url, EMPTY_TYPE)


def _name(resource: Resource) -> str:
    return resource.name


_first = itemgetter(0)


EMPTY_TYPE = TypeSnapshot.of(())
