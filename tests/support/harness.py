"""A dragoman process, a real Envoy, a DNS responder and backends, all on loopback."""

from __future__ import annotations

import ctypes
import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, XdsTransport, bootstrap_yaml


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# A server configuration for tests whose pods listen on loopback addresses.
LAB_CONFIG = "endpoints: {allowedNetworks: [127.0.0.0/8]}\n"


PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2


def _without_reading_through_permissions() -> None:
    """In the child before exec: a root process that `chmod 000` locks out, as anyone else."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


class DragomanProcess:
    """`dragoman serve` as a separate process, so a test can kill and restart it."""

    def __init__(
        self,
        manifests: Path,
        xds_address: str,
        log_path: Path,
        extra_args: Sequence[str] = (),
        *,
        obey_permissions: bool = False,
    ) -> None:
        self.manifests = manifests
        self.xds_address = xds_address
        self.log_path = log_path
        self.extra_args = tuple(extra_args)  # e.g. ("--config", FILE)
        # Without root's power to read through permission bits: `chmod 000` locks it out.
        self.obey_permissions = obey_permissions
        if not any(arg.startswith("--metrics-address") for arg in self.extra_args):
            # Never the fixed default port: tests run side by side. Nor port 0: the kernel
            # may hand the operations server the very port picked for xDS, free until then.
            xds_port = xds_address.rsplit(":", 1)[-1]
            while str(ops_port := free_port()) == xds_port:
                pass
            self.extra_args += ("--metrics-address", f"127.0.0.1:{ops_port}")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, listen_timeout: float = 15.0) -> DragomanProcess:
        args = self.extra_args
        if "--config" not in args:
            # The tests' pods are processes on 127.0.0.x: an explicit exception to the rule
            # that drops loopback endpoint addresses. A test with a --config of its own says so
            # there.
            lab = self.log_path.parent / "dragoman-lab.yaml"
            lab.write_text(LAB_CONFIG)
            args = ("--config", str(lab), *args)
        log = self.log_path.open("ab")
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
                "--listener-address",
                "127.0.0.1",
                "--log-level",
                "debug",
                *args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_without_reading_through_permissions if self.obey_permissions else None,
        )
        log.close()
        host, port = self.xds_address.rsplit(":", 1)
        deadline = time.monotonic() + listen_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("dragoman exited:\n" + self.log())
            with socket.socket() as s:
                if s.connect_ex((host, int(port))) == 0:
                    return self
            time.sleep(0.05)
        self.stop(kill=True)  # no test owns it once start fails: never leave it running
        raise TimeoutError(f"dragoman did not listen within {listen_timeout:g} s:\n" + self.log())

    def stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_envoy(
    workdir: Path,
    xds_address: str,
    dns_port: int,
    node_cluster: str = "default/e2e",
    *,
    xds_tls: XdsClientTls | None = None,
    delta: bool = False,
    xds_transport: XdsTransport = "ads",
) -> EnvoyProcess:
    admin = workdir / "admin.sock"
    bootstrap = bootstrap_yaml(
        xds_address,
        node_id="e2e-envoy",
        node_cluster=node_cluster,
        admin_socket=str(admin),
        dns_resolvers=[f"127.0.0.1:{dns_port}"],
        dns_use_tcp=True,
        xds_tls=xds_tls,
        delta=delta,
        xds_transport=xds_transport,
    )
    envoy = EnvoyProcess(bootstrap, workdir, admin, workdir / "envoy.log")
    envoy.start()
    return envoy


def get_json(url: str, *, host: str | None = None) -> tuple[int, dict[str, Any]]:
    """GET through the proxy: the status and the echo backend's JSON (or the raw body)."""
    status, _, body = http_get(url, host=host)
    try:
        return status, json.loads(body)
    except ValueError:
        return status, {"body": body.decode(errors="replace")}


def backend_of(url: str, *, host: str | None = None) -> str:
    """Which echo backend answered, or `HTTP <status>` when none did."""
    status, data = get_json(url, host=host)
    return str(data.get("backend", f"HTTP {status}"))


def write_manifest(directory: Path, name: str, text: str) -> None:
    """Write then rename, as editors do, so the watcher never reads half a file."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(textwrap.dedent(text))
    tmp.rename(directory / name)


def rejected_updates(envoy: EnvoyProcess) -> dict[str, int]:
    """Envoy's non-zero `*.update_rejected` counters: any is a configuration it refused."""
    return {k: v for k, v in envoy.stats().items() if k.endswith("update_rejected") and v}


def diagnostics(dragoman_log: str, envoy: EnvoyProcess, tail: int = 4000) -> str:
    """What a failing end-to-end test shows: the end of both logs."""
    return f"--- dragoman log ---\n{dragoman_log[-tail:]}\n--- envoy log ---\n{envoy.log_tail()}"
