"""The objects provisioned for one Gateway: valid Kubernetes objects (strictly: no unknown
field), named and labelled predictably, owned by the Gateway, wired to each other (probe,
drain, bootstrap, Secret), and nothing at all when something is wrong."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from dragoman.envoy.bootstrap.envoy_bootstrap import (
    XdsClientTls,
    bootstrap_yaml,
    xds_tls_secret_files,
)
from dragoman.objects import Gateway, GatewayListener, ObjectKey, ObjectMeta
from dragoman.provisioning.names import object_name
from dragoman.provisioning.parameters import NO_SETTINGS, EnvoyProxySettings
from dragoman.provisioning.plan import (
    PROVISIONED,
    PROVISIONED_KINDS,
    GatewayPlan,
    OwnerRef,
    plan_gateway,
)
from dragoman.provisioning.workload import STATS_PORT, ProvisionSettings
from dragoman.security.identities import gateway_uri, parse_identity

# 1.30: the oldest release deploy/ supports; and the newest kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())
LISTENERS = (
    GatewayListener("http", 80),
    GatewayListener("https", 443, "HTTPS", hostname="a.example.com"),
    GatewayListener("https-b", 443, "HTTPS", hostname="b.example.com"),
    GatewayListener("dns", 53, "UDP"),
    GatewayListener("dns-tcp", 53, "TCP"),
    GatewayListener("db", 5432, "TCP"),
)
GATEWAY = Gateway(
    meta=ObjectMeta("edge", "prod", generation=4, uid="2f1c-uid"),
    gateway_class_name="dragoman",
    listeners=LISTENERS,
    infrastructure_labels={"team": "payments", "app.kubernetes.io/name": "not-this"},
    infrastructure_annotations={"example.com/owner": "payments@example.com"},
)


def objects(plan: GatewayPlan) -> dict[str, dict[str, Any]]:
    by_kind = {obj["kind"]: obj for obj in plan.objects}
    assert len(by_kind) == len(plan.objects)
    return by_kind


def envoy(deployment: dict[str, Any], name: str = "envoy") -> dict[str, Any]:
    [container] = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name
    ]
    return container


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    "settings",
    [
        NO_SETTINGS,
        EnvoyProxySettings(
            replicas=0,
            image="registry.example.com/envoy@sha256:" + "a" * 64,
            concurrency=2,
            resources={"limits": {"cpu": "2", "memory": "1.5Gi"}},
            service_type="ClusterIP",
        ),
    ],
)
def test_every_object_is_valid_for_kubernetes(settings: EnvoyProxySettings, version: str) -> None:
    plan = plan_gateway(GATEWAY, LISTENERS, settings)
    assert plan.problems == ()
    assert [(o["apiVersion"], o["kind"]) for o in plan.objects] == list(PROVISIONED_KINDS)
    for obj in plan.objects:
        kubernetes_validate.validate(obj, version, strict=True)
    # What YAML output prints: no alias (`&id001`) a reviewer must resolve.
    assert "&id" not in yaml.safe_dump_all(plan.objects)


def test_objects_are_named_labelled_and_owned_as_the_gateway_says() -> None:
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS)
    assert plan.name == "dragoman-edge"
    for obj in plan.objects:
        metadata = obj["metadata"]
        assert (metadata["namespace"], metadata["name"]) == ("prod", "dragoman-edge")
        assert metadata["labels"]["team"] == "payments"
        # dragoman's own labels win: the selectors depend on them.
        assert metadata["labels"]["app.kubernetes.io/name"] == "envoy"
        assert metadata["labels"]["gateway.networking.k8s.io/gateway-name"] == "edge"
        assert metadata["annotations"] == {"example.com/owner": "payments@example.com"}
        assert metadata["ownerReferences"] == [
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "name": "edge",
                "uid": "2f1c-uid",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    template = objects(plan)["Deployment"]["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "payments"
    assert template["labels"]["dragoman.dev/envoy"] == "true"
    assert template["annotations"] == {"example.com/owner": "payments@example.com"}


def test_a_gateway_not_yet_applied_has_no_uid_to_be_owned_by() -> None:
    unapplied = Gateway(meta=ObjectMeta("edge", "prod"), listeners=LISTENERS[:1])
    plan = plan_gateway(unapplied, unapplied.listeners, NO_SETTINGS)
    assert all("ownerReferences" not in obj["metadata"] for obj in plan.objects)


@pytest.mark.parametrize("name", ["edge.example.com", "a" * 60, "gw-" + "b" * 200, "x.y"])
def test_every_gateway_name_gives_a_valid_stable_service_name(name: str) -> None:
    made = object_name(name)
    assert made == object_name(name)
    assert len(made) <= 63 and made[0].isalpha() and "." not in made
    assert object_name(name + "x") != made
    gateway = Gateway(meta=ObjectMeta(name, "prod", uid="u"), listeners=LISTENERS[:1])
    for obj in plan_gateway(gateway, gateway.listeners, NO_SETTINGS).objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_service_exposes_each_listener_port_once_per_transport() -> None:
    service = objects(plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS))["Service"]
    assert service["spec"]["ports"] == [
        {"name": "tcp-53", "port": 53, "targetPort": 53, "protocol": "TCP"},
        {"name": "udp-53", "port": 53, "targetPort": 53, "protocol": "UDP"},
        {"name": "tcp-80", "port": 80, "targetPort": 80, "protocol": "TCP"},
        {"name": "tcp-443", "port": 443, "targetPort": 443, "protocol": "TCP"},
        {"name": "tcp-5432", "port": 5432, "targetPort": 5432, "protocol": "TCP"},
    ]
    # The client's address kept by default (session affinity by client IP needs it).
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["externalTrafficPolicy"] == "Local"


def test_only_the_accepted_listeners_given_are_exposed() -> None:
    service = objects(plan_gateway(GATEWAY, LISTENERS[:1], NO_SETTINGS))["Service"]
    assert [p["port"] for p in service["spec"]["ports"]] == [80]


def test_the_parameters_reach_the_objects() -> None:
    settings = EnvoyProxySettings(
        replicas=6,
        image="registry.example.com/envoy:v1.40.0",
        concurrency=3,
        resources={"requests": {"cpu": "1"}},
        service_type="NodePort",
        external_traffic_policy="Cluster",
    )
    made = objects(plan_gateway(GATEWAY, LISTENERS, settings))
    deployment = made["Deployment"]
    assert deployment["spec"]["replicas"] == 6
    container = envoy(deployment)
    assert container["image"] == "registry.example.com/envoy:v1.40.0"
    assert container["args"][-2:] == ["--concurrency", "3"]
    assert container["resources"] == {"requests": {"cpu": "1"}}
    assert made["Service"]["spec"]["type"] == "NodePort"
    assert made["Service"]["spec"]["externalTrafficPolicy"] == "Cluster"
    assert made["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1


def test_a_cluster_ip_service_has_no_external_traffic_policy() -> None:
    settings = EnvoyProxySettings(service_type="ClusterIP")
    service = objects(plan_gateway(GATEWAY, LISTENERS, settings))["Service"]
    assert "externalTrafficPolicy" not in service["spec"]


def test_envoy_connects_with_the_gateways_own_identity_and_bootstrap() -> None:
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS)
    made = objects(plan)
    assert plan.identity == gateway_uri("prod/edge")
    identity = parse_identity(plan.identity)
    assert identity is not None and identity.gateway == "prod/edge"
    tls = XdsClientTls(
        trusted_ca="/etc/envoy/tls/ca.crt",
        certificate="/etc/envoy/tls/tls.crt",
        private_key="/etc/envoy/tls/tls.key",
        server_name="dragoman.dragoman-system.svc",
        sds_directory="/etc/envoy",
    )
    # What `dragoman bootstrap --gateway prod/edge` prints with these paths.
    expected = bootstrap_yaml(
        "dragoman.dragoman-system.svc.cluster.local:18000",
        node_id="envoy",
        node_cluster="prod/edge",
        admin_socket="/var/run/envoy/admin.sock",
        xds_tls=tls,
        stats_address=f"0.0.0.0:{STATS_PORT}",
    )
    assert made["ConfigMap"]["data"] == {"bootstrap.yaml": expected, **xds_tls_secret_files(tls)}
    pod = made["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["xds-tls"]["secret"]["secretName"] == plan.xds_secret == "dragoman-edge-xds"
    assert volumes["bootstrap"]["configMap"]["name"] == made["ConfigMap"]["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in envoy(made["Deployment"])["volumeMounts"]}
    assert mounts["xds-tls"] == "/etc/envoy/tls" and mounts["bootstrap"] == "/etc/envoy"
    assert pod["serviceAccountName"] == made["ServiceAccount"]["metadata"]["name"]


def test_readiness_asks_envoys_ready_through_the_stats_listener() -> None:
    made = objects(plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS))
    container = envoy(made["Deployment"])
    probe = container["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    bootstrap = yaml.safe_load(made["ConfigMap"]["data"]["bootstrap.yaml"])
    [stats] = [
        listener
        for listener in bootstrap["static_resources"]["listeners"]
        if listener["address"]["socket_address"]["port_value"] == ports[probe["port"]]
    ]
    [manager] = stats["filter_chains"][0]["filters"]
    [host] = manager["typed_config"]["route_config"]["virtual_hosts"]
    paths = {r["match"].get("path"): r for r in host["routes"]}
    # Envoy's admin /ready: 200 once it holds its first configuration, 503 once draining.
    assert paths[probe["path"]]["route"]["cluster"] == "dragoman-envoy-admin"
    # The probe's port is no port of the Service.
    assert ports[probe["port"]] not in {p["port"] for p in made["Service"]["spec"]["ports"]}


def test_a_stopping_pod_drains_before_envoy_gets_its_sigterm() -> None:
    provision = ProvisionSettings(drain_timeout_seconds=30, drain_image="dragoman:test")
    deployment = objects(plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS, provision))["Deployment"]
    drain = envoy(deployment, "drain")
    assert drain["image"] == "dragoman:test"
    assert drain["args"][0] == "drain" and "--after-sigterm" in drain["args"]
    assert "--timeout=30s" in drain["args"]
    [done] = [a.removeprefix("--done-file=") for a in drain["args"] if a.startswith("--done-file=")]
    wait = envoy(deployment)["lifecycle"]["preStop"]["exec"]["command"][-1]
    assert f"[ ! -e {done} ]" in wait
    pod = deployment["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > 30
    assert "$i -lt 40" in wait  # gives up before the grace period ends the pod
    shared = {m["mountPath"] for m in drain["volumeMounts"]}
    assert done.rsplit("/", 1)[0] in shared


def test_replicas_spread_over_nodes() -> None:
    deployment = objects(plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS))["Deployment"]
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    [term] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"] == deployment["spec"]["selector"]


def test_a_listener_on_the_pods_own_port_is_refused_and_nothing_is_made() -> None:
    listeners = (GatewayListener("http", 80), GatewayListener("stats", STATS_PORT))
    gateway = Gateway(meta=ObjectMeta("edge", "prod", generation=2), listeners=listeners)
    plan = plan_gateway(gateway, listeners, NO_SETTINGS)
    assert plan.objects == ()
    [problem] = plan.problems
    assert (problem.field, problem.reason) == ("spec.listeners[1].port", "PortUnavailable")
    condition = plan.condition()
    assert condition["type"] == PROVISIONED
    assert (condition["status"], condition["reason"]) == ("False", "PortUnavailable")
    assert condition["observedGeneration"] == 2
    assert "spec.listeners[1].port" in condition["message"]


def test_a_name_held_by_an_object_the_gateway_does_not_own_is_refused() -> None:
    taken = {ObjectKey("Service", "prod", "dragoman-edge"): ()}
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS, existing=taken)
    assert plan.objects == ()
    [problem] = plan.problems
    assert problem.reason == "NameConflict"
    assert "Service prod/dragoman-edge" in problem.message


@pytest.mark.parametrize(
    "owner", [OwnerRef("Gateway", "edge", "2f1c-uid"), OwnerRef("Gateway", "edge")]
)
def test_objects_the_gateway_owns_are_its_own_to_update(owner: OwnerRef) -> None:
    mine = {ObjectKey(kind, "prod", "dragoman-edge"): (owner,) for _, kind in PROVISIONED_KINDS}
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS, existing=mine)
    assert plan.problems == () and len(plan.objects) == len(PROVISIONED_KINDS)


def test_an_earlier_gateway_of_the_same_name_owns_nothing_of_this_one() -> None:
    stale = {
        ObjectKey("Deployment", "prod", "dragoman-edge"): (OwnerRef("Gateway", "edge", "old"),)
    }
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS, existing=stale)
    assert [p.reason for p in plan.problems] == ["NameConflict"]


def test_a_name_no_identity_can_hold_is_refused() -> None:
    # The API allows it (no label of a subdomain is limited there); a URI SAN does not.
    gateway = Gateway(meta=ObjectMeta("gw-" + "b" * 200, "prod"), listeners=LISTENERS[:1])
    plan = plan_gateway(gateway, gateway.listeners, NO_SETTINGS)
    assert plan.objects == ()
    assert [(p.field, p.reason) for p in plan.problems] == [("metadata.name", "InvalidName")]


def test_a_cert_manager_issuer_adds_the_certificate_of_the_gateways_identity() -> None:
    provision = ProvisionSettings(certificate_issuer="ClusterIssuer/dragoman-ca")
    plan = plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS, provision)
    [certificate] = [obj for obj in plan.objects if obj["kind"] == "Certificate"]
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["metadata"]["name"] == plan.xds_secret
    assert certificate["metadata"]["ownerReferences"][0]["uid"] == "2f1c-uid"
    spec = certificate["spec"]
    assert spec["secretName"] == plan.xds_secret
    assert spec["uris"] == [plan.identity]
    assert "client auth" in spec["usages"]
    assert spec["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "ClusterIssuer",
        "name": "dragoman-ca",
    }
    # Without an issuer, no Certificate: the Secret is provided otherwise.
    assert "Certificate" not in objects(plan_gateway(GATEWAY, LISTENERS, NO_SETTINGS))
