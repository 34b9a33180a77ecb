"""The bootstrap dragoman provisions for a Gateway, run by a real Envoy: it connects to
`dragoman serve` over mutual TLS with the Gateway's own identity
(`spiffe://dragoman.dev/gateway/prod/edge`, from the files of the Secret dragoman issued,
as the pod mounts it), serves that Gateway's listener, and its readiness (the probe's
`/ready` on the stats port) passes once it holds that configuration and fails once a drain
starts."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from kubernetes import client as k8s

from dragoman.commands.common import loaded_store
from dragoman.dag.build import build
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.kubernetes.gateway_certificates import load_signer
from dragoman.kubernetes.provisioner import ObjectClient, provision
from dragoman.provisioning.gateways import plan_gateways
from dragoman.provisioning.plan import GatewayPlan
from dragoman.provisioning.resolve import claim_parameters
from dragoman.provisioning.workload import (
    ADMIN_SOCKET,
    BOOTSTRAP_DIRECTORY,
    STATS_PORT,
    TLS_DIRECTORY,
    ProvisionSettings,
)
from dragoman.security.certgen import Authority, client_pair
from dragoman.security.identities import gateway_uri
from tests.support.harness import DragomanProcess, diagnostics, free_port, write_manifest
from tests.support.kubeapi import KubeApiServer
from tests.support.mtls import Material, material

CA_SECRET = "dragoman-system/dragoman-xds-ca"


def manifests(listener_port: int, backend_port: int) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: dragoman}}
spec: {{controllerName: dragoman.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: prod, uid: 0b5e-edge}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, port: {listener_port}, protocol: HTTP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: echo, namespace: prod}}
spec: {{ports: [{{port: 8080, targetPort: {backend_port}}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: echo-1, namespace: prod, labels: {{kubernetes.io/service-name: echo}}}}
addressType: IPv4
ports: [{{port: {backend_port}}}]
endpoints: [{{addresses: [127.0.0.2], conditions: {{ready: true}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: prod}}
spec:
  parentRefs: [{{name: edge}}]
  rules: [{{backendRefs: [{{name: echo, port: 8080}}]}}]
"""


@dataclass
class Pod:
    envoy: EnvoyProcess
    dragoman: DragomanProcess
    listener_port: int
    stats_port: int
    root: Path
    identity: str
    authority: Authority
    config_map: dict[str, str]

    def ready(self) -> int:
        return http_get(f"http://127.0.0.1:{self.stats_port}/ready")[0]

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


def mounted_bootstrap(data: dict[str, str], root: Path, stats_port: int) -> tuple[str, Path]:
    """The ConfigMap's files as the pod sees them, its paths moved under `root` (what the
    volume mounts do in a pod), and the admin socket's path there."""
    etc, tls, run = root / "etc-envoy", root / "etc-envoy-tls", root / "run"
    etc.mkdir()
    run.mkdir()

    def moved(text: str) -> str:
        return (
            text.replace(TLS_DIRECTORY, str(tls))
            .replace(BOOTSTRAP_DIRECTORY, str(etc))
            .replace(ADMIN_SOCKET, str(run / "admin.sock"))
        )

    for name, text in data.items():
        (etc / name).write_text(moved(text))
    bootstrap = moved(data["bootstrap.yaml"]).replace(
        f"port_value: {STATS_PORT}", f"port_value: {stats_port}"
    )
    return bootstrap, run / "admin.sock"


def issued_secret(tls: Material, plan: GatewayPlan, directory: Path) -> None:
    """What `serve --provision --provision-ca-secret` puts in the Gateway's Secret (issued
    against the fake API server, with the CA dragoman trusts), written as its volume
    holds it."""
    ca = tls.authority.pair
    data = {"tls.crt": ca.certificate, "tls.key": ca.private_key, "ca.crt": ca.certificate}
    with KubeApiServer() as api:
        api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}})
        api.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "dragoman-xds-ca", "namespace": "dragoman-system"},
                "type": "kubernetes.io/tls",
                "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
            }
        )
        objects = ObjectClient(k8s.ApiClient(api.client_configuration()))
        signer = load_signer(objects, CA_SECRET, ProvisionSettings().renew_before)
        outcome = provision(objects, plan, "0b5e-edge", signer)
        assert outcome.condition["status"] == "True", outcome.condition
        secret = api.get("Secret", plan.xds_secret, "prod")
    assert secret is not None
    directory.mkdir()
    for name, value in secret["data"].items():
        (directory / name).write_bytes(base64.b64decode(value))


