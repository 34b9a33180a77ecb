"""Virtual hosts: the routes of every listener on a port merged by domain, one virtual host
per domain, each route listed once."""

from __future__ import annotations

from dragoman.dag.model import ALL_GATEWAYS, HttpListener
from tests.support.builders import (
    backend_ref,
    gateway,
    http_route,
    listener,
    match,
    parent_ref,
    rule,
    service,
)
from tests.support.status_builds import build_text, virtual_hosts

WEB = service("web", 80, 8080)


def test_virtual_hosts_merge_by_domain_across_routes_and_listeners() -> None:
    gw = gateway(
        "gw",
        listeners=[
            listener("wild", 80, hostname="*.example.com"),
            listener("exact", 80, hostname="foo.example.com"),
            listener("any", 80),
        ],
    )
    objects = [
        gw,
        WEB,
        http_route(
            "one",
            rules=[rule(backend_ref("web", 80), matches=[match("/one")])],
            hostnames=("foo.example.com",),
        ),
        http_route(
            "two",
            rules=[rule(backend_ref("web", 80), matches=[match("/two")])],
            hostnames=("*.example.com",),
        ),
        http_route(
            "three",
            rules=[rule(backend_ref("web", 80), matches=[match("/three")])],
            parents=[parent_ref("gw", section="any")],
        ),
    ]
    dag = build_text(*objects)
    by_domain = {
        name: [r.source.name for r in vhost.routes] for name, vhost in virtual_hosts(dag).items()
    }
    assert by_domain == {
        "*": ["three"],
        "*.example.com": ["two"],
        # "one" reaches this domain through three listeners, and is listed once.
        "foo.example.com": ["one", "two"],
    }
    assert list(by_domain) == sorted(by_domain)
    assert all(v.domains == (v.name,) for v in virtual_hosts(dag).values())
    assert dag.groups[ALL_GATEWAYS].listeners == (HttpListener("http-80", 80, "http-80"),)
