"""deploy/: every manifest validates offline against the Kubernetes schemas (strictly: no
unknown fields), and the pieces agree with each other and with dragoman itself: RBAC
grants exactly the verbs the code uses, the probes point at what serves them."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubernetes import client

from dragoman.cli import _parser
from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.envoy.bootstrap import XdsClientTls, bootstrap_yaml
from dragoman.kubernetes.kinds import WATCHED_KINDS
from dragoman.kubernetes.leader import LeaderElector, LeaseClient, LeaseSettings
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.security.secrets_store import write_secrets
from dragoman.sources.parse import parse_object
from tests.support.kubeapi import KubeApiServer

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# 1.30: the oldest release with ValidatingAdmissionPolicy v1, which the Gateway API v1.6.1
# standard install needs; and the newest release kubernetes-validate bundles.
KUBERNETES_VERSIONS = ("1.30", kubernetes_validate.utils.latest_version())
# What the bootstrap ConfigMap holds (the command is quoted in deploy/04-envoy.yaml).
XDS_SERVICE = "dragoman.dragoman-system.svc.cluster.local:18000"
ADMIN_SOCKET = "/var/run/envoy/admin.sock"
ENVOY_TLS = XdsClientTls(
    trusted_ca="/etc/envoy/tls/ca.crt",
    certificate="/etc/envoy/tls/tls.crt",
    private_key="/etc/envoy/tls/tls.key",
    server_name="dragoman.dragoman-system.svc",
)


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((path.name, doc))
    return found


def find(kind: str, name: str) -> dict[str, Any]:
    for _, doc in documents():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return doc
    raise AssertionError(f"no {kind} {name} in deploy/")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_builtin_object_is_valid_strictly(version: str) -> None:
    checked = 0
    for filename, doc in documents():
        if doc["apiVersion"].startswith(f"{GATEWAY_GROUP}/"):
            continue  # not in the Kubernetes schemas: checked below
        where = f"{filename} {doc['kind']}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{where}: {path}: {error.message}")
        checked += 1
    assert checked >= 10


def test_gateway_api_objects_are_read_by_dragoman_without_problems() -> None:
    gateway_api = [doc for _, doc in documents() if doc["apiVersion"].startswith(GATEWAY_GROUP)]
    assert [doc["kind"] for doc in gateway_api] == ["GatewayClass"]
    [gateway_class] = gateway_api
    parsed = parse_object(gateway_class)
    assert parsed is not None
    assert gateway_class["spec"]["controllerName"] == DEFAULT_CONTROLLER_NAME


def test_the_control_plane_command_line_is_one_dragoman_accepts() -> None:
    deployment = find("Deployment", "dragoman")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(container["args"])
    assert args.kubernetes and args.leader_election
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert args.xds_address.endswith(f":{ports['xds']}")
    assert args.health_address.endswith(f":{ports['health']}")
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert deployment["spec"]["replicas"] == 2
    lease_rules = find("Role", "dragoman-leader-election")["rules"]
    assert [args.leader_election_name] in [r.get("resourceNames") for r in lease_rules]

    service = find("Service", "dragoman")
    assert service["spec"]["ports"][0]["targetPort"] == "xds"
    assert f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc" in XDS_SERVICE


def test_rbac_grants_what_dragoman_reads_and_writes_and_no_more() -> None:
    rules = find("ClusterRole", "dragoman")["rules"]
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    expected: dict[tuple[str, str], set[str]] = {}
    for kind in WATCHED_KINDS:
        verbs = {"list", "watch"}
        if kind.has_status:
            verbs.add("get")  # read right before a status write
            expected[(kind.group, f"{kind.plural}/status")] = {"update"}
        expected[(kind.group, kind.plural)] = verbs
    assert granted == expected


def test_the_lease_role_grants_every_verb_leader_election_uses_and_no_more() -> None:
    """Acquire, renew and release a Lease against the in-process API server and compare
    the verbs it saw with the Role's."""
    rules = find("Role", "dragoman-leader-election")["rules"]
    args = _parser().parse_args(
        find("Deployment", "dragoman")["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    settings = LeaseSettings(
        identity="pod-a",
        name=args.leader_election_name,
        namespace="dragoman-system",
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.1,
    )
    with KubeApiServer() as api:
        api.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dragoman-system"}}
        )
        api_client = client.ApiClient(api.client_configuration())
        try:
            elector = LeaderElector(LeaseClient(api_client), settings)

            async def campaign() -> None:
                stop = asyncio.Event()
                task = asyncio.create_task(elector.run(stop, lambda leading: None))
                while not elector.is_leader:
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.3)  # a few renewals
                stop.set()
                await task  # releases the Lease

            asyncio.run(campaign())
        finally:
            api_client.close()
        # Less the test's own read and update of the fleet Secret.
        own = {("get", "secrets"): 1, ("update", "secrets"): 1}
        used = {
            verb
            for (verb, resource), n in api.request_counts().items()
            if resource == "secrets" and n > own.get((verb, resource), 0)
        }
        assert before[("update", "secrets")] == 1
    assert used == {"list", "create", "update"}
    by_names = {tuple(r.get("resourceNames") or ()): set(r["verbs"]) for r in rules}
    assert by_names == {(): {"list", "create"}, tuple(sorted(names, key=_order)): {"update"}}
    assert all(r["apiGroups"] == [""] and r["resources"] == ["secrets"] for r in rules)
    subjects = find("RoleBinding", "dragoman-certgen")["subjects"]
    job = find("Job", "dragoman-certgen")["spec"]["template"]["spec"]
    assert subjects == [
        {
            "kind": "ServiceAccount",
            "name": job["serviceAccountName"],
            "namespace": "dragoman-system",
        }
    ]


def _order(name: str) -> int:
    return [
        "dragoman-xds-ca",
        "dragoman-xds-server",
        "dragoman-xds-fleet",
        "dragoman-xds-admin",
    ].index(name)