@pytest.fixture(scope="module")
def pod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pod]:
    root = tmp_path_factory.mktemp("provisioned")
    (root / "manifests").mkdir()
    tls = material(root / "tls", gateways=())
    listener_port, stats_port = free_port(), free_port()
    backend = EchoBackend("echo", host="127.0.0.2", port=free_port("127.0.0.2"))
    backend.start()
    write_manifest(root / "manifests", "all.yaml", manifests(listener_port, backend.port))
    xds_address = f"127.0.0.1:{free_port()}"
    store = loaded_store(root / "manifests")
    provision = ProvisionSettings(
        xds_address=xds_address, xds_server_name="localhost", ca_secret=CA_SECRET
    )
    [plan] = plan_gateways(store, build(claim_parameters(store)), {}, provision)
    assert plan.problems == ()
    # The Secret dragoman-edge-xds, issued by dragoman, as the pod's volume holds it.
    issued_secret(tls, plan, root / "etc-envoy-tls")
    [config_map] = [obj for obj in plan.objects if obj["kind"] == "ConfigMap"]
    bootstrap, admin = mounted_bootstrap(config_map["data"], root, stats_port)
    server = tls.server_files()
    dragoman = DragomanProcess(
        root / "manifests",
        xds_address,
        root / "dragoman.log",
        extra_args=[
            "--xds-tls-cert", str(server.certificate),
            "--xds-tls-key", str(server.private_key),
            "--xds-tls-client-ca", str(server.trusted_ca),
        ],
    )  # fmt: skip
    dragoman.start()
    # As the Deployment runs it: the pod's name as the node id.
    envoy = EnvoyProcess(bootstrap, root, admin, extra_args=["--service-node", "edge-pod-1"])
    world = Pod(
        envoy,
        dragoman,
        listener_port,
        stats_port,
        root,
        plan.identity,
        tls.authority,
        config_map["data"],
    )
    try:
        envoy.start()
        try:
            wait_until(lambda: http_get(f"http://127.0.0.1:{listener_port}/")[0] == 200, timeout=60)
        except (TimeoutError, OSError):
            pytest.fail("the provisioned Envoy never served:\n" + world.diagnostics())
        yield world
    finally:
        envoy.stop()
        dragoman.stop()
        backend.stop()


def test_the_provisioned_envoy_serves_its_gateway_over_mutual_tls(pod: Pod) -> None:
    status, _, body = http_get(f"http://127.0.0.1:{pod.listener_port}/")
    assert status == 200 and b"echo" in body
    assert pod.envoy.stat("cluster.dragoman-xds.upstream_cx_active") == 1
    # The certificate it connected with is the Gateway's identity, not the fleet's.
    certificate = x509.load_pem_x509_certificate((pod.root / "etc-envoy-tls/tls.crt").read_bytes())
    uris = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert uris.value.get_values_for_type(x509.UniformResourceIdentifier) == [pod.identity]


def test_another_gateways_certificate_is_refused_with_this_bootstrap(
    pod: Pod, tmp_path: Path
) -> None:
    other = client_pair(pod.authority, "other", gateway_uri("prod/other"))
    secret = tmp_path / "etc-envoy-tls"
    secret.mkdir()
    (secret / "tls.crt").write_bytes(other.certificate)
    (secret / "tls.key").write_bytes(other.private_key)
    shutil.copy(pod.root / "etc-envoy-tls/ca.crt", secret / "ca.crt")
    bootstrap, admin = mounted_bootstrap(pod.config_map, tmp_path, free_port())
    with EnvoyProcess(bootstrap, tmp_path, admin) as envoy:
        wait_until(
            lambda: "identity=spiffe://dragoman.dev/gateway/prod/other" in pod.dragoman.log(),
            timeout=30,
        )
        # The bootstrap's static stats listener alone: no Gateway listener came.
        assert envoy.stat("listener_manager.total_listeners_active", 0) == 1
        assert envoy.stat("listener_manager.listener_added", 0) == 1


def test_readiness_passes_with_configuration_and_fails_once_draining(pod: Pod) -> None:
    assert pod.ready() == 200
    pod.envoy.admin.post("/healthcheck/fail")
    try:
        assert wait_until(lambda: pod.ready() == 503, timeout=5)
    finally:
        pod.envoy.admin.post("/healthcheck/ok")
