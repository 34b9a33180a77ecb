"""`dragoman serve` on a ConfigMap volume: an update of the ConfigMap (the kubelet swapping
the `..data` symbolic link) is built and served, with no rescan needed."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig
from tests.support.builders import external_service, yaml_text
from tests.support.configmap import configmap_volume


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_configmap_update_is_served(tmp_path: Path) -> None:
    configmap_volume(
        tmp_path,
        "2026_01",
        {
            "a.yaml": yaml_text(external_service("a", "a.example.com", 80)),
            "b.yaml": yaml_text(external_service("b", "b.example.com", 80)),
        },
    )

    def ports(server: ManifestServer) -> dict[str, int]:
        store = server.controller.store
        if store is None:
            return {}
        return {name: svc.ports[0].port for (_, name), svc in store.services.items()}

    async def scenario() -> None:
        server = ManifestServer(
            ServeConfig(manifests=tmp_path, xds_address=f"127.0.0.1:{free_port()}")
        )
        stop = asyncio.Event()
        task = asyncio.create_task(server.run(stop))
        try:
            await until(lambda: ports(server) == {"a": 80, "b": 80})
            await asyncio.sleep(0.3)  # the kernel watch is up
            configmap_volume(
                tmp_path,
                "2026_02",
                {
                    "a.yaml": yaml_text(external_service("a", "a.example.com", 81)),
                    "c.yaml": yaml_text(external_service("c", "c.example.com", 80)),
                },
            )
            await until(lambda: ports(server) == {"a": 81, "c": 80}, lambda: ports(server))
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    asyncio.run(scenario())


async def until(check, seen=None, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out: {seen() if seen else ''}"
        await asyncio.sleep(0.02)
