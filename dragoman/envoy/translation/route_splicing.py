"""A RouteConfiguration's bytes made from its virtual hosts' bytes.

A route table with one changed virtual host serializes that host alone: the
RouteConfiguration's bytes are its other fields with the virtual hosts' bytes spliced in, as
protobuf's deterministic serialization (fields in number order, a repeated message field as
one length-delimited entry per element) writes them.
"""

from __future__ import annotations

import itertools
import operator
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from envoy.config.route.v3 import route_pb2

# protobuf's varint writer, which its stubs leave out (internal, but stable for years).
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from dragoman.dag.model import RouteTable, VirtualHost
from dragoman.envoy.resources.route_messages import route_configuration, virtual_host
from dragoman.snapshots.resources import Resource

# RouteConfiguration.virtual_hosts: field 2, length-delimited.
_VIRTUAL_HOSTS_TAG = bytes([(2 << 3) | 2])
_ROUTE_CONFIGURATION = "type.googleapis.com/" + route_pb2.RouteConfiguration.DESCRIPTOR.full_name


@dataclass(slots=True)
class SplicedTable:
    """A route table's Resource, and where each virtual host's entry lies in its body."""

    value: RouteTable
    resource: Resource
    # Where the entry (tag, length, message) of each of value.virtual_hosts starts in the
    # resource's body, from `start` (the first one's), and where the last one ends: the
    # entries are read from the body, not kept a second time.
    start: int
    offsets: array[int]


def spliced_table(value: RouteTable, known: SplicedTable | None) -> SplicedTable:
    """`value`'s table, each virtual host unchanged since `known` keeping its bytes:
    consecutive ones are taken from the known table's body as one piece, their offsets
    shifted at once."""
    old: tuple[VirtualHost, ...] = known.value.virtual_hosts if known is not None else ()
    offsets = known.offsets if known is not None else array("Q", [0])
    body = memoryview(known.resource.body) if known is not None else memoryview(b"")
    first = known.start if known is not None else 0
    by_name: dict[str, int] | None = None  # made when hosts came, went or moved
    pieces: list[bytes | memoryview] = []
    placed = array("Q")  # where each entry starts, from the first one's start
    position = 0
    run = -1  # the first old host of the run being reused (-1: none)
    after = 0  # the old host after the last one matched: the next one's likely match

    def reuse_run() -> None:
        nonlocal position
        if run >= 0:
            begin, end = offsets[run], offsets[after]
            pieces.append(body[first + begin : first + end])
            placed.extend(map((position - begin).__add__, offsets[run:after]))
            position += end - begin

    hosts = value.virtual_hosts
    # The very hosts known, at the start and at the end (compared in C, not one step each):
    # a change of a few hosts among thousands walks those few.
    shortest = min(len(old), len(hosts))
    head = _identical_prefix(old, hosts, shortest)
    tail = _identical_prefix(reversed(old), reversed(hosts), shortest - head)
    if head:
        run, after = 0, head
    for host in hosts[head : len(hosts) - tail]:
        index: int | None = after
        if after >= len(old) or old[after].name != host.name:
            if by_name is None:
                by_name = {h.name: i for i, h in enumerate(old)}
            index = by_name.get(host.name)
        if index is not None and (old[index] is host or old[index] == host):
            if run < 0 or index != after:
                reuse_run()
                run = index
            after = index + 1
            continue
        reuse_run()
        run = -1
        if index is not None:
            after = index + 1
        message = virtual_host(host).SerializeToString(deterministic=True)
        entry = _VIRTUAL_HOSTS_TAG + _VarintBytes(len(message)) + message
        pieces.append(entry)
        placed.append(position)
        position += len(entry)
    if tail:
        if run < 0 or after != len(old) - tail:
            reuse_run()
            run = len(old) - tail
        after = len(old)
    reuse_run()
    placed.append(position)
    resource, start = _spliced(value, pieces)
    return SplicedTable(value, resource, start, placed)


def _identical_prefix(old: Iterable[VirtualHost], new: Iterable[VirtualHost], most: int) -> int:
    """How many hosts the two start with that are the very same objects, up to `most`."""
    pairs = itertools.islice(map(operator.is_not, old, new), most)
    differs = next(itertools.compress(itertools.count(), pairs), None)
    return most if differs is None else differs


def spliced_route_table(value: RouteTable, virtual_hosts: list[bytes]) -> Resource:
    """`value`'s RouteConfiguration, its virtual hosts given already serialized (each with
    its field tag and length), as route_configuration serializes it whole. The table's other
    fields are those route_configuration gives a table without virtual hosts (none depends
    on them)."""
    return _spliced(value, virtual_hosts)[0]


def _spliced(
    value: RouteTable, virtual_hosts: Sequence[bytes | memoryview]
) -> tuple[Resource, int]:
    """spliced_route_table, and where the first virtual host starts in its body."""
    rest = route_configuration(RouteTable(value.name, ())).SerializeToString(deterministic=True)
    name = route_pb2.RouteConfiguration(name=value.name).SerializeToString(deterministic=True)
    if not rest.startswith(name):
        raise AssertionError("RouteConfiguration does not serialize its name first")
    body = b"".join((name, *virtual_hosts, rest[len(name) :]))
    return Resource.of_bytes(value.name, _ROUTE_CONFIGURATION, body), len(name)
