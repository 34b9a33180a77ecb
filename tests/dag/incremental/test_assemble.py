"""assemble makes the Dag of a build's parts and changes none of them: the same parts give
the same Dag; given the previous Dag, mappings that came out equal are the previous objects
(translation skips them at once), and only the load assignments of what changed are made
again."""

from __future__ import annotations

import dataclasses

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.incremental.assemble import DagParts, Previous, assemble
from dragoman.dag.model import NO_SERVICE_TARGETS, Dag, Deferred
from dragoman.dag.options import BuildOptions
from tests.dag.incremental.parts import store

OPTIONS = BuildOptions(dns_check=True)
DNS = {"api.example.net": DnsObservation(("192.0.2.1",))}


def _parts(previous: Previous | None = None) -> tuple[DagParts, Dag]:
    """The parts of a full build of the store (with DNS), and the Dag the build made."""
    builder = IncrementalBuild(OPTIONS)
    dag = builder.build(store(), DNS).dag
    made = builder._build
    assert made is not None
    parts = DagParts(
        store=made.store,
        options=made.options,
        context=made.context,
        dns=made.dns,
        judged=made.judged,
        routes=made.routes,
        served=made.groups.served(made.routes),
        resolved=made.clusters.resolved,
        has_aggregates=made.clusters.has_aggregates,
        changed_clusters=(),
        changed_services=(),
        observed=(),
        replaced=set(),
        eds_clusters_of=made.clusters.eds_clusters,
        slices=made.slices,
        previous=previous,
    )
    return parts, dag


def _without_targets(dag: Dag) -> Dag:
    return dataclasses.replace(dag, deferred_targets=Deferred.of(NO_SERVICE_TARGETS))


def test_the_same_parts_make_the_same_dag_and_stay_as_they_were() -> None:
    parts, dag = _parts()
    entries = dict(parts.routes.entries)
    resolved = dict(parts.resolved)
    first, second = assemble(parts), assemble(parts)
    # (The proxyless Service targets are the build's next step, after assemble.)
    assert (
        first == second == _without_targets(dag) == _without_targets(build(store(), OPTIONS, DNS))
    )
    assert list(first.statuses.items()) == list(dag.statuses.items())
    assert dict(parts.routes.entries) == entries and dict(parts.resolved) == resolved


def test_mappings_that_come_out_equal_are_the_previous_objects() -> None:
    parts, dag = _parts()
    again = assemble(dataclasses.replace(parts, previous=Previous(parts.store, dag, False)))
    assert again == _without_targets(dag)
    assert again.clusters is dag.clusters
    assert again.load_assignments is dag.load_assignments


def test_only_what_the_dns_check_observed_anew_is_made_again() -> None:
    parts, dag = _parts()
    moved = {"api.example.net": DnsObservation(("192.0.2.7",))}
    changed = dataclasses.replace(
        parts, dns=moved, observed={"api.example.net"}, previous=Previous(parts.store, dag, False)
    )
    after = assemble(changed)
    api = "default/api/80/h2c"  # the GRPCRoute's
    [locality] = after.load_assignments[api].localities
    assert [e.address for e in locality.endpoints] == ["192.0.2.7"]
    assert {
        n for n in after.load_assignments if after.load_assignments[n] != dag.load_assignments[n]
    } == {api}
    unchanged = [n for n in dag.load_assignments if n != api]
    assert all(after.load_assignments[n] is dag.load_assignments[n] for n in unchanged)
    assert after.clusters is dag.clusters
