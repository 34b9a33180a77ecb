"""Responses as bytes: each is encoded once and written as the very same bytes to every
stream that sends it.

A DiscoveryResponse (or DeltaDiscoveryResponse) sent to a thousand streams after one change
is the same for all of them, nonce included: the nonce is drawn once, when the body is
encoded. A nonce need only be unique within one stream, and a stream's nonces only ever grow
(`ResponseBodies` draws them from one counter): a stream that already sent a nonce as large
(the same body again, say) gets a copy with a nonce of its own. So one change costs no
per-stream copy of a 1.4 MB body, only gRPC's own. Fields are emitted in field-number order,
so the bytes equal protobuf's own deterministic encoding (the nonce sorts last in a
DiscoveryResponse, between the head and the removed names of a DeltaDiscoveryResponse).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass

from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryResponse, DiscoveryResponse

from dragoman.snapshots.resources import Resource
from dragoman.xds.protocol.sized_lru import SizedLru

# Field numbers shared by DiscoveryResponse and DeltaDiscoveryResponse.
_VERSION = 1  # version_info / system_version_info
_RESOURCES = 2
_TYPE_URL = 4
_NONCE = 5
_REMOVED = 6  # DeltaDiscoveryResponse.removed_resources
# discovery.v3.Resource, the delta wrapper of each resource.
_WRAPPER_VERSION = 1
_WRAPPER_RESOURCE = 2
_WRAPPER_NAME = 3
# google.protobuf.Any
_ANY_TYPE_URL = 1
_ANY_VALUE = 2

# Bytes of bodies kept for reuse: every type of several node groups and their variants
# (a full-state CDS body is about 150 bytes per cluster).
BODY_CACHE_BYTES = 64 * 1024 * 1024


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited field; empty values are omitted, as proto3 does."""
    if not value:
        return b""
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode())


def _element(number: int, value: str) -> bytes:
    """One element of a repeated string field: written even when empty."""
    return _message(number, value.encode())


def _message(number: int, value: bytes) -> bytes:
    """A message field (or an element of a repeated one): written even when empty, as a
    message that is set is."""
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _any(resource: Resource) -> bytes:
    return _text(_ANY_TYPE_URL, resource.type_url) + _field(_ANY_VALUE, resource.body)


def _sotw_body(version: str, type_url: str, resources: Iterable[Resource]) -> bytes:
    """A DiscoveryResponse without its nonce (the field that sorts last), byte for byte as
    protobuf's deterministic encoding writes it: each resource an Any of its type URL and
    body. What comes before a body depends only on its type URL and length, so it is made
    once per length: joining 10,000 bodies costs a quarter of packing them into Any
    messages and encoding those (in C, with a copy of every body on the way)."""
    parts = [_text(_VERSION, version)]
    append = parts.append
    prefixes: dict[int, bytes] = {}  # of a resource of `type_url`, by body length
    for resource in resources:
        body = resource.body
        if resource.type_url != type_url:  # never in practice: one type per response
            append(_message(_RESOURCES, _any(resource)))
            continue
        prefix = prefixes.get(len(body))
        if prefix is None:
            any_head = _text(_ANY_TYPE_URL, type_url)
            value_head = _varint(_ANY_VALUE << 3 | 2) + _varint(len(body)) if body else b""
            size = len(any_head) + len(value_head) + len(body)
            prefix = _varint(_RESOURCES << 3 | 2) + _varint(size) + any_head + value_head
            prefixes[len(body)] = prefix
        append(prefix)
        append(body)
    append(_text(_TYPE_URL, type_url))
    return b"".join(parts)


@dataclass(frozen=True, slots=True, eq=False)
class SotwResponse:
    """A DiscoveryResponse ready to write, as bytes most often shared with other streams."""

    type_url: str
    version_info: str
    nonce: str
    # The resources carried, in order: often the snapshot's own mapping (no per-stream copy).
    resources: Mapping[str, Resource]
    data: bytes  # the whole response, nonce included

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.resources)

    def to_bytes(self) -> bytes:
        return self.data

    def message(self) -> DiscoveryResponse:
        """The response as a protobuf message (tests, logs): decoded from the bytes sent."""
        return DiscoveryResponse.FromString(self.to_bytes())


@dataclass(frozen=True, slots=True, eq=False)
class DeltaResponse:
    """A DeltaDiscoveryResponse ready to write, as bytes most often shared with other streams."""

    type_url: str
    system_version_info: str
    nonce: str
    names: tuple[str, ...]  # resources carried (added or changed), in order
    removed: tuple[str, ...]
    data: bytes  # the whole response, nonce included

    def to_bytes(self) -> bytes:
        return self.data

    def message(self) -> DeltaDiscoveryResponse:
        return DeltaDiscoveryResponse.FromString(self.to_bytes())


Response = SotwResponse | DeltaResponse


@dataclass(frozen=True, slots=True)
class _Encoded:
    """What every stream sending the same response shares: its bytes with the nonce drawn
    when it was encoded and, for delta, the names it carries and removes (so no stream keeps
    a copy of its own)."""

    data: bytes
    nonce: int
    nonce_at: int  # where the nonce's field starts in `data`
    nonce_end: int  # and where it ends
    names: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @classmethod
    def around(
        cls,
        head: bytes,
        nonce: int,
        tail: bytes = b"",
        names: tuple[str, ...] = (),
        removed: tuple[str, ...] = (),
    ) -> _Encoded:
        field = _text(_NONCE, str(nonce))
        return cls(
            b"".join((head, field, tail)), nonce, len(head), len(head) + len(field), names, removed
        )

    def renumbered(self, nonce: int) -> bytes:
        """The same response with another nonce: one copy of the bytes around it."""
        data = memoryview(self.data)
        return b"".join((data[: self.nonce_at], _text(_NONCE, str(nonce)), data[self.nonce_end :]))


