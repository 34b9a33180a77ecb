"""Listener and route hostnames: the names a route serves on a listener are their
intersection, as the Gateway API defines it (a wildcard matches one or more labels)."""

from __future__ import annotations

import pytest

from dragoman.dag.frontends.hostnames import intersect

INTERSECTIONS = [
    (None, (), ("*",)),
    ("foo.example.com", (), ("foo.example.com",)),
    (None, ("b.example.com", "a.example.com"), ("a.example.com", "b.example.com")),
    ("foo.example.com", ("foo.example.com",), ("foo.example.com",)),
    ("foo.example.com", ("*.example.com",), ("foo.example.com",)),
    (
        "*.example.com",
        ("foo.example.com", "a.b.example.com"),
        ("a.b.example.com", "foo.example.com"),
    ),
    ("*.example.com", ("example.com", "foo.example.net"), ()),
    ("*.example.com", ("*.example.com",), ("*.example.com",)),
    ("*.example.com", ("*.foo.example.com",), ("*.foo.example.com",)),
    ("*.foo.example.com", ("*.example.com",), ("*.foo.example.com",)),
    ("foo.example.com", ("bar.example.com",), ()),
    ("Foo.Example.com", ("FOO.example.COM",), ("foo.example.com",)),
]


@pytest.mark.parametrize(("listener_hostname", "route_hostnames", "expected"), INTERSECTIONS)
def test_hostname_intersection(
    listener_hostname: str | None, route_hostnames: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert intersect(listener_hostname, route_hostnames) == expected
