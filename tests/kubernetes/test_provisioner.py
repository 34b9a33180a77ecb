"""Provisioning against the fake API server: a Gateway's objects created, updated as its
listeners change (the Service's cluster IP kept), deleted once the Gateway is gone; a name
another object holds and a permission dragoman lacks reported on the Gateway's condition,
changing nothing; status.addresses from the Service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from dragoman.dag.build import build
from dragoman.kubernetes.provisioner import ObjectClient, provision, provision_all
from dragoman.kubernetes.provisioning_loop import ProvisioningLoop
from dragoman.objects import Gateway, GatewayListener, ObjectMeta
from dragoman.provisioning.parameters import NO_SETTINGS, EnvoyProxySettings
from dragoman.provisioning.plan import PROVISIONED, PROVISIONED_KINDS, GatewayPlan, plan_gateway
from dragoman.provisioning.resolve import claim_parameters
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from tests.support.builders import gateway, gateway_class
from tests.support.kubeapi import KubeApiServer

UID = "0b5e-edge"
HTTP = GatewayListener("http", 80)
DNS = GatewayListener("dns", 53, "UDP")


@pytest.fixture
def server() -> Iterator[KubeApiServer]:
    with KubeApiServer() as api:
        yield api


@pytest.fixture
def objects(server: KubeApiServer) -> ObjectClient:
    return ObjectClient(k8s.ApiClient(server.client_configuration()))


def plan(
    *listeners: GatewayListener, settings: EnvoyProxySettings = NO_SETTINGS, uid: str = UID
) -> GatewayPlan:
    gateway = Gateway(
        meta=ObjectMeta("edge", "default", generation=2, uid=uid),
        gateway_class_name="dragoman",
        listeners=listeners,
    )
    return plan_gateway(gateway, listeners, settings)


def made(server: KubeApiServer) -> dict[str, dict[str, Any] | None]:
    return {kind: server.get(kind, "dragoman-edge") for _, kind in PROVISIONED_KINDS}


def ports(server: KubeApiServer) -> set[tuple[int, str]]:
    service = server.get("Service", "dragoman-edge")
    assert service is not None
    return {(p["port"], p["protocol"]) for p in service["spec"]["ports"]}


def test_a_gateways_objects_are_created_owned_by_it(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    outcome = provision(objects, plan(HTTP, DNS), UID)
    assert outcome.condition["type"] == PROVISIONED
    assert outcome.condition["status"] == "True", outcome.condition
    for kind, obj in made(server).items():
        assert obj is not None, kind
        assert obj["metadata"]["ownerReferences"][0]["uid"] == UID
    assert ports(server) == {(80, "TCP"), (53, "UDP")}


def test_listener_changes_update_the_service_keeping_its_cluster_ip(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    provision(objects, plan(HTTP), UID)
    first = server.get("Service", "dragoman-edge")
    assert first is not None
    outcome = provision(objects, plan(HTTP, DNS, GatewayListener("db", 5432, "TCP")), UID)
    assert outcome.condition["status"] == "True"
    assert ports(server) == {(80, "TCP"), (53, "UDP"), (5432, "TCP")}
    provision(objects, plan(DNS), UID)
    assert ports(server) == {(53, "UDP")}
    after = server.get("Service", "dragoman-edge")
    assert after is not None
    assert after["spec"]["clusterIP"] == first["spec"]["clusterIP"]


def test_parameters_changes_reach_the_deployment(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    provision(objects, plan(HTTP), UID)
    provision(objects, plan(HTTP, settings=EnvoyProxySettings(replicas=5)), UID)
    deployment = server.get("Deployment", "dragoman-edge")
    assert deployment is not None and deployment["spec"]["replicas"] == 5


def test_status_addresses_come_from_the_service(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    cluster_ip = EnvoyProxySettings(service_type="ClusterIP")
    outcome = provision(objects, plan(HTTP, settings=cluster_ip), UID)
    service = server.get("Service", "dragoman-edge")
    assert service is not None
    assert outcome.addresses == ({"type": "IPAddress", "value": service["spec"]["clusterIP"]},)
    # A LoadBalancer's address once the cloud gave it one; none before.
    assert provision(objects, plan(HTTP), UID).addresses == ()
    balanced = server.get("Service", "dragoman-edge")
    assert balanced is not None
    balanced["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}
    server.apply(balanced)
    assert provision(objects, plan(HTTP), UID).addresses == (
        {"type": "IPAddress", "value": "203.0.113.7"},
    )


def test_a_name_held_by_another_object_is_reported_and_nothing_is_made(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    theirs = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"mine": "yes"}}
    server.apply({**theirs, "metadata": {"name": "dragoman-edge", "namespace": "default"}})
    outcome = provision(objects, plan(HTTP), UID)
    assert (outcome.condition["status"], outcome.condition["reason"]) == ("False", "NameConflict")
    assert "ConfigMap default/dragoman-edge" in outcome.condition["message"]
    assert outcome.condition["observedGeneration"] == 2
    kept = server.get("ConfigMap", "dragoman-edge")
    assert kept is not None and kept["data"] == {"mine": "yes"}
    assert all(obj is None for kind, obj in made(server).items() if kind != "ConfigMap")


def test_a_missing_permission_is_reported_on_the_gateway(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    server.fail_next(
        "PATCH",
        "/deployments/",
        403,
        message='deployments.apps "dragoman-edge" is forbidden: User cannot patch',
    )
    outcome = provision(objects, plan(HTTP), UID)
    assert (outcome.condition["status"], outcome.condition["reason"]) == ("False", "Forbidden")
    assert "forbidden" in outcome.condition["message"]
    assert server.get("Deployment", "dragoman-edge") is None


def test_a_refusal_part_way_deletes_again_what_that_attempt_created(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    # The ServiceAccount, ConfigMap, Deployment and PodDisruptionBudget are made; the
    # Service, last, is refused.
    server.fail_next("PATCH", "/services/", 403, message="services is forbidden: User cannot patch")
    outcome = provision(objects, plan(HTTP), UID)
    condition = outcome.condition
    assert (condition["status"], condition["reason"]) == ("False", "Forbidden")
    message = condition["message"]
    assert message.startswith("Service default/dragoman-edge refused: HTTP 403 services is")
    assert (
        "created before it and deleted again: PodDisruptionBudget default/dragoman-edge, "
        "Deployment default/dragoman-edge, ConfigMap default/dragoman-edge, "
        "ServiceAccount default/dragoman-edge"
    ) in message
    assert outcome.rolled_back
    # No pods without their Service, nothing half made left behind.
    assert all(obj is None for obj in made(server).values())
    assert server.request_count("delete", "deployments") == 1
    # The next attempt, allowed, makes them all.
    assert provision(objects, plan(HTTP), UID).condition["status"] == "True"
    assert all(obj is not None for obj in made(server).values())


def test_a_refusal_part_way_keeps_the_objects_that_were_there_before(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    provision(objects, plan(HTTP), UID)
    before = made(server)
    server.fail_next("PATCH", "/services/", 403)
    outcome = provision(objects, plan(HTTP, DNS), UID)
    message = outcome.condition["message"]
    assert outcome.condition["reason"] == "Forbidden"
    assert (
        "updated before it and kept: ServiceAccount default/dragoman-edge, "
        "ConfigMap default/dragoman-edge, Deployment default/dragoman-edge, "
        "PodDisruptionBudget default/dragoman-edge"
    ) in message
    assert "deleted again" not in message and not outcome.rolled_back
    after = made(server)
    assert all(obj is not None for obj in after.values())
    assert after["Service"] == before["Service"]  # the refused one, as it was
    assert ports(server) == {(80, "TCP")}


def test_a_refusal_at_the_first_object_changes_nothing_and_says_so(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    server.fail_next("PATCH", "/serviceaccounts/", 403)
    outcome = provision(objects, plan(HTTP), UID)
    assert outcome.condition["message"].endswith("; nothing was changed")
    assert all(obj is None for obj in made(server).values())


def test_what_cannot_be_deleted_again_is_named(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    server.fail_next("PATCH", "/services/", 403)
    server.fail_next("DELETE", "/deployments/", 403)
    outcome = provision(objects, plan(HTTP), UID)
    message = outcome.condition["message"]
    assert "created before it and not deleted: Deployment default/dragoman-edge (HTTP 403" in (
        message
    )
    assert "deleted again: PodDisruptionBudget default/dragoman-edge, ConfigMap" in message
    assert server.get("Deployment", "dragoman-edge") is not None
    assert server.get("PodDisruptionBudget", "dragoman-edge") is None


def test_a_plan_with_problems_changes_nothing(server: KubeApiServer, objects: ObjectClient) -> None:
    provision(objects, plan(HTTP), UID)
    before = made(server)
    bad = plan(HTTP, GatewayListener("stats", 8002))
    outcome = provision_all(objects, [bad], {bad.gateway: UID})
    assert outcome[0].condition["reason"] == "PortUnavailable"
    assert made(server) == before


def test_the_objects_of_a_gateway_gone_are_deleted(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    edge = plan(HTTP)
    provision_all(objects, [edge], {edge.gateway: UID})
    assert all(obj is not None for obj in made(server).values())
    # Someone else's ConfigMap, and objects of a Gateway re-created under the same name.
    server.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}
    )
    provision_all(objects, [], {})
    assert all(obj is None for obj in made(server).values())
    assert server.get("ConfigMap", "x") is not None


def test_a_new_gateway_of_the_same_name_replaces_the_old_ones_objects(
    server: KubeApiServer, objects: ObjectClient
) -> None:
    old = plan(HTTP, uid="old-uid")
    provision_all(objects, [old], {old.gateway: "old-uid"})
    new = plan(DNS, uid="new-uid")
    # Until the garbage collector removes them, the old Gateway's objects hold the name.
    [outcome] = provision_all(objects, [new], {new.gateway: "new-uid"})
    assert outcome.condition["reason"] == "NameConflict"
    # Pruned in that same pass (not the new Gateway's): the next pass makes the new ones.
    [outcome] = provision_all(objects, [new], {new.gateway: "new-uid"})
    assert outcome.condition["status"] == "True"
    assert ports(server) == {(53, "UDP")}


def test_after_a_build_only_changed_gateways_are_applied_again(server: KubeApiServer) -> None:
    def world(port: int) -> Store:
        document = gateway(port=port)
        document["metadata"]["uid"] = UID
        parsed = [parse_object(gateway_class()), parse_object(document)]
        return Store.from_objects([obj for obj in parsed if obj is not None])

    loop = ProvisioningLoop(k8s.ApiClient(server.client_configuration()), ProvisionSettings())

    def patches(store: Store, resync: bool) -> int:
        before = server.request_count("patch", "deployments")
        outcomes = loop.provision(store, build(claim_parameters(store)), resync)
        assert [o.condition["status"] for o in outcomes.values()] == ["True"]
        return server.request_count("patch", "deployments") - before

    assert patches(world(8080), resync=False) == 1
    assert patches(world(8080), resync=False) == 0  # a build that changed nothing of it
    assert patches(world(8080), resync=True) == 1  # a resync applies everything
    assert patches(world(9090), resync=False) == 1  # its listener changed
    server.delete("Deployment", "dragoman-gw")
    assert patches(world(9090), resync=True) == 1
    assert server.get("Deployment", "dragoman-gw") is not None  # put back


def test_a_gateway_rolled_back_is_tried_again_at_the_resync_not_after_every_build(
    server: KubeApiServer,
) -> None:
    document = gateway(port=8080)
    document["metadata"]["uid"] = UID
    parsed = [parse_object(gateway_class()), parse_object(document)]
    store = Store.from_objects([obj for obj in parsed if obj is not None])
    dag = build(claim_parameters(store))
    loop = ProvisioningLoop(k8s.ApiClient(server.client_configuration()), ProvisionSettings())
    server.fail_next("PATCH", "/services/", 403, times=2)
    [outcome] = loop.provision(store, dag, resync=False).values()
    assert outcome.rolled_back and outcome.condition["reason"] == "Forbidden"
    # A build that changed nothing of it: no Deployment made and deleted again.
    before = server.request_count("patch", "deployments")
    [kept] = loop.provision(store, dag, resync=False).values()
    assert kept == outcome and server.request_count("patch", "deployments") == before
    # The resync tries again (refused again here), then succeeds.
    [again] = loop.provision(store, dag, resync=True).values()
    assert again.rolled_back and server.request_count("patch", "deployments") == before + 1
    [done] = loop.provision(store, dag, resync=True).values()
    assert done.condition["status"] == "True"
    assert server.get("Service", "dragoman-gw") is not None


def test_other_failures_are_tried_again_after_the_next_build(server: KubeApiServer) -> None:
    document = gateway(port=8080)
    document["metadata"]["uid"] = UID
    parsed = [parse_object(gateway_class()), parse_object(document)]
    store = Store.from_objects([obj for obj in parsed if obj is not None])
    dag = build(claim_parameters(store))
    loop = ProvisioningLoop(k8s.ApiClient(server.client_configuration()), ProvisionSettings())
    server.fail_next("PATCH", "/serviceaccounts/", 403)  # the first: nothing was made
    [outcome] = loop.provision(store, dag, resync=False).values()
    assert outcome.condition["reason"] == "Forbidden" and not outcome.rolled_back
    [done] = loop.provision(store, dag, resync=False).values()
    assert done.condition["status"] == "True"
