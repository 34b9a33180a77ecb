"""A change to per-host route tables translates only the hosts it touched, and the result is
what a translation from nothing gives: every scope that changed is served anew, every scope
gone is gone, nothing stale stays, and the unchanged ones keep their Resource objects."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from dragoman.dag.frontends.route_tables import PER_HOST, ROUTE_TABLES
from dragoman.dag.incremental.builder import IncrementalBuild
from dragoman.dag.model import Dag, RouteTable
from dragoman.envoy import translate
from dragoman.envoy.translation.route_scopes import scope_name, scoped_table
from dragoman.envoy.translation.translator import Translation
from dragoman.snapshots.resources import SCOPED_ROUTE, Resource, Snapshot
from tests.support.builders import backend_ref, gateway, http_route, listener, rule, service
from tests.support.status_builds import DRAGOMAN_CLASS, build_text, store_of

HOSTS = [f"{i}-route.example.com" for i in range(12)]


def annotated() -> dict[str, Any]:
    found = gateway(listeners=[listener()])
    found["metadata"]["annotations"] = {ROUTE_TABLES: PER_HOST}
    return found


def route(name: str, host: str, value: str) -> dict[str, Any]:
    header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"add": [{"name": "x-value", "value": value}]},
    }
    return http_route(
        name, rules=[rule(backend_ref("web", 80), filters=[header])], hostnames=[host]
    )


def routes_dag(routes: dict[str, tuple[str, str]]) -> Dag:
    return build_text(
        DRAGOMAN_CLASS, annotated(), service("web"), *(route(n, *v) for n, v in routes.items())
    )


def assert_fresh(made: dict[str, Snapshot], dag: Dag) -> None:
    """`made` serves the scopes a translation from nothing serves: names, bytes, version."""
    whole = translate(dag)
    assert made.keys() == whole.keys()
    for group, snapshot in whole.items():
        mine, fresh = made[group].of_type(SCOPED_ROUTE), snapshot.of_type(SCOPED_ROUTE)
        assert list(mine.resources) == list(fresh.resources), group
        assert [r.body for r in mine.resources.values()] == [
            r.body for r in fresh.resources.values()
        ], group
        assert mine.version == fresh.version, group


def scopes(made: dict[str, Snapshot]) -> dict[str, dict[str, Resource]]:
    return {g: dict(s.of_type(SCOPED_ROUTE).resources) for g, s in made.items()}


def test_random_changes_built_incrementally_serve_what_a_full_translation_serves() -> None:
    rng = random.Random(11)
    builder = IncrementalBuild()
    translation = Translation()
    routes: dict[str, tuple[str, str]] = {f"r{i}": (HOSTS[i], "0") for i in range(6)}
    base: list[Any] = [DRAGOMAN_CLASS, annotated(), service("web")]
    before: dict[str, dict[str, Resource]] = {}
    for step in range(40):
        kind = rng.choice(["add", "change", "remove", "move"])
        name = rng.choice(sorted(routes))
        if kind == "add" or len(routes) < 2:
            routes[f"r{step + 100}"] = (rng.choice(HOSTS), str(step))
        elif kind == "change":
            routes[name] = (routes[name][0], str(step))
        elif kind == "remove":
            del routes[name]
        else:
            routes[name] = (rng.choice(HOSTS), routes[name][1])
        result = builder.build(store_of(*base, *(route(n, *v) for n, v in routes.items())))
        made = translation.translate(result.dag)
        assert_fresh(made, result.dag)
        now = scopes(made)
        for group, held in now.items():
            for scope, resource in held.items():
                earlier = before.get(group, {}).get(scope)
                if earlier is not None and earlier.body == resource.body:
                    assert resource is earlier, (step, scope)  # unchanged: kept as it was
        before = now


def test_an_added_host_is_the_only_scope_the_snapshot_says_differs() -> None:
    translation = Translation()
    routes = {f"r{i}": (HOSTS[i], "0") for i in range(5)}
    builder = IncrementalBuild()
    base: list[Any] = [DRAGOMAN_CLASS, annotated(), service("web")]
    first = translation.translate(
        builder.build(store_of(*base, *(route(n, *v) for n, v in routes.items()))).dag
    )
    routes["new"] = (HOSTS[7], "0")
    result = builder.build(store_of(*base, *(route(n, *v) for n, v in routes.items())))
    assert result.kind == "incremental"
    made = translation.translate(result.dag)
    for group, snapshot in made.items():
        typed, earlier = snapshot.of_type(SCOPED_ROUTE), first[group].of_type(SCOPED_ROUTE)
        assert typed.derived == (earlier.version, frozenset({f"http-80/{HOSTS[7]}"}))
    assert_fresh(made, result.dag)


def test_a_full_build_of_the_same_objects_changes_no_scope() -> None:
    routes = {f"r{i}": (HOSTS[i], "0") for i in range(5)}
    translation = Translation()
    first = translation.translate(routes_dag(routes))
    again = translation.translate(routes_dag(routes))  # new, equal objects
    for group, snapshot in again.items():
        assert snapshot.of_type(SCOPED_ROUTE) is first[group].of_type(SCOPED_ROUTE)


def test_a_table_s_hosts_reordered_replaced_and_dropped_are_each_found() -> None:
    """Unchanged hosts are found by identity in their order; anything between the first and
    the last difference is compared by name, whatever its order."""
    dag = routes_dag({f"r{i}": (HOSTS[i], "0") for i in range(8)})
    [table] = [t for g in dag.groups.values() for t in g.route_tables][:1]
    hosts = table.virtual_hosts
    other = routes_dag({f"r{i}": (HOSTS[i], "1") for i in range(8)})
    changed = next(t for g in other.groups.values() for t in g.route_tables).virtual_hosts
    made: dict[str, Any] = {}
    known = scoped_table(table, None, made)
    cases = [
        (hosts[1], hosts[0], *hosts[2:]),  # two swapped: nothing differs
        (*hosts[:3], changed[3], *hosts[5:]),  # one replaced, one dropped
        (changed[0], *hosts[1:7], changed[7]),  # the first and the last replaced
        hosts[2:5],  # head and tail dropped
        (),
    ]
    for case in cases:
        value = dataclasses.replace(table, virtual_hosts=tuple(case))
        found = scoped_table(value, known, {})
        fresh = scoped_table(value, None, {})
        assert {n: r.body for n, (_, r) in found.scopes.items()} == {
            n: r.body for n, (_, r) in fresh.scopes.items()
        }
        expected: dict[str, Resource | None] = {
            n: r for n, (_, r) in found.scopes.items() if known.scopes.get(n, (0, r))[1] is not r
        }
        expected.update(dict.fromkeys(known.scopes.keys() - found.scopes.keys()))
        assert found.changes == expected
        assert found.base == known.serial
        for host in case:
            if host in hosts:
                name = scope_name(table.name, host.name)
                assert found.scopes[name][1] is known.scopes[name][1]


def test_an_unchanged_table_is_its_last_state() -> None:
    table = next(
        t for g in routes_dag({"r": (HOSTS[0], "0")}).groups.values() for t in g.route_tables
    )
    known = scoped_table(table, None, {})
    assert scoped_table(RouteTable(table.name, table.virtual_hosts), known, {}) is known
