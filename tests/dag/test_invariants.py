"""Invariants of every build (tests/support/dag_invariants.py) over whole manifest sets, and
the case that broke one: Gateways sharing a port, whose own Envoys must still get their clusters."""

from __future__ import annotations

import dataclasses

from dragoman.dag.build import build
from dragoman.dag.model import ALL_GATEWAYS
from dragoman.dag.node_groups.groups import SHADOWED_LISTENER
from dragoman.envoy import translate
from dragoman.snapshots.resources import CLUSTER, ENDPOINT, LISTENER
from dragoman.store import Store
from tests.support.certificates import certificate_authority
from tests.support.dag_invariants import invariant_violations
from tests.support.feature_manifests import (
    every_feature_dag,
    every_feature_dag_with_dns_check,
    example_objects,
)
from tests.support.status_builds import build_text, listener

SITE = certificate_authority().issue("b.example.com")

TWO_GATEWAYS_ONE_PORT = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: a, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: b, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}, ports: [{port: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: b}]
  rules: [{backendRefs: [{name: web, port: 8080}]}]
"""


def test_an_envoy_of_one_gateway_gets_its_clusters_when_another_gateway_takes_its_port() -> None:
    dag = build_text(TWO_GATEWAYS_ONE_PORT)

    # Envoys serving every Gateway get a's listener (the first) on port 80: no route there.
    assert dag.groups[ALL_GATEWAYS].clusters == ()
    # Envoys serving b get b's listener and its route's cluster, defined, with endpoints.
    assert dag.groups["default/b"].clusters == ("default/web/8080",)
    assert list(dag.clusters) == ["default/web/8080"]
    assert [e.address for loc in dag.load_assignments["default/web/8080"].localities
            for e in loc.endpoints] == ["10.0.0.1"]  # fmt: skip
    snapshot = translate(dag)["default/b"]
    assert list(snapshot.of_type(CLUSTER).resources) == ["default/web/8080"]
    assert list(snapshot.of_type(ENDPOINT).resources) == ["default/web/8080"]
    assert list(snapshot.of_type(LISTENER).resources) == ["http-80"]


def test_a_listener_left_out_of_the_all_gateways_group_is_reported() -> None:
    dag = build_text(TWO_GATEWAYS_ONE_PORT)

    [problem] = [p for p in dag.problems if p.reason == SHADOWED_LISTENER]
    assert (str(problem.object), problem.field) == ("Gateway/default/b", "spec.listeners[0]")
    assert "listener 'http' of Gateway default/a has no hostname either" in problem.message
    # Still programmed (its own Envoys serve it), and its status says where it is not.
    [programmed] = [
        c for c in listener(dag, "b", "http")["conditions"] if c["type"] == "Programmed"
    ]
    assert programmed["status"] == "True"
    assert (
        "left out of the configuration of Envoys that serve every Gateway"
        in (programmed["message"])
    )
    assert all(
        c["message"] == "served"
        for c in listener(dag, "a", "http")["conditions"]
        if c["type"] == "Programmed"
    )


def test_a_listener_with_another_hostname_shares_the_port_in_the_all_gateways_group() -> None:
    with_hostname = TWO_GATEWAYS_ONE_PORT.replace(
        "listeners: [{name: http, protocol: HTTP, port: 80}]\n---\napiVersion: v1",
        "listeners: [{name: http, protocol: HTTP, port: 80, hostname: b.example.com}]\n"
        "---\napiVersion: v1",
    )
    dag = build_text(with_hostname)

    assert not [p for p in dag.problems if p.reason == SHADOWED_LISTENER]
    assert dag.groups[ALL_GATEWAYS].clusters == ("default/web/8080",)


def test_a_port_taken_by_another_protocol_is_reported_with_the_protocol() -> None:
    https_b = TWO_GATEWAYS_ONE_PORT.replace(
        "listeners: [{name: http, protocol: HTTP, port: 80}]\n---\napiVersion: v1",
        "listeners: [{name: http, protocol: HTTPS, port: 80, "
        "tls: {certificateRefs: [{name: site}]}}]\n---\napiVersion: v1",
    )
    dag = build_text(https_b, "---\n" + SITE.secret_yaml("site"))

    [problem] = [p for p in dag.problems if p.reason == SHADOWED_LISTENER]
    assert "listener 'http' of Gateway default/a uses HTTP there" in problem.message
    assert dag.groups["default/b"].clusters == ("default/web/8080",)
    assert list(dag.clusters) == ["default/web/8080"]


def test_one_gateway_builds_its_group_once_and_defines_its_clusters() -> None:
    only_b = TWO_GATEWAYS_ONE_PORT.split("---\n", 1)[1]
    dag = build_text(only_b)

    assert dag.groups[ALL_GATEWAYS].clusters == dag.groups["default/b"].clusters
    assert dag.groups[ALL_GATEWAYS].route_tables is dag.groups["default/b"].route_tables
    assert list(dag.clusters) == ["default/web/8080"]
    assert not dag.problems


def test_invariants_hold_over_every_feature() -> None:
    for dag in (every_feature_dag(), every_feature_dag_with_dns_check()):
        assert invariant_violations(dag) == []
        # The set exercises the case above: a Gateway left out of a shared port, whose own
        # Envoys need a cluster the all-gateways group does not.
        shadowed = [p.object.name for p in dag.problems if p.reason == SHADOWED_LISTENER]
        assert shadowed == ["second"]
        assert "default/second-only/80" in dag.groups["default/second"].clusters
        assert "default/second-only/80" not in dag.groups[ALL_GATEWAYS].clusters


def test_invariants_hold_over_the_examples() -> None:
    dag = build(Store.from_objects(example_objects()))

    assert invariant_violations(dag) == []
    assert dag.clusters


def test_the_invariant_check_finds_a_group_naming_an_undefined_cluster() -> None:
    dag = build_text(TWO_GATEWAYS_ONE_PORT)
    broken = dataclasses.replace(dag, clusters={}, load_assignments={})

    assert invariant_violations(broken) == [
        "group 'default/b' references cluster 'default/web/8080' that the DAG does not define"
    ]
