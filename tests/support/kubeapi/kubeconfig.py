"""Pointing the official `kubernetes` client at a test server."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:
    import kubernetes.client

CONTEXT_NAME = "kubeapi-test"


def client_configuration(url: str, token: str | None) -> kubernetes.client.Configuration:
    """A client configuration for plain HTTP on loopback, never through a proxy."""
    from kubernetes import client  # the client is a test dependency, loaded when used

    configuration = client.Configuration()
    configuration.host = url
    configuration.proxy = None  # environment proxies must not see loopback traffic
    if token is not None:
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    return configuration


def write_kubeconfig(path: Path, url: str, token: str | None, namespace: str = "default") -> Path:
    """Writes a kubeconfig (one cluster, user and context) that `load_kube_config` accepts."""
    user: dict[str, str] = {"token": token} if token is not None else {}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT_NAME, "user": user}],
        "contexts": [
            {
                "name": CONTEXT_NAME,
                "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
