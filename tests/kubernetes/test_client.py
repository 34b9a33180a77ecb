"""Client configuration (in-cluster and kubeconfig)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from dragoman.kubernetes.client import (
    ClientConfigError,
    api_client,
    in_cluster_configuration,
)
from dragoman.kubernetes.client_errors import describe_error
from tests.support.builders import service
from tests.support.kubeapi import KubeApiServer


@pytest.fixture
def service_account(tmp_path: Path) -> tuple[Path, Path]:
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("secret-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n")
    return token, ca


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("10.96.0.1", "https://10.96.0.1:443"),
        # KUBERNETES_SERVICE_HOST may be a DNS name (e.g. with a kube-proxy replacement)...
        ("kubernetes.default.svc", "https://kubernetes.default.svc:443"),
        # ...or an IPv6 address, which a URL must bracket.
        ("fd00:10:96::1", "https://[fd00:10:96::1]:443"),
    ],
)
def test_in_cluster_host_names_addresses_and_ipv6(
    service_account: tuple[Path, Path], host: str, url: str
) -> None:
    token, ca = service_account
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    configuration = in_cluster_configuration(environ, token, ca)
    assert configuration.host == url
    assert configuration.ssl_ca_cert == str(ca)
    assert configuration.api_key["BearerToken"] == "bearer secret-token"
    # The projected token is rotated by the kubelet: the client re-reads it.
    assert configuration.refresh_api_key_hook is not None


def test_in_cluster_without_a_token_says_so(tmp_path: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    with pytest.raises(ClientConfigError, match="token"):
        in_cluster_configuration(environ, tmp_path / "missing", tmp_path / "ca.crt")


def test_kubeconfig_client_reaches_the_server(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        # A kubeconfig given explicitly wins over the in-cluster environment.
        environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        made = api_client(kubeconfig, environ=environ)
        try:
            names = [n.metadata.name for n in client.CoreV1Api(made).list_namespace().items]
            assert "default" in names
            assert made.configuration.retries == 0  # dragoman retries itself, with backoff
            assert made.configuration.connection_pool_maxsize >= 32
        finally:
            made.close()


def test_a_missing_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="nowhere"):
        api_client(tmp_path / "nowhere", environ={})


def test_errors_are_described_in_one_line(tmp_path: Path) -> None:
    with KubeApiServer() as api:
        api.fail_next("GET", "/api/v1/services", 403, message="services is forbidden: no RBAC")
        made = api_client(api.write_kubeconfig(tmp_path / "kubeconfig"), environ={})
        try:
            with pytest.raises(client.ApiException) as forbidden:
                client.CoreV1Api(made).list_service_for_all_namespaces()
            assert describe_error(forbidden.value) == "HTTP 403 services is forbidden: no RBAC"
            api.stop()
            with pytest.raises(Exception) as refused:
                client.CoreV1Api(made).list_service_for_all_namespaces()
            described = describe_error(refused.value)
            assert "Connection refused" in described and "/api/v1" not in described
        finally:
            made.close()


LISTING = """
import json, sys
from pathlib import Path
from kubernetes.client.exceptions import ApiException
from dragoman.kubernetes.client import api_client
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME, WatchedKind

client = api_client(Path(sys.argv[1]))
service = KINDS_BY_NAME["Service"]
every = json.loads(service.list_call(client, "v1", None)(limit=10, _preload_content=False).data)
mine = json.loads(service.list_call(client, "v1", "default")(_preload_content=False).data)
routes = KINDS_BY_NAME["HTTPRoute"].list_call(client, "v1", None)(_preload_content=False)
try:  # a namespace is a path parameter: quoted, never another path
    odd = service.list_call(client, "v1", "default/../other")(_preload_content=False)
    escaped = [item["metadata"]["name"] for item in json.loads(odd.data)["items"]]
except ApiException as error:
    escaped = [error.status]
nothing = WatchedKind("Nothing", "example.com", ("v1",), "nothings")
try:
    nothing.list_call(client, "v1", None)(_preload_content=False)
    status = 200
except ApiException as error:
    status = error.status
loaded = sorted(
    name for name in sys.modules
    if name.startswith(("kubernetes.client.api.", "kubernetes.client.models.v1", "cryptography"))
)
print(json.dumps({
    "every": [item["metadata"]["name"] for item in every["items"]],
    "mine": [item["metadata"]["name"] for item in mine["items"]],
    "routes": json.loads(routes.data)["kind"],
    "missing": status,
    "escaped": escaped,
    "loaded": loaded,
}))
"""


def test_kinds_are_listed_by_path_without_loading_generated_api_classes(tmp_path: Path) -> None:
    """Every kind is listed through the client's own request path (its bearer token, which
    this server requires): CoreV1Api's module alone loads hundreds of model classes, about
    20 MiB that a server reading raw JSON never uses; nor is cryptography loaded."""
    with KubeApiServer() as api:
        api.apply(service("web", 80))
        api.apply(service("api", 80, namespace="other"))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        done = subprocess.run(
            [sys.executable, "-c", LISTING, str(kubeconfig)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    found = json.loads(done.stdout)
    assert sorted(found["every"]) == ["api", "web"]
    assert found["mine"] == ["web"]
    assert found["routes"] == "HTTPRouteList"
    assert found["missing"] == 404
    assert found["escaped"] in ([], [404])  # not the Service of namespace `other`
    assert found["loaded"] == []
