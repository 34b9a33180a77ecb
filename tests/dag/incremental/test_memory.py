"""What the incremental build and translation keep between changes stays compact, and the
shortcuts that keep it so give what the full structures gave: one key (not a one-key set)
where one route is indexed, served items made again equal to those placed, route tables'
virtual hosts read back from their serialized bytes."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from dragoman.dag.build import build
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import Dag
from dragoman.dag.node_groups.group_index import NodeGroupIndex
from dragoman.envoy.resources.route_messages import virtual_host
from dragoman.envoy.translation.translator import Translation, translate
from dragoman.objects import ObjectKey
from dragoman.snapshots.resources import Snapshot
from dragoman.store import Store
from tests.support.builders import (
    external_service,
    gateway,
    gateway_class,
    http_route,
    listener,
    typed,
)

N = 40


def _assert_same(incremental: Dag, full: Dag) -> None:
    assert list(incremental.statuses.items()) == list(full.statuses.items())
    assert incremental == full


def _bodies(snapshots: dict[str, Snapshot]) -> dict[str, dict[str, dict[str, bytes]]]:
    return {
        group: {
            type_url: {name: r.body for name, r in typed.resources.items()}
            for type_url, typed in snapshot.types.items()
        }
        for group, snapshot in snapshots.items()
    }


def _store(shared: int = 0, numbers: Iterable[int] = range(N)) -> Store:
    """ExternalName Services (N unless `numbers` says which), each with its own HTTPRoute and
    hostname; the first `shared` routes also forward to svc0 (then svc0 and its cluster have
    several routes)."""
    documents = [gateway_class(), gateway(listeners=[listener("http", 8080)])]
    for i in numbers:
        documents.append(external_service(f"svc{i}", f"svc{i}.example.test", 80))
        to = [("/", f"svc{i}", 80), *([("/zero", "svc0", 80)] if i < shared else [])]
        documents.append(http_route(f"r{i}", to, hostnames=[f"h{i}.test"]))
    return Store.from_objects(typed(*documents))


def _shared_domains(builder: IncrementalBuild) -> list[set[object]]:
    """The keys of every domain of every route table that two or more items share."""
    made = builder._build
    assert made is not None
    return [
        set(keys)
        for index in made.groups._indexes.values()
        for table in index._tables.values()
        for _, keys in table._by_domain.shared()
    ]


def test_a_place_one_route_reaches_holds_one_key() -> None:
    builder = IncrementalBuild()
    builder.build(_store())
    made = builder._build
    assert made is not None
    for i in range(N):
        route = ObjectKey("HTTPRoute", "default", f"r{i}")
        assert list(made.routes.readers(("default", f"svc{i}"))) == [route]
        assert list(made.clusters._sources.keys(f"default/svc{i}/80")) == [route]
    assert list(made.clusters._sources.shared()) == []
    assert _shared_domains(builder) == []


def test_keys_are_shared_and_then_not() -> None:
    builder = IncrementalBuild()
    builder.build(_store(shared=3))
    made = builder._build
    assert made is not None
    svc0 = ("default", "svc0")
    routes = {ObjectKey("HTTPRoute", "default", f"r{i}") for i in range(3)}
    assert set(made.routes.readers(svc0)) == routes
    assert set(made.clusters._sources.keys("default/svc0/80")) == routes
    # Routes 1 and 2 stop forwarding to svc0: route 0 alone reads it again.
    store = _store()
    result = builder.build(store)
    assert result.kind == "incremental"
    _assert_same(result.dag, build(store))
    r0 = ObjectKey("HTTPRoute", "default", "r0")
    assert list(made.routes.readers(svc0)) == [r0]
    assert list(made.clusters._sources.keys("default/svc0/80")) == [r0]
    assert list(made.clusters._sources.shared()) == []


def test_wildcard_domains_shared_by_many_routes_hold_a_set() -> None:
    documents = [gateway_class(), gateway(listeners=[listener("http", 8080)])]
    for i in range(3):
        documents.append(external_service(f"svc{i}", f"svc{i}.example.test", 80))
        documents.append(http_route(f"r{i}", [(f"/{i}", f"svc{i}", 80)], hostnames=["*.test"]))
    builder = IncrementalBuild()
    builder.build(Store.from_objects(typed(*documents)))
    assert [len(keys) for keys in _shared_domains(builder)] == [3]
    # One route leaves the domain, then another: the last one is held as a key again.
    for left in (1, 2):
        documents = [d for d in documents if d["metadata"]["name"] != f"r{left}"]
        store = Store.from_objects(typed(*documents))
        result = builder.build(store)
        _assert_same(result.dag, build(store))
    assert _shared_domains(builder) == []


def test_served_items_are_made_again_equal() -> None:
    builder = IncrementalBuild()
    builder.build(_store(shared=3))
    made = builder._build
    assert made is not None
    for entry in made.routes.entries.values():
        first = dict(entry.served())
        assert first  # every route here is attached
        assert first == dict(entry.served())


def test_an_index_finds_removed_items_where_it_placed_them() -> None:
    builder = IncrementalBuild()
    builder.build(_store(shared=3))
    state = builder._build
    assert state is not None
    verdicts = list(state.judged.with_children(next(iter(state.judged.gateways.values()))))
    index = NodeGroupIndex("default/gw", verdicts)
    empty = NodeGroupIndex("default/gw", verdicts).group()
    items = {k: v for entry in state.routes.entries.values() for k, v in entry.served()}
    index.update({}, items)
    assert index.group().route_tables != empty.route_tables
    # Removed as the builder removes them: each item made again from its entry.
    again = {k: v for entry in state.routes.entries.values() for k, v in entry.served()}
    index.update(again, {})
    assert index.group().route_tables == empty.route_tables
    assert index.group().clusters == ()


@pytest.mark.parametrize(
    "then",
    [
        _store(),  # hosts changed in place
        _store(numbers=[n for n in range(N + 3) if n not in (0, 5, 6, 22)]),  # came and went
        _store(numbers=range(1, N, 2)),  # every other one gone
        _store(numbers=[]),
    ],
)
def test_route_table_offsets_point_at_each_virtual_host(then: Store) -> None:
    translation = Translation()
    builder = IncrementalBuild()
    translation.translate(builder.build(_store(shared=3)).dag)
    dag = builder.build(then).dag
    spliced = translation.translate(dag)  # from the previous bytes
    assert _bodies(spliced) == _bodies(translate(dag))
    tables = translation._tables
    assert tables
    for table in tables.values():
        body, offsets = table.resource.body[table.start :], table.offsets
        hosts = table.value.virtual_hosts
        assert len(offsets) == len(hosts) + 1
        for i, host in enumerate(hosts):
            message = virtual_host(host).SerializeToString(deterministic=True)
            entry = b"\x12" + _VarintBytes(len(message)) + message
            assert body[offsets[i] : offsets[i + 1]] == entry


def test_domains_and_cluster_hostnames_are_the_objects_own_strings() -> None:
    store = _store()
    dag = build(store)
    hosts = {
        host.name: host for table in dag.groups[""].route_tables for host in table.virtual_hosts
    }
    for (namespace, name), route in store.http_routes.items():
        (hostname,) = route.hostnames
        assert hosts[hostname].domains[0] is hostname, (namespace, name)
    for (namespace, name), service in store.services.items():
        cluster = dag.clusters[f"{namespace}/{name}/80"]
        assert cluster.hostname is service.external_name  # type: ignore[union-attr]
    # An external name that is not lower-case is served lower-cased all the same.
    upper = Store.from_objects(
        typed(
            gateway_class(),
            gateway(listeners=[listener("http", 8080)]),
            external_service("svc", "Svc.Example.TEST.", 80),
            http_route("r", "svc", 80, hostnames=["h.example.test"]),
        )
    )
    cluster = build(upper).clusters["default/svc/80"]
    assert cluster.hostname == "svc.example.test"  # type: ignore[union-attr]
