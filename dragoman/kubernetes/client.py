"""A kubernetes client ApiClient from a kubeconfig file or the pod's service account.

In a pod the client's own in-cluster loader builds the API URL from
KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT; it brackets IPv6 addresses
(`https://[fd00::1]:443`) and takes DNS names as they are, and it re-reads the projected
service-account token as the kubelet rotates it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Every watched collection holds one connection open; leave room for Lease and status calls.
CONNECTION_POOL_SIZE = 32


class ClientConfigError(Exception):
    """No usable cluster configuration was found."""


def in_cluster_configuration(
    environ: Mapping[str, str] = os.environ,
    token_file: Path = SERVICE_ACCOUNT_DIR / "token",
    ca_file: Path = SERVICE_ACCOUNT_DIR / "ca.crt",
) -> Any:
    """A client Configuration for the pod's service account."""
    from kubernetes import client
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    configuration = client.Configuration()
    try:
        # The client's configuration loaders carry no type hints (one ignore: the call
        # and the method it returns).
        InClusterConfigLoader(  # type: ignore[no-untyped-call]
            token_filename=str(token_file), cert_filename=str(ca_file), environ=environ
        ).load_and_set(configuration)
    except ConfigException as error:
        raise ClientConfigError(f"in-cluster configuration: {error}") from None
    return configuration


def kubeconfig_configuration(path: Path | None, context: str | None = None) -> Any:
    """A client Configuration from a kubeconfig file (None: $KUBECONFIG or ~/.kube/config)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]  # no type hints
            config_file=str(path) if path is not None else None,
            context=context,
            client_configuration=configuration,
        )
    except (ConfigException, OSError) as error:
        where = str(path) if path is not None else "the default kubeconfig"
        raise ClientConfigError(f"{where}: {error}") from None
    return configuration


def api_client(
    kubeconfig: Path | None = None,
    context: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Any:
    """The ApiClient dragoman uses: from `kubeconfig` when given, else in-cluster when
    running in a pod, else from the default kubeconfig."""
    from kubernetes import client

    if kubeconfig is None and context is None and environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = in_cluster_configuration(environ)
    else:
        configuration = kubeconfig_configuration(kubeconfig, context)
    # dragoman retries every call itself, with backoff; urllib3's own immediate retries
    # would only add noise to the logs while the API server is away.
    configuration.retries = 0
    configuration.connection_pool_maxsize = max(
        configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE
    )
    return client.ApiClient(configuration)
