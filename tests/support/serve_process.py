"""`dragoman serve` as a process of its own (the harness's, optionally without root's power to
read through permission bits), and what it serves, asked over a fresh ADS stream."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER
from tests.support.harness import DragomanProcess, free_port
from tests.support.xds_client import XdsClient


class ServeProcess(DragomanProcess):
    """A `dragoman serve --manifests DIR` process on a free loopback port, and what it
    serves, asked over a fresh ADS stream."""

    def __init__(
        self,
        manifests: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
        *,
        obey_permissions: bool = False,
    ) -> None:
        super().__init__(
            manifests,
            f"127.0.0.1:{free_port()}",
            log_path,
            extra_args,
            obey_permissions=obey_permissions,
        )

    def metric(self, name: str) -> float | None:
        """A sample of the operations server's /metrics (its port as logged), or None."""
        found = re.search(r"operations endpoint on \S+, port (\d+)", self.log())
        assert found, self.log()
        with urllib.request.urlopen(f"http://127.0.0.1:{found[1]}/metrics", timeout=5) as page:
            text = page.read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def clusters(self) -> set[str]:
        """The clusters served now (a fresh ADS stream's first CDS response)."""
        return asyncio.run(_served_clusters(self.xds_address))

    def until(self, check, timeout: float = 10.0) -> set[str]:  # type: ignore[no-untyped-def]
        """Polls the served clusters until `check(clusters)` holds; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            clusters = self.clusters()
            if check(clusters):
                return clusters
            assert time.monotonic() < deadline, f"timed out; served {sorted(clusters)}"
            time.sleep(0.05)


async def _served_clusters(address: str) -> set[str]:
    async with grpc.aio.insecure_channel(address) as channel:
        client = XdsClient(channel, Node(id="probe", cluster="default/edge"))
        try:
            await client.subscribe(CLUSTER)
            received = await client.receive(timeout=5.0)
            return set(received.resources)
        finally:
            client.cancel()
