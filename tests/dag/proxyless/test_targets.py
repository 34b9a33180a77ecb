"""What proxyless gRPC clients can dial by a Service's name: a stage of the build, its
result carried by the Dag and kept up to date Service by Service."""

from __future__ import annotations

import pytest

from dragoman.dag.build import build
from dragoman.dag.context import BuildContext
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import (
    AggregateCluster,
    DnsCluster,
    EdsCluster,
    ServiceTargets,
)
from dragoman.dag.options import BuildOptions
from dragoman.dag.proxyless import targets
from dragoman.dag.proxyless.targets import service_host
from dragoman.dag.upstreams.clusters import service_cluster
from dragoman.objects import Service
from dragoman.store import Store
from tests.support.proxyless import API, HYBRID, ROUTES, SERVICES, WEB, store_of


def service_targets(store: Store, options: BuildOptions = BuildOptions()) -> ServiceTargets:
    return build(store, options).service_targets


def test_every_tcp_port_of_a_service_that_resolves_is_a_target() -> None:
    targets = service_targets(store_of(SERVICES), BuildOptions())
    by_name = {target.name: target for target in targets.targets}
    assert set(by_name) == {
        WEB,
        API,
        HYBRID,
        "secure.default.svc.cluster.local:443",
    }
    assert by_name[WEB].cluster == targets.clusters["default/web/50051"]
    assert by_name[WEB].host == "web.default.svc.cluster.local"
    assert by_name[WEB].service == ("default", "web")
    external = targets.clusters["default/api/8000"]
    assert isinstance(external, DnsCluster)
    assert (external.hostname, external.port) == ("api.example.com", 8000)


def test_aggregates_bring_their_children_and_eds_clusters_their_endpoints() -> None:
    targets = service_targets(store_of(SERVICES), BuildOptions())
    hybrid = targets.clusters["default/hybrid/50051"]
    assert isinstance(hybrid, AggregateCluster)
    assert {child.name for child in hybrid.children} <= set(targets.clusters)
    assert isinstance(targets.clusters["default/web/50051"], EdsCluster)
    assignment = targets.load_assignments["default/web/50051"]
    assert sum(len(locality.endpoints) for locality in assignment.localities) == 3


def test_the_cluster_domain_names_the_targets() -> None:
    options = BuildOptions(cluster_domain="corp.internal.")
    targets = service_targets(store_of(SERVICES), options)
    assert "web.default.svc.corp.internal:50051" in {t.name for t in targets.targets}
    assert service_host("ns", "svc", "Cluster.Local") == "svc.ns.svc.cluster.local"


def test_an_endpoints_change_makes_only_the_endpoints_again() -> None:
    builder = IncrementalBuild()
    targets = builder.build(store_of(SERVICES)).dag.service_targets
    after = store_of(SERVICES.replace("10.0.0.2", "10.0.0.3"))
    built = builder.build(after)
    assert built.kind == "endpoints"
    refreshed = built.dag.service_targets
    assert refreshed.targets is targets.targets
    assert refreshed.clusters is targets.clusters
    addresses = {
        endpoint.address
        for locality in refreshed.load_assignments["default/web/50051"].localities
        for endpoint in locality.endpoints
    }
    assert addresses == {"10.0.0.1", "10.0.0.3", "10.0.1.1"}
    assert refreshed == service_targets(after)


def test_a_service_change_makes_only_its_targets_again() -> None:
    builder = IncrementalBuild()
    targets = builder.build(store_of(SERVICES)).dag.service_targets
    moved = store_of(SERVICES.replace("api.example.com.", "api2.example.com."))
    built = builder.build(moved)
    assert built.kind == "incremental"
    changed = built.dag.service_targets
    assert changed == service_targets(moved)
    api = changed.clusters["default/api/8000"]
    assert isinstance(api, DnsCluster) and api.hostname == "api2.example.com"
    assert changed.clusters["default/web/50051"] is targets.clusters["default/web/50051"]


def test_a_port_a_route_resolved_is_not_resolved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    resolved: list[tuple[str, int]] = []

    def counted(service: Service, port: int, context: BuildContext) -> object:
        resolved.append((service.meta.name, port))
        return service_cluster(service, port, context)

    monkeypatch.setattr(targets, "service_cluster", counted)
    # api's and web's ports are routes' backends: their resolutions are taken from the routes'.
    dag = build(store_of(SERVICES, ROUTES))
    web = dag.service_targets.clusters["default/web/50051"]  # (made when first asked for)
    assert resolved and ("api", 8000) not in resolved and ("web", 50051) not in resolved
    assert web == dag.clusters["default/web/50051"]
    assert (
        dag.service_targets.load_assignments["default/web/50051"]
        is (dag.load_assignments["default/web/50051"])
    )
    # Without routes, the port is resolved for its target.
    assert build(store_of(SERVICES)).service_targets.targets
    assert ("api", 8000) in resolved


def test_targets_are_made_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment without proxyless clients never makes a target: the builds' changes wait,
    merged, until the targets are asked for."""
    from dragoman.dag.incremental import service_targets as stage

    made: list[str] = []

    def counted(service: Service, *args: object) -> object:
        made.append(service.meta.name)
        return targets.service_port_targets(service, *args)  # type: ignore[arg-type]  # as called

    monkeypatch.setattr(stage, "service_port_targets", counted)
    builder = IncrementalBuild()
    builder.build(store_of(SERVICES))
    moved = store_of(SERVICES.replace("api.example.com.", "api2.example.com."))
    dag = builder.build(moved).dag
    full = build(moved)
    assert made == []
    asked = dag.service_targets
    assert sorted(made) == sorted({s.meta.name for s in moved.services.values()})
    assert asked == full.service_targets
