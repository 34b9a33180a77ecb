"""`dragoman serve` as a process of its own (optionally without root's power to read through
permission bits), and what it serves, asked over a fresh ADS stream."""

from __future__ import annotations

import asyncio
import ctypes
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.snapshots.resources import CLUSTER
from tests.support.harness import LAB_CONFIG, free_port
from tests.support.xds_client import XdsClient

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2


def _without_reading_through_permissions() -> None:
    """In the child before exec: a root process that `chmod 000` locks out, as anyone else."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


class ServeProcess:
    """A `dragoman serve --manifests DIR` process on a free loopback port."""

    def __init__(
        self,
        manifests: Path,
        log_path: Path,
        extra_args: Sequence[str] = (),
        *,
        obey_permissions: bool = False,
    ) -> None:
        self.manifests = manifests
        self.log_path = log_path
        self.extra_args = tuple(extra_args)
        self.obey_permissions = obey_permissions
        self.xds_address = f"127.0.0.1:{free_port()}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, wait_for_port: bool = True) -> ServeProcess:
        config = self.log_path.parent / "dragoman-lab.yaml"
        config.write_text(LAB_CONFIG)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dragoman",
                    "serve",
                    "--manifests",
                    str(self.manifests),
                    "--xds-address",
                    self.xds_address,
                    "--config",
                    str(config),
                    "--metrics-address",
                    "127.0.0.1:0",
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_without_reading_through_permissions if self.obey_permissions else None,
            )
        if wait_for_port:
            self.wait_for_port()
        return self

    def wait_for_port(self, timeout: float = 20.0) -> float:
        """Seconds until the xDS port accepted a connection."""
        assert self.process is not None
        started = time.monotonic()
        host, port = self.xds_address.rsplit(":", 1)
        while time.monotonic() < started + timeout:
            if self.process.poll() is not None:
                raise RuntimeError("dragoman exited:\n" + self.log())
            with socket.socket() as s:
                if s.connect_ex((host, int(port))) == 0:
                    return time.monotonic() - started
            time.sleep(0.05)
        raise TimeoutError(f"dragoman did not listen within {timeout} s:\n" + self.log())

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

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
