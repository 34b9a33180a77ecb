"""The builder takes new DNS check observations as it takes any change: names served before
and after change only their addresses and the DNSResolved conditions of the routes forwarding
to them (an endpoints build that says which names changed); others rebuild those routes. The
Dag is a full build's either way, and stays so through later changes."""

from __future__ import annotations

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation, DnsObservations
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.session_affinity import TIMEOUT_FIELD
from dragoman.objects import EndpointSlice, ObjectKey
from dragoman.store import Store
from tests.support.builders import (
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    http_route,
    listener,
    service,
    typed,
)

OPTIONS = BuildOptions(dns_check=True)
NAME = "api.example.net"


def _store(route_path: str = "/") -> Store:
    return Store.from_objects(
        typed(
            gateway_class(),
            gateway(listeners=[listener("http", 8080)]),
            external_service("api", NAME, 80),
            external_service("other", "other.example.net", 80),
            http_route("r", [(route_path, "api", 80)], hostnames=["a.test"]),
            http_route("s", [("/", "other", 80)], hostnames=["b.test"]),
        )
    )


def _dns(*addresses: str, error: str | None = None) -> DnsObservations:
    return {
        NAME: DnsObservation(addresses, error=error),
        "other.example.net": DnsObservation(("192.0.2.9",)),
    }


def _assert_full(dag: Dag, store: Store, dns: DnsObservations) -> None:
    full = build(store, OPTIONS, dns)
    assert list(dag.statuses.items()) == list(full.statuses.items())
    assert dag == full


def _addresses(dag: Dag, cluster: str = "default/api/80") -> list[str]:
    return [e.address for p in dag.load_assignments[cluster].localities for e in p.endpoints]


def test_new_addresses_of_a_served_name_are_an_endpoints_build() -> None:
    builder = IncrementalBuild(OPTIONS)
    store = _store()
    first = builder.build(store, _dns("192.0.2.1"))
    assert first.kind == "full" and first.dns_changed == frozenset()
    dns = _dns("192.0.2.2", "192.0.2.3")
    result = builder.build(store, dns)
    assert (result.kind, result.dns_changed) == ("endpoints", frozenset({NAME}))
    _assert_full(result.dag, store, dns)
    assert _addresses(result.dag) == ["192.0.2.2", "192.0.2.3"]
    # What no observation reached is the previous Dag's own.
    assert result.dag.clusters is first.dag.clusters
    other = ObjectKey("HTTPRoute", "default", "s")
    assert result.dag.statuses[other] is first.dag.statuses[other]
    route = ObjectKey("HTTPRoute", "default", "r")
    assert result.dag.statuses[route] != first.dag.statuses[route]  # its DNSResolved


def test_a_name_refused_after_it_was_served_rebuilds_its_routes() -> None:
    builder = IncrementalBuild(OPTIONS)
    store = _store()
    builder.build(store, _dns("192.0.2.1"))
    dns = _dns(error="NXDOMAIN")
    result = builder.build(store, dns)
    assert (result.kind, result.dns_changed) == ("incremental", frozenset())
    _assert_full(result.dag, store, dns)
    assert "default/api/80" not in result.dag.clusters


def test_later_changes_see_the_observations_an_endpoints_build_took_in() -> None:
    builder = IncrementalBuild(OPTIONS)
    store = _store()
    builder.build(store, _dns("192.0.2.1"))
    dns = _dns("192.0.2.2")
    assert builder.build(store, dns).kind == "endpoints"
    # A route changes (its entry made again) and another comes: each with what was observed.
    changed = _store(route_path="/v2")
    result = builder.build(changed, dns)
    assert result.kind == "incremental"
    _assert_full(result.dag, changed, dns)
    # The same observations again: nothing to do.
    assert builder.build(changed, dns).kind == "unchanged"


def test_without_the_dns_check_observations_change_nothing_served() -> None:
    builder = IncrementalBuild(BuildOptions())
    store = _store()
    builder.build(store, _dns("192.0.2.1"))
    result = builder.build(store, _dns("192.0.2.2"))
    assert result.dns_changed == frozenset()
    assert result.dag == build(store, BuildOptions(), _dns("192.0.2.2"))


def test_an_endpoints_change_keeps_the_affinity_timeout_problems_among_the_others() -> None:
    """An EndpointSlice alone changing keeps the previous Dag's affinity timeout problems
    (Services' problems, after the routes' in object order)."""
    sticky = service("web", 80)
    sticky["spec"].update(
        sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}}
    )
    objects = [
        gateway_class(),
        gateway(listeners=[listener("http", 8080)]),
        sticky,
        http_route("r", [("/", "web", 80), ("/gone", "gone", 80)]),  # a route's problem too
    ]
    builder = IncrementalBuild(BuildOptions())
    before = Store.from_objects(typed(*objects, endpoint_slice("web", 8080)))
    first = builder.build(before)
    (moved,) = typed(endpoint_slice("web", 8080, "10.0.0.9"))
    store = before.with_object(EndpointSlice, ("default", moved.meta.name), moved)
    again = builder.build(store)
    assert again.kind == "endpoints"
    fields = [(str(p.object), p.field) for p in again.dag.problems]
    assert ("Service/default/web", TIMEOUT_FIELD) in fields
    assert again.dag.problems == first.dag.problems == build(store, BuildOptions()).problems
