"""Helpers for tests that run dragoman's Kubernetes mode against the in-process API server:
object builders and a replica (KubernetesServer) run as an asyncio task."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from dragoman.kubernetes.informer import WatchSettings
from dragoman.kubernetes.leader import LeaseSettings
from dragoman.kubernetes.runtime import KubernetesConfig, KubernetesServer
from tests.support.harness import free_port
from tests.support.kubeapi import KubeApiServer

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
FAST_WATCH = WatchSettings(backoff_initial=0.05, backoff_maximum=0.5, not_served_retry=1.0)


def replica_config(
    identity: str | None = "replica-a", xds_address: str = "127.0.0.1:0", **changes: Any
) -> KubernetesConfig:
    lease = None
    if identity is not None:
        lease = LeaseSettings(
            identity=identity, lease_duration=2.0, renew_deadline=1.5, retry_period=0.2
        )
    settings: dict[str, Any] = {
        "xds_address": xds_address,
        "ops_address": None,
        "lease": lease,
        "watch": FAST_WATCH,
    }
    settings.update(changes)
    return KubernetesConfig(**settings)


def api_client_for(api: KubeApiServer) -> client.ApiClient:
    configuration = api.client_configuration()
    configuration.retries = 0
    configuration.connection_pool_maxsize = 32
    return client.ApiClient(configuration)


class Replica:
    """One dragoman replica, run as a task on the test's event loop."""

    def __init__(self, api: KubeApiServer, config: KubernetesConfig) -> None:
        self.api_client = api_client_for(api)
        self.server = KubernetesServer(config, self.api_client)
        self.stop_event = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> Replica:
        self.task = asyncio.create_task(self.server.run(self.stop_event))
        return self

    async def stop(self) -> None:
        self.stop_event.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 15)
        self.api_client.close()

    @property
    def dag(self) -> Any:
        assert self.server.controller.dag is not None
        return self.server.controller.dag


async def eventually(
    condition: Callable[[], Any], timeout: float = 10.0, what: str = "condition"
) -> Any:
    """Polls `condition` on the loop until it is truthy; fails the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout} s (last: {value!r})")
        await asyncio.sleep(0.02)


def deployed_envoy_bootstrap(
    xds_port: int,
    ready_port: int,
    admin_socket: Path,
    tls_dir: Path,
    stats_port: int | None = None,
) -> str:
    """deploy/'s Envoy bootstrap, pointed at loopback ports, an admin socket and a directory
    holding the mounted Secret's files (`ca.crt`, `tls.crt`, `tls.key`) of the test's (and
    nothing else changed). The ConfigMap's other keys (the SDS files the bootstrap names in
    its own directory, /etc/envoy) are written beside `tls_dir`, in `envoy-config`."""
    for doc in yaml.safe_load_all((DEPLOY / "04-envoy.yaml").read_text()):
        if doc and doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "envoy-bootstrap":
            data = dict(doc["data"])
            bootstrap = copy.deepcopy(yaml.safe_load(data.pop("bootstrap.yaml")))
            break
    else:
        raise AssertionError("no envoy-bootstrap ConfigMap in deploy/04-envoy.yaml")
    config_dir = tls_dir.parent / "envoy-config"
    config_dir.mkdir(exist_ok=True)
    for name, content in data.items():
        assert "/etc/envoy/tls/" in content, name
        (config_dir / name).write_text(content.replace("/etc/envoy/tls", str(tls_dir)))
    clusters = {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}
    endpoint = clusters["dragoman-xds"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    endpoint = endpoint["endpoint"]
    endpoint["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": xds_port}
    endpoint["hostname"] = "127.0.0.1"
    admin = clusters["dragoman-envoy-admin"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    admin["endpoint"]["address"]["pipe"]["path"] = str(admin_socket)
    listeners = {item["name"]: item for item in bootstrap["static_resources"]["listeners"]}
    ports = {"readiness": ready_port, "dragoman-envoy-stats": stats_port or free_port()}
    assert set(listeners) == set(ports), sorted(listeners)
    for name, port in ports.items():
        listeners[name]["address"]["socket_address"] = {"address": "127.0.0.1", "port_value": port}
    bootstrap["admin"]["address"]["pipe"]["path"] = str(admin_socket)
    text = yaml.safe_dump(bootstrap, sort_keys=False)
    assert "/etc/envoy/tls" not in text, "the Secret's files are named by the SDS files alone"
    assert "/etc/envoy/" in text
    return text.replace("/etc/envoy/", f"{config_dir}/").replace("/etc/envoy\n", f"{config_dir}\n")


def deployed_tls(directory: Path) -> tuple[Path, list[str]]:
    """What deploy/'s certgen Job writes, as files: the Envoy Secret's directory, and the
    flags dragoman serves with (its own Secret's files)."""
    from dragoman.security.files_store import write_files

    made = directory / "certgen"
    write_files(made, server_names=("dragoman.dragoman-system.svc",), days=1)
    envoy = directory / "envoy-tls"
    envoy.mkdir()
    for source, target in (
        ("ca.crt", "ca.crt"),
        ("fleet.crt", "tls.crt"),
        ("fleet.key", "tls.key"),
    ):
        (envoy / target).write_bytes((made / source).read_bytes())
    flags = [
        "--xds-tls-cert", str(made / "server.crt"),
        "--xds-tls-key", str(made / "server.key"),
        "--xds-tls-client-ca", str(made / "ca.crt"),
    ]  # fmt: skip
    return envoy, flags
