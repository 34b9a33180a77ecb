"""A cluster name is the cluster of the last route (in key order) that defines it; a name no
route defines any more is gone. Only names whose routes changed are resolved again, and the
names resolved anew are told once."""

from __future__ import annotations

from dragoman.dag.incremental.cluster_resolution import ClusterResolution
from dragoman.dag.model import DnsCluster, EdsCluster
from dragoman.dag.options import BuildOptions
from tests.dag.incremental.parts import HTTP, OTHER, WEB, entries, many_entries

WEB_80 = "default/web/80"


def test_the_last_route_defining_a_name_resolves_it() -> None:
    made = entries(BuildOptions())
    clusters = ClusterResolution()
    for entry in made.values():
        clusters.add(entry)
    clusters.resolve(made)
    assert clusters.resolved[WEB_80] is made[OTHER].rules.clusters[WEB_80]  # the greatest key
    assert isinstance(clusters.resolved["default/api/80"], DnsCluster)
    assert not clusters.has_aggregates
    assert clusters.take_changed() == set(clusters.resolved)
    assert clusters.take_changed() == set()  # told once
    # The last one goes: the one before it in key order defines the name now.
    clusters.remove(made[OTHER])
    clusters.resolve(made)
    assert clusters.resolved[WEB_80] is made[HTTP].rules.clusters[WEB_80]
    assert clusters.take_changed() == {WEB_80}


def test_a_name_no_route_defines_is_gone() -> None:
    made = entries(BuildOptions())
    clusters = ClusterResolution()
    clusters.add(made[HTTP])
    clusters.resolve(made)
    clusters.take_changed()
    clusters.remove(made[HTTP])
    clusters.resolve(made)
    assert dict(clusters.resolved) == {}
    assert clusters.take_changed() == {WEB_80, "default/api/80"}


def test_the_eds_clusters_of_each_service_are_known() -> None:
    made = entries(BuildOptions())
    clusters = ClusterResolution()
    for entry in made.values():
        clusters.add(entry)
    clusters.resolve(made)
    assert list(clusters.eds_clusters(WEB)) == [WEB_80]
    assert isinstance(clusters.resolved[WEB_80], EdsCluster)
    assert list(clusters.eds_clusters(("default", "api"))) == []  # DNS, not EDS
    for entry in made.values():
        clusters.remove(entry)
    clusters.resolve(made)
    assert list(clusters.eds_clusters(WEB)) == []


def test_unindexed_the_eds_clusters_of_services_are_not_kept() -> None:
    made = entries(BuildOptions())
    clusters = ClusterResolution(indexed=False)
    for entry in made.values():
        clusters.add(entry)
    clusters.resolve(made)
    assert WEB_80 in clusters.resolved
    assert list(clusters.eds_clusters(WEB)) == []


def test_of_many_routes_defining_a_name_the_last_one_resolves_it_as_they_come_and_go() -> None:
    """Past a few routes, the last of those defining a name is remembered: it must follow
    every route added or removed as the routes' own order says."""
    made = many_entries()  # twelve routes, r00..r11, all to web
    keys = sorted(made)
    clusters = ClusterResolution()
    for key in keys[:10]:
        clusters.add(made[key])
    clusters.resolve(made)
    assert clusters.resolved[WEB_80] is made[keys[9]].rules.clusters[WEB_80]
    clusters.add(made[keys[11]])  # a greater key takes over
    clusters.resolve(made)
    assert clusters.resolved[WEB_80] is made[keys[11]].rules.clusters[WEB_80]
    clusters.add(made[keys[10]])  # a lesser one does not
    clusters.resolve(made)
    assert clusters.resolved[WEB_80] is made[keys[11]].rules.clusters[WEB_80]
    for gone in (11, 10, 9):  # the last goes: the one before it
        clusters.remove(made[keys[gone]])
        clusters.resolve(made)
        assert clusters.resolved[WEB_80] is made[keys[gone - 1]].rules.clusters[WEB_80]
    for key in keys[:9]:
        clusters.remove(made[key])
    clusters.resolve(made)
    assert WEB_80 not in clusters.resolved
