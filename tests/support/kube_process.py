"""`dragoman serve --kubernetes` against a kubeconfig, as a process of its own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from dragoman.demo.http import http_get, wait_until
from tests.support.harness import LAB_CONFIG


class KubeDragomanProcess:
    """`dragoman serve --kubernetes` against a kubeconfig, as its own process."""

    def __init__(
        self,
        kubeconfig: Path,
        xds_address: str,
        health_port: int,
        log: Path,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.kubeconfig = kubeconfig
        self.extra_args = tuple(extra_args)
        self.xds_address = xds_address
        self.health_port = health_port
        self.log_path = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready_timeout: float = 20.0) -> KubeDragomanProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dragoman",
                    "serve",
                    "--kubernetes",
                    f"--kubeconfig={self.kubeconfig}",
                    f"--xds-address={self.xds_address}",
                    "--listener-address=127.0.0.1",
                    f"--metrics-address=127.0.0.1:{self.health_port}",
                    "--leader-election-namespace=default",
                    "--leader-election-identity=e2e",
                    "--log-level=debug",
                    f"--config={self._lab_config()}",
                    *self.extra_args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        wait_until(lambda: self.probe("/readyz") == 200 or self._exited(), timeout=ready_timeout)
        if self._exited():
            raise RuntimeError("dragoman exited:\n" + self.log())
        return self

    def _lab_config(self) -> Path:
        """The tests' pods listen on loopback: an explicit exception for 127.0.0.0/8."""
        path = self.log_path.parent / "dragoman-lab.yaml"
        path.write_text(LAB_CONFIG)
        return path

    def probe(self, path: str) -> int:
        try:
            status, _, _ = http_get(f"http://127.0.0.1:{self.health_port}{path}")
        except OSError:
            return 0
        return status

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
