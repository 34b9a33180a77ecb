"""deploy/components/provisioning (and provisioned-certificates beside it): the overlay they
make renders valid objects, turns on `serve --provision` (and the certificates dragoman
issues), and grants what provisioning asks the API server for, no more (create aside: a
server-side apply that creates an object needs it beside patch)."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client as k8s

from dragoman.cli import _parser
from dragoman.kubernetes.gateway_certificates import load_signer
from dragoman.kubernetes.informer import WatchSettings
from dragoman.kubernetes.parameters_watch import ParametersWatch
from dragoman.kubernetes.provisioner import ObjectClient, provision_all
from dragoman.kubernetes.provisioning_loop import ProvisioningLoop
from dragoman.objects import Gateway, GatewayListener, ObjectMeta
from dragoman.provisioning.parameters import NO_SETTINGS
from dragoman.provisioning.plan import plan_gateway
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.security.certgen import new_authority
from tests.support.kubeapi import KubeApiServer
from tests.support.kustomize import kustomize

ROOT = Path(__file__).resolve().parents[2]


def render(overlay: Path, *components: str) -> tuple[dict[str, Any], ...]:
    up = os.path.relpath(ROOT, overlay)  # kustomize takes relative paths only
    listed = ", ".join(f"{up}/deploy/components/{name}" for name in components)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{up}/deploy]\ncomponents: [{listed}]\n"
    )
    return kustomize(overlay)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], ...]:
    return render(tmp_path_factory.mktemp("overlay"), "provisioning")


@pytest.fixture(scope="module")
def issuing(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], ...]:
    overlay = tmp_path_factory.mktemp("issuing")
    return render(overlay, "provisioning", "provisioned-certificates")


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


def used_verbs(api: KubeApiServer, ca_secret: str = "") -> dict[str, set[str]]:
    """What one provisioning life asks for: create, update, prune, parameters (listed, then
    watched); with `ca_secret`, the certificates issued too."""
    client = k8s.ApiClient(api.client_configuration())
    settings = ProvisionSettings(ca_secret=ca_secret)
    loop = ProvisioningLoop(client, settings)
    gateway = Gateway(
        meta=ObjectMeta("gw", "default", uid="u1"), listeners=(GatewayListener("h", 80),)
    )
    plan = plan_gateway(gateway, gateway.listeners, NO_SETTINGS, settings)
    objects = ObjectClient(client)
    signer = load_signer(objects, ca_secret, settings.renew_before) if ca_secret else None
    api.reset_counts()
    provision_all(objects, [plan], {gateway.key: "u1"}, signer)
    provision_all(objects, [plan], {gateway.key: "u1"}, signer)
    provision_all(objects, [], {}, signer)
    loop.parameters()
    watch_parameters(client)
    verbs: dict[str, set[str]] = {}
    for verb, resource in api.request_counts():
        verbs.setdefault(resource, set()).add(verb)
    return verbs


def watch_parameters(client: Any) -> None:
    """The parameters informer's first list, and its watch open."""

    async def watched() -> None:
        watch = ParametersWatch(client, WatchSettings(), asyncio.get_running_loop(), print)
        watch.start()
        deadline = time.monotonic() + 10
        while not watch.synced and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
        await asyncio.to_thread(watch.stop)
        assert watch.synced

    asyncio.run(watched())


def granted_by(rendered: tuple[dict[str, Any], ...], name: str) -> dict[str, set[str]]:
    role = find(rendered, "ClusterRole", name)
    return {
        resource: set(rule["verbs"]) for rule in role["rules"] for resource in rule["resources"]
    }


def test_the_role_grants_what_provisioning_uses(
    rendered: tuple[dict[str, Any], ...], api: KubeApiServer
) -> None:
    granted = granted_by(rendered, "dragoman-provisioning")
    used = used_verbs(api)
    assert set(used) == set(granted)
    for resource, verbs in used.items():
        assert verbs <= granted[resource], resource
        assert granted[resource] - verbs <= {"create"}, resource


def test_issued_certificates_are_turned_on_and_granted_what_they_use(
    issuing: tuple[dict[str, Any], ...], api: KubeApiServer
) -> None:
    [container] = find(issuing, "Deployment", "dragoman")["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(container["args"])
    assert args.provision is True
    assert args.provision_ca_secret == ("dragoman-system", "dragoman-xds-ca")
    # The Secret certgen keeps the CA in (deploy/01-certgen.yaml) is the one named.
    certgen = find(issuing, "Job", "dragoman-certgen")["spec"]["template"]["spec"]
    assert "--namespace=dragoman-system" in certgen["containers"][0]["args"]
    for doc in issuing:
        if doc["metadata"]["name"] == "dragoman-provisioned-certificates":
            kubernetes_validate.validate(doc, kubernetes_validate.utils.latest_version(), True)
    ca = new_authority().pair
    data = {"tls.crt": ca.certificate, "tls.key": ca.private_key}
    api.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "dragoman-xds-ca", "namespace": "dragoman-system"},
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }
    )
    used = used_verbs(api, "dragoman-system/dragoman-xds-ca")
    secrets = granted_by(issuing, "dragoman-provisioned-certificates")
    assert set(secrets) == {"secrets"}
    assert used["secrets"] <= secrets["secrets"]
    assert secrets["secrets"] - used["secrets"] <= {"create"}
    # Everything else, the provisioning role's.
    others = granted_by(issuing, "dragoman-provisioning")
    assert set(used) - {"secrets"} == set(others)
