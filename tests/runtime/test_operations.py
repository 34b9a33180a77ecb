"""The operations HTTP server of `dragoman serve` (manifest mode): /metrics counts exactly
what happened, /healthz and /readyz answer probes, /debug/dag and /debug/config show what
is served (keys redacted); and the command line around it (address errors, JSON logs)."""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import yaml
from envoy.config.core.v3.base_pb2 import Node
from prometheus_client.parser import text_string_to_metric_families

from dragoman import __version__
from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig
from dragoman.snapshots.resources import CLUSTER, LISTENER
from tests.support.certificates import certificate_authority
from tests.support.harness import free_port
from tests.support.served_world import GATEWAY, SERVICES, endpoints, until
from tests.support.xds_client import XdsClient


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(textwrap.dedent(text))


def get(port: int, path: str, method: str = "GET") -> tuple[int, str, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode()
    finally:
        connection.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, parsed by prometheus_client: (name, labels) -> value."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str):
    return scraped.get((name, tuple(sorted(labels.items()))))


@asynccontextmanager
async def serving(directory: Path) -> AsyncIterator[ManifestServer]:
    config = ServeConfig(
        manifests=directory,
        xds_address=f"127.0.0.1:{free_port()}",
        ops_address="127.0.0.1:0",
    )
    server = ManifestServer(config)
    stop = asyncio.Event()
    await server.start_ops()
    task = asyncio.create_task(server.run(stop))
    try:
        yield server
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def test_scraped_metrics_are_exactly_what_happened(tmp_path: Path) -> None:
    write(tmp_path, "gateway.yaml", GATEWAY)
    write(tmp_path, "services.yaml", SERVICES)
    write(tmp_path, "endpoints.yaml", endpoints("10.0.0.1"))

    async def scenario() -> tuple[str, str]:
        async with serving(tmp_path) as server:
            assert server.ops is not None
            port = server.ops.port
            await until(lambda: server.serving)
            channel = grpc.aio.insecure_channel(server.config.xds_address)
            client = XdsClient(channel, Node(id="envoy-1", cluster="default/edge"))
            try:
                await client.subscribe(CLUSTER)
                await client.receive_acked()
                await client.subscribe(LISTENER)
                listeners = await client.receive()
                await client.nack(listeners, "test: listener refused")
                await until(lambda: server.metrics.nacks.labels("LDS")._value.get() == 1)
                # One EndpointSlice change: the EDS fast path.
                write(tmp_path, "endpoints.yaml", endpoints("10.0.0.1", "10.0.0.2"))
                await server.reload()
                _, content_type, text = await asyncio.to_thread(get, port, "/metrics")
            finally:
                client.cancel()
                await channel.close()
            return content_type, text

    content_type, text = asyncio.run(scenario())
    assert content_type.startswith("text/plain; version=")
    scraped = samples(text)
    assert value(scraped, "dragoman_build_info", version=__version__) == 1
    assert value(scraped, "dragoman_builds_total", kind="full") == 1
    assert value(scraped, "dragoman_builds_total", kind="endpoints") == 1
    assert value(scraped, "dragoman_build_duration_seconds_count", kind="full") == 1
    assert value(scraped, "dragoman_build_duration_seconds_count", kind="endpoints") == 1
    assert value(scraped, "dragoman_objects", kind="Service") == 3
    assert value(scraped, "dragoman_objects", kind="EndpointSlice") == 1
    assert value(scraped, "dragoman_objects", kind="Gateway") == 1
    assert value(scraped, "dragoman_objects", kind="HTTPRoute") == 1
    # The route refers to a refused ExternalName: a problem on the route.
    assert value(scraped, "dragoman_invalid_objects", kind="HTTPRoute") == 1
    assert value(scraped, "dragoman_invalid_objects", kind="Service") is None
    assert value(scraped, "dragoman_xds_clients", client="envoy") == 1
    assert value(scraped, "dragoman_xds_clients", client="grpc") == 0
    assert value(scraped, "dragoman_xds_responses_total", type="CDS") == 1
    assert value(scraped, "dragoman_xds_responses_total", type="LDS") == 1
    assert value(scraped, "dragoman_xds_responses_total", type="EDS") == 0
    assert value(scraped, "dragoman_xds_nacks_total", type="LDS") == 1
    assert value(scraped, "dragoman_xds_nacks_total", type="CDS") == 0
    # The CDS response was ACKed; the NACKed LDS one is no propagation.
    assert value(scraped, "dragoman_xds_ack_latency_seconds_count", type="CDS") == 1
    assert value(scraped, "dragoman_xds_ack_latency_seconds_count", type="LDS") == 0
    assert value(scraped, "dragoman_external_names", state="served") == 1
    assert value(scraped, "dragoman_external_names", state="refused") == 1
    assert value(scraped, "dragoman_external_names", state="dns_failed") == 0
    # Manifest mode: no leader, no status writes, no watches.
    assert not any(name.startswith("dragoman_leader") for name, _ in scraped)
    assert not any(name.startswith("dragoman_status_writes_total") for name, _ in scraped)


def test_labels_are_bounded_whatever_clients_send(tmp_path: Path) -> None:
    """A type URL a client makes up is counted as "other", never as a label of its own."""
    from dragoman.runtime.metrics import type_label

    assert type_label("type.googleapis.com/" + "x" * 500) == "other"
    assert type_label(CLUSTER) == "CDS"


def test_readyz_waits_for_the_first_build_and_health_answers(tmp_path: Path) -> None:
    write(tmp_path, "gateway.yaml", GATEWAY)

    async def scenario() -> list[tuple[int, str]]:
        config = ServeConfig(
            manifests=tmp_path, xds_address=f"127.0.0.1:{free_port()}", ops_address="127.0.0.1:0"
        )
        server = ManifestServer(config)
        await server.start_ops()
        assert server.ops is not None
        port = server.ops.port
        answers = []
        for path in ("/readyz", "/healthz"):
            status, _, body = await asyncio.to_thread(get, port, path)
            answers.append((status, body.strip()))
        stop = asyncio.Event()
        task = asyncio.create_task(server.run(stop))
        await until(lambda: server.serving)
        for path, method in (("/readyz", "GET"), ("/readyz", "HEAD"), ("/nowhere", "GET")):
            status, _, body = await asyncio.to_thread(get, port, path, method)
            answers.append((status, body.strip()))
        stop.set()
        await asyncio.wait_for(task, 10)
        return answers

    assert asyncio.run(scenario()) == [
        (503, "waiting for the first build"),
        (200, "ok"),
        (200, "ok"),
        (200, ""),
        (404, "not found: try /metrics, /healthz, /readyz, /debug, /debug/dag or /debug/config"),
    ]


def test_debug_dot_and_config_show_what_is_served_with_keys_redacted(tmp_path: Path) -> None:
    pem = certificate_authority().issue("shop.example.com")
    key = pem.private_key.decode()
    write(tmp_path, "gateway.yaml", GATEWAY)
    write(tmp_path, "services.yaml", SERVICES)
    write(tmp_path, "endpoints.yaml", endpoints("10.0.0.1"))
    (tmp_path / "secret.yaml").write_text(pem.secret_yaml("shop-tls"))
    write(
        tmp_path,
        "https.yaml",
        """
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {name: secure, namespace: default}
        spec:
          gatewayClassName: dragoman
          listeners:
            - name: https
              protocol: HTTPS
              port: 8443
              tls: {certificateRefs: [{name: shop-tls}]}
        """,
    )

    async def scenario() -> dict[str, tuple[int, str, str]]:
        async with serving(tmp_path) as server:
            await until(lambda: server.serving)
            assert server.ops is not None
            return {
                path: await asyncio.to_thread(get, server.ops.port, path)
                for path in ("/debug/dag", "/debug/config", "/debug", "/debug/config?limit=1")
            }

    pages = asyncio.run(scenario())
    status, content_type, dot = pages["/debug/dag"]
    assert status == 200 and content_type.startswith("text/vnd.graphviz")
    assert dot.startswith("digraph dragoman {")
    assert '"Gateway/default/edge" -> "listener default/edge http-8080"' in dot
    assert '"listener default/edge http-8080" -> "HTTPRoute/default/shop"' in dot
    assert '"HTTPRoute/default/shop" -> "Service/default/web"' in dot
    assert "UnsafeExternalName" in dot
    status, _, config = pages["/debug/config"]
    assert status == 200
    assert "shop-tls" in config or "8443" in config
    assert "PRIVATE KEY" not in config
    assert "[redacted]" in config
    # One resource of each type per group, and how many were left out.
    limited = yaml.safe_load_all(pages["/debug/config?limit=1"][2])
    by_group = {document["group"]: document for document in limited}
    assert len(by_group["default/edge"]["clusters"]) == 1
    assert by_group["default/edge"]["clusters_omitted"] == 1
    key_body = key.splitlines()[1]
    assert key_body not in config
    for text in (dot, pages["/debug"][2]):
        assert "PRIVATE KEY" not in text and key_body not in text


def run_dragoman(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dragoman", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_taken_metrics_port_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_dragoman(
            "serve",
            "--manifests",
            str(tmp_path),
            "--xds-address",
            f"127.0.0.1:{free_port()}",
            "--metrics-address",
            f"127.0.0.1:{port}",
        )
    assert result.returncode == 1
    assert f"cannot serve --metrics-address 127.0.0.1:{port}" in result.stderr


def test_json_logs_parse_line_by_line_and_port_zero_is_logged(tmp_path: Path) -> None:
    write(tmp_path, "gateway.yaml", GATEWAY)
    write(tmp_path, "services.yaml", SERVICES)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dragoman",
            "serve",
            "--manifests",
            str(tmp_path),
            "--xds-address",
            f"127.0.0.1:{free_port()}",
            "--metrics-address",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        lines: list[str] = []
        assert process.stderr is not None
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "serving xDS" in line:
                break
    finally:
        process.terminate()
        process.wait(timeout=10)
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert entries and all(
        {"time", "level", "logger", "message"} <= entry.keys() for entry in entries
    )
    assert all(entry["time"].endswith("Z") for entry in entries)
    ops = [e for e in entries if e["message"].startswith("operations endpoint on 127.0.0.1:0")]
    assert ops and "port 0 " not in ops[0]["message"], ops  # the port picked, not 0
    problems = [e for e in entries if e.get("reason") == "UnsafeExternalName"]
    assert problems and problems[0]["object"] == "HTTPRoute/default/shop"
    assert problems[0]["level"] == "warning"


def test_hostile_requests_get_answers_not_crashes(tmp_path: Path) -> None:
    """A huge request line, a flood of headers, a half-sent request, odd query values: each
    answered (or dropped), and the server keeps answering probes."""
    import socket

    write(tmp_path, "gateway.yaml", GATEWAY)

    def raw(port: int, data: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=15) as connection:
            connection.sendall(data)
            connection.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := connection.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    async def scenario() -> list[bytes]:
        async with serving(tmp_path) as server:
            await until(lambda: server.serving)
            assert server.ops is not None
            port = server.ops.port
            headers = b"".join(b"X-%d: y\r\n" % i for i in range(500))
            answers = [
                await asyncio.to_thread(raw, port, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n"),
                await asyncio.to_thread(raw, port, b"GET /metrics HTTP/1.1\r\n" + headers),
                await asyncio.to_thread(raw, port, b"GET /readyz HTT"),
                await asyncio.to_thread(raw, port, b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"),
            ]
            for path in ("/debug/config?limit=-5", "/debug/config?limit=x&limit=9", "/debug?%ff"):
                status, _, _ = await asyncio.to_thread(get, port, path)
                answers.append(str(status).encode())
            status, _, body = await asyncio.to_thread(get, port, "/readyz")
            answers.append(f"{status} {body.strip()}".encode())
            return answers

    answers = asyncio.run(scenario())
    assert answers[0].startswith(b"HTTP/1.1 414")
    assert answers[1].startswith(b"HTTP/1.1 431")
    assert not answers[2].startswith(b"HTTP/1.1 200")
    # Not HTTP at all (a TLS hello): a bare 400 page, as for HTTP/0.9, or nothing.
    assert b"400" in answers[3] or answers[3] == b""
    assert answers[4:7] == [b"200", b"200", b"200"]
    assert answers[7] == b"200 ok"
