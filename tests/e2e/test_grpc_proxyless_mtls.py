"""Proxyless gRPC over mutual TLS: grpcio's own xDS client with `channel_creds` of type `tls`
(certificate files, gRFC A65) and a `grpc/<name>` certificate reaches its targets through
dragoman; the same client with a Gateway's certificate is refused, and so is one with
insecure channel credentials."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import grpc

from tests.support.grpc_e2e import (
    EXTERNAL_ADDRESS,
    EXTERNAL_HOST,
    PROBE,
    Probe,
    health_server,
    manifests,
    private_hosts,
    readme_bootstrap,
)
from tests.support.harness import DragomanProcess, free_port
from tests.support.mtls import material


def _bootstrap(xds: str, creds: dict[str, object]) -> str:
    return json.dumps(readme_bootstrap(xds, creds))


def _tls_creds(directory: Path, stem: str) -> dict[str, object]:
    return {
        "type": "tls",
        "config": {
            "ca_certificate_file": str(directory / "ca.crt"),
            "certificate_file": str(directory / f"{stem}.crt"),
            "private_key_file": str(directory / f"{stem}.key"),
            "refresh_interval": "1s",
        },
    }


def _answer(probe: Probe, target: str, service: str, within: float) -> dict[str, str]:
    deadline = time.monotonic() + within
    while True:
        answer = probe.check(target, service, timeout=3)
        if answer.get("status") == "SERVING" or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def test_proxyless_grpc_over_mutual_tls(tmp_path: Path) -> None:
    tls = material(tmp_path / "tls", gateways=("default/a",), grpc_clients=("greeter",))
    servers: list[grpc.Server] = []
    probes: list[Probe] = []
    dragoman: DragomanProcess | None = None
    try:
        pod, pod_port = health_server("127.0.0.2", 0, "pod-a")
        outside, port = health_server(EXTERNAL_ADDRESS, 0, "external")
        servers += [pod, outside]
        directory = tmp_path / "manifests"
        directory.mkdir()
        for name, text in manifests(pod_port, port).items():
            (directory / name).write_text(textwrap.dedent(text))
        xds = f"127.0.0.1:{free_port()}"
        files = tls.server_files()
        dragoman = DragomanProcess(
            directory,
            xds,
            tmp_path / "dragoman.log",
            extra_args=[
                "--xds-tls-cert", str(files.certificate),
                "--xds-tls-key", str(files.private_key),
                "--xds-tls-client-ca", str(files.trusted_ca),
            ],
        ).start()  # fmt: skip
        hosts = tmp_path / "hosts"
        hosts.write_text(f"{EXTERNAL_ADDRESS} {EXTERNAL_HOST} {EXTERNAL_HOST}.\n")
        command = private_hosts(hosts, [sys.executable, str(PROBE), "--lifetime", "120"])

        def probe(name: str, creds: dict[str, object]) -> Probe:
            env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP_CONFIG": _bootstrap(xds, creds)}
            started = Probe(command, env, tmp_path / f"probe-{name}.log")
            probes.append(started)
            return started

        web = f"xds:///web.default.svc.cluster.local:{port}"
        outside_target = f"xds:///outside.default.svc.cluster.local:{port}"
        greeter = probe("greeter", _tls_creds(tls.directory, "grpc-greeter"))
        for target, service in ((web, "pod-a"), (outside_target, "external")):
            assert _answer(greeter, target, service, 20) == {"status": "SERVING"}, (
                target,
                dragoman.log()[-3000:],
            )
        # A Gateway's certificate is refused (it may not claim the node's cluster), and a plaintext
        # client never completes a handshake: neither reaches anything.
        for name, creds in (
            ("gateway", _tls_creds(tls.directory, "gateway-default-a")),
            ("plaintext", {"type": "insecure"}),
        ):
            refused = probe(name, creds)
            answer = _answer(refused, web, "pod-a", 3)
            assert "error" in answer, (name, answer)
        log = dragoman.log()
        assert "identity=spiffe://dragoman.dev/grpc/greeter" in log
        assert "refused" in log and "spiffe://dragoman.dev/gateway/default/a" in log
        assert "PRIVATE KEY" not in log
    finally:
        for started in probes:
            started.stop()
        if dragoman is not None:
            dragoman.stop()
        for server in servers:
            server.stop(None)
