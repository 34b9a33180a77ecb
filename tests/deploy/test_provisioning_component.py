"""deploy/components/provisioning: the overlay it makes renders valid objects, turns on
`serve --provision`, and grants what provisioning asks the API server for, no more (create
aside: a server-side apply that creates an object needs it beside patch)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client as k8s

from dragoman.cli import _parser
from dragoman.kubernetes.provisioner import ObjectClient, provision_all
from dragoman.kubernetes.provisioning_loop import ProvisioningLoop
from dragoman.objects import Gateway, GatewayListener, ObjectMeta
from dragoman.provisioning.parameters import NO_SETTINGS
from dragoman.provisioning.plan import plan_gateway
from dragoman.provisioning.workload import ProvisionSettings
from tests.support.kubeapi import KubeApiServer
from tests.support.kustomize import kustomize

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], ...]:
    overlay = tmp_path_factory.mktemp("overlay")
    up = os.path.relpath(ROOT, overlay)  # kustomize takes relative paths only
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{up}/deploy]\ncomponents: [{up}/deploy/components/provisioning]\n"
    )
    return kustomize(overlay)


def find(rendered: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in rendered if (d["kind"], d["metadata"]["name"]) == (kind, name)]
    return found


def test_the_overlay_is_valid_and_turns_provisioning_on(
    rendered: tuple[dict[str, Any], ...],
) -> None:
    for doc in rendered:
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding", "Deployment"):
            kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), True)
    [container] = find(rendered, "Deployment", "dragoman")["spec"]["template"]["spec"]["containers"]
    assert _parser().parse_args(container["args"]).provision is True
    binding = find(rendered, "ClusterRoleBinding", "dragoman-provisioning")
    assert binding["subjects"][0]["name"] == "dragoman"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


def used_verbs(api: KubeApiServer) -> dict[str, set[str]]:
    """What one provisioning life asks for: create, update, prune, parameters."""
    client = k8s.ApiClient(api.client_configuration())
    loop = ProvisioningLoop(client, ProvisionSettings())
    gateway = Gateway(
        meta=ObjectMeta("gw", "default", uid="u1"), listeners=(GatewayListener("h", 80),)
    )
    plan = plan_gateway(gateway, gateway.listeners, NO_SETTINGS)
    objects = ObjectClient(client)
    provision_all(objects, [plan], {gateway.key: "u1"})
    provision_all(objects, [plan], {gateway.key: "u1"})
    provision_all(objects, [], {})
    loop.parameters()
    verbs: dict[str, set[str]] = {}
    for verb, resource in api.request_counts():
        verbs.setdefault(resource, set()).add(verb)
    return verbs


def test_the_role_grants_what_provisioning_uses(
    rendered: tuple[dict[str, Any], ...], api: KubeApiServer
) -> None:
    role = find(rendered, "ClusterRole", "dragoman-provisioning")
    granted = {
        resource: set(rule["verbs"]) for rule in role["rules"] for resource in rule["resources"]
    }
    used = used_verbs(api)
    assert set(used) == set(granted)
    for resource, verbs in used.items():
        assert verbs <= granted[resource], resource
        assert granted[resource] - verbs <= {"create"}, resource
