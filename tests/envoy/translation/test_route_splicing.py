"""A route table spliced from the one before it: the bytes protobuf writes for the whole
table, whichever hosts changed, came or went (at the start, the end or between), and the
offsets it keeps right for the splice after it."""

from __future__ import annotations

import random

import pytest

from dragoman.dag.model import RouteTable, VirtualHost
from dragoman.envoy.resources.route_messages import route_configuration
from dragoman.envoy.translation import route_splicing
from dragoman.envoy.translation.route_splicing import SplicedTable, spliced_table

HOSTS = 40


def host(name: str, version: int = 0) -> VirtualHost:
    return VirtualHost(name, (f"{name}.example.com", f"v{version}.{name}.example.com"), ())


def whole(table: RouteTable) -> bytes:
    return route_configuration(table).SerializeToString(deterministic=True)


def changed(hosts: list[VirtualHost], rng: random.Random, step: int) -> list[VirtualHost]:
    """One change of the kinds a build makes, somewhere in the table."""
    hosts = list(hosts)
    where = rng.choice([0, len(hosts) - 1, rng.randrange(len(hosts))]) if hosts else 0
    kind = rng.choice(["edit", "edit", "add", "remove", "equal copy", "none", "edit two"])
    if kind == "edit" and hosts:
        hosts[where] = host(hosts[where].name, step)
    elif kind == "edit two" and len(hosts) > 1:
        other = rng.randrange(len(hosts))
        hosts[where], hosts[other] = host(hosts[where].name, step), host(hosts[other].name, step)
    elif kind == "add":
        hosts.insert(min(where + rng.randint(0, 1), len(hosts)), host(f"new{step}"))
    elif kind == "remove" and hosts:
        del hosts[where]
    elif kind == "equal copy" and hosts:  # equal, not the same object: its bytes kept
        old = hosts[where]
        hosts[where] = VirtualHost(old.name, old.domains, old.routes)
    return hosts


@pytest.mark.parametrize("seed", range(6))
def test_each_splice_writes_the_whole_tables_bytes(seed: int) -> None:
    rng = random.Random(seed)
    hosts = [host(f"h{i:03}") for i in range(HOSTS)]
    known: SplicedTable | None = None
    for step in range(1, 120):
        table = RouteTable("http-8080", tuple(hosts))
        known = spliced_table(table, known)
        assert known.resource.body == whole(table), step
        assert len(known.offsets) == len(hosts) + 1
        hosts = changed(hosts, rng, step)


def test_a_change_among_many_hosts_serializes_that_one_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hosts = [host(f"h{i:04}") for i in range(2000)]
    known = spliced_table(RouteTable("t", tuple(hosts)), None)
    made: list[str] = []
    serialize = route_splicing.virtual_host

    def counted(value: VirtualHost) -> object:
        made.append(value.name)
        return serialize(value)

    monkeypatch.setattr(route_splicing, "virtual_host", counted)
    for index in (0, 1234, 1999):
        hosts[index] = host(hosts[index].name, 1)
        table = RouteTable("t", tuple(hosts))
        known = spliced_table(table, known)
        assert known.resource.body == whole(table)
    assert made == ["h0000", "h1234", "h1999"]
    # None changed: nothing serialized, the same bytes.
    again = spliced_table(RouteTable("t", tuple(hosts)), known)
    assert again.resource.body == known.resource.body and len(made) == 3