def _body_bytes(value: _Encoded) -> int:
    return len(value.data)


class ResponseBodies:
    """Encoded bodies, shared by every stream of one SnapshotCache (which owns this), bounded
    by bytes; the bodies of versions no longer served are dropped sooner (`forget_versions`).

    Keys: (kind, type URL, version, ...), the version being the TypeSnapshot's (SotW
    responses that retain removed clusters add "+<digest>" to it).
    """

    def __init__(self, max_bytes: int = BODY_CACHE_BYTES) -> None:
        self.lru: SizedLru[Hashable, _Encoded] = SizedLru(max_bytes, _body_bytes)
        # The last nonce drawn, for any stream: those of bodies, drawn when they are encoded,
        # and those of the copies of streams that sent a body's nonce already.
        self._last_nonce = 0

    def _draw(self, after: int = 0) -> int:
        """A nonce larger than every one drawn before and than `after`."""
        self._last_nonce = max(self._last_nonce, after) + 1
        return self._last_nonce

    def _numbered(self, encoded: _Encoded, after: int) -> tuple[str, bytes]:
        """The nonce and bytes for a stream whose last nonce was `after`: the shared ones,
        unless that stream already sent a nonce as large."""
        if encoded.nonce > after:
            return str(encoded.nonce), encoded.data
        nonce = self._draw(after)
        return str(nonce), encoded.renumbered(nonce)

    def forget_versions(self, versions: Collection[str]) -> int:
        """Drop the bodies made for these TypeSnapshot versions; return how many."""
        if not versions or not len(self.lru):
            return 0
        return self.lru.drop_where(lambda key: _base_version(key) in versions)

    def clear(self) -> int:
        """Drop every body; return how many."""
        return self.lru.drop_where(lambda key: True)

    def sotw_response(
        self,
        type_url: str,
        version: str,
        resources: Mapping[str, Resource],
        after: int,
        *,
        whole_type: bool = False,
    ) -> SotwResponse:
        """A DiscoveryResponse carrying `resources` in order, for a stream whose last nonce
        was `after` (its nonce is larger).

        `whole_type`: `resources` is every resource of the type snapshot whose version is
        `version`, so the version alone identifies the body (no per-call key of all names).
        """
        key = ("sotw", type_url, version, None if whole_type else tuple(resources))
        cached = self.lru.get(key)
        if cached is None:
            body = _sotw_body(version, type_url, resources.values())
            cached = _Encoded.around(body, self._draw())
            self.lru.put(key, cached)
        nonce, data = self._numbered(cached, after)
        return SotwResponse(type_url, version, nonce, resources, data)

    def delta_response(
        self,
        type_url: str,
        system_version: str,
        resources: Iterable[Resource],
        removed: Iterable[str],
        after: int,
        *,
        whole_type: bool = False,
    ) -> DeltaResponse:
        """A DeltaDiscoveryResponse, for a stream whose last nonce was `after` (its nonce is
        larger); each resource's version is its content digest.

        `whole_type`: `resources` is every resource of the type snapshot whose version is
        `system_version`, in its order, and nothing is removed: the version alone identifies
        the body (no per-call key of all names and digests)."""
        carried = tuple(resources)
        gone = tuple(removed)
        if whole_type:
            key: tuple[object, ...] = ("delta", type_url, system_version, None, None, ())
            names: tuple[str, ...] = ()  # known from the body when it is cached
        else:
            # Names and digests as two flat tuples, not a pair per resource: the key of a
            # response of 10,000 resources is two allocations, and the names are kept once.
            names = tuple(r.name for r in carried)
            key = ("delta", type_url, system_version, names, tuple(r.digest for r in carried), gone)
        cached = self.lru.get(key)
        if cached is None:
            if whole_type:
                names = tuple(r.name for r in carried)
            head = (
                _text(_VERSION, system_version)
                + b"".join(_message(_RESOURCES, _delta_wrapper(r)) for r in carried)
                + _text(_TYPE_URL, type_url)
            )
            tail = b"".join(_element(_REMOVED, name) for name in gone)
            cached = _Encoded.around(head, self._draw(), tail, names, gone)
            self.lru.put(key, cached)
        nonce, data = self._numbered(cached, after)
        return DeltaResponse(type_url, system_version, nonce, cached.names, cached.removed, data)


def _base_version(key: Hashable) -> str:
    assert isinstance(key, tuple)
    version: str = key[2]
    return version.split("+", 1)[0]


def _delta_wrapper(resource: Resource) -> bytes:
    return (
        _text(_WRAPPER_VERSION, resource.digest)
        + _message(_WRAPPER_RESOURCE, _any(resource))
        + _text(_WRAPPER_NAME, resource.name)
    )


def serialize(response: Response | DiscoveryResponse | DeltaDiscoveryResponse) -> bytes:
    """The gRPC response serializer: pre-encoded responses as they are, messages encoded."""
    if isinstance(response, SotwResponse | DeltaResponse):
        return response.to_bytes()
    return response.SerializeToString(deterministic=True)
