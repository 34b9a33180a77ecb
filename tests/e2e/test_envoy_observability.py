"""End to end with a real Envoy: the stats listener of `dragoman bootstrap` serves only
/stats/prometheus and /ready of the admin (never /config_dump or /quitquitquit, however the
path is spelled), Gateway listeners write JSON access logs to standard output, dragoman's
/metrics sees the Envoy connect and ACK, and `dragoman config` shows what it holds."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_yaml
from tests.support.harness import DragomanProcess, free_port, get_json

MANIFESTS = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: Gateway
    metadata: {name: edge, namespace: default}
    spec:
      gatewayClassName: dragoman
      listeners: [{name: http, protocol: HTTP, port: LISTENER_PORT}]
    ---
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: web, namespace: default}
    spec:
      parentRefs: [{name: edge}]
      rules: [{backendRefs: [{name: web, port: 80}]}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec: {selector: {app: web}, ports: [{port: 80, targetPort: WEB_PORT}]}
    ---
    apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata:
      name: web-1
      namespace: default
      labels: {kubernetes.io/service-name: web}
    addressType: IPv4
    ports: [{port: WEB_PORT}]
    endpoints: [{addresses: [127.0.0.2]}]
    """


@dataclass
class World:
    envoy: EnvoyProcess
    dragoman: DragomanProcess
    url: str
    stats_port: int
    metrics_port: int


def request(port: int, method: str, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request(method, path, headers={"User-Agent": "e2e-observability"})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("observability")
    manifests = root / "manifests"
    manifests.mkdir()
    listener_port, web_port = free_port(), free_port("127.0.0.2")
    text = MANIFESTS.replace("LISTENER_PORT", str(listener_port))
    (manifests / "all.yaml").write_text(textwrap.dedent(text.replace("WEB_PORT", str(web_port))))
    backend = EchoBackend("web", host="127.0.0.2", port=web_port)
    backend.start()
    xds_address, metrics_port, stats_port = f"127.0.0.1:{free_port()}", free_port(), free_port()
    dragoman = DragomanProcess(
        manifests,
        xds_address,
        root / "dragoman.log",
        extra_args=("--metrics-address", f"127.0.0.1:{metrics_port}"),
    ).start()
    admin = root / "admin.sock"
    bootstrap = bootstrap_yaml(
        xds_address,
        node_id="observed",
        node_cluster="default/edge",
        admin_socket=str(admin),
        stats_address=f"127.0.0.1:{stats_port}",
    )
    envoy = EnvoyProcess(bootstrap, root, admin, root / "envoy.log")
    envoy.start()
    w = World(envoy, dragoman, f"http://127.0.0.1:{listener_port}", stats_port, metrics_port)
    try:
        wait_until(lambda: get_json(w.url + "/")[1].get("backend") == "web", timeout=20)
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        backend.stop()


def test_the_stats_listener_serves_prometheus_stats_and_readiness(world: World) -> None:
    status, body = request(world.stats_port, "GET", "/stats/prometheus")
    assert status == 200
    names = {family.name for family in text_string_to_metric_families(body)}
    assert "envoy_cluster_upstream_rq" in names or "envoy_server_live" in names, sorted(names)[:20]
    assert request(world.stats_port, "GET", "/ready") == (200, "LIVE\n")


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body = request(port, "GET", "/stats/prometheus")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def test_scrapes_flush_the_stats_without_a_periodic_flush(world: World) -> None:
    """The bootstrap turns Envoy's 5 s stats flush off (`stats_flush_on_admin`): scrapes
    flush instead. Counters are read as they are; a scrape also merges the worker's
    histograms, which the next scrape shows."""
    web = (("envoy_cluster_name", "default/web/80"),)
    listener_port = int(world.url.rsplit(":", 1)[1])
    scrape(world.stats_port)
    before = scrape(world.stats_port)  # histograms as of the scrape just before
    for _ in range(3):
        assert request(listener_port, "GET", "/counted")[0] == 200
    after = scrape(world.stats_port)

    def delta(now: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str) -> float:
        return now[(name, web)] - before.get((name, web), 0.0)

    assert delta(after, "envoy_cluster_upstream_rq_total") == 3
    assert after[("envoy_server_memory_allocated", ())] > 0  # a server gauge the flush sets
    wait_until(
        lambda: delta(scrape(world.stats_port), "envoy_cluster_upstream_rq_time_count") == 3,
        timeout=10,
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/config_dump"),
        ("GET", "/config_dump?include_eds"),
        ("POST", "/quitquitquit"),
        ("GET", "/quitquitquit"),
        ("POST", "/stats/prometheus"),  # only GET, and admin mutations are POSTs
        ("POST", "/logging?level=trace"),
        ("GET", "/stats/prometheus/../config_dump"),
        ("GET", "//config_dump"),
        ("GET", "/ready/../quitquitquit"),
        ("GET", "/stats"),
        ("GET", "/"),
    ],
)
def test_every_other_admin_page_is_refused(world: World, method: str, path: str) -> None:
    status, body = request(world.stats_port, method, path)
    assert status == 404, (status, body[:200])
    assert "private_key" not in body and "configs" not in body


def test_an_escaped_slash_is_rejected_and_envoy_keeps_running(world: World) -> None:
    status, _ = request(world.stats_port, "GET", "/stats/prometheus%2F..%2Fconfig_dump")
    assert status == 400
    assert world.envoy.returncode is None  # /quitquitquit never reached it
    assert request(world.stats_port, "GET", "/ready")[0] == 200


def test_gateway_listeners_write_json_access_logs_to_stdout(world: World) -> None:
    status, _ = request(int(world.url.rsplit(":", 1)[1]), "GET", "/logged/path?x=1")
    assert status == 200

    def logged() -> dict[str, object] | None:
        for line in Path(world.envoy.log_path).read_text(errors="replace").splitlines():
            if line.startswith("{") and "/logged/path" in line:
                return json.loads(line)
        return None

    entry = wait_until(logged, timeout=10)
    assert entry["path"] == "/logged/path?x=1"
    assert entry["method"] == "GET"
    assert entry["response_code"] == 200
    assert entry["upstream_cluster"] == "default/web/80"
    assert entry["user_agent"] == "e2e-observability"
    assert str(entry["upstream_host"]).startswith("127.0.0.2:")
    # What tells failures apart (flags, attempts, the transport's reason): none here.
    assert entry["response_flags"] == "-"
    assert entry["upstream_request_attempt_count"] == 1
    assert entry["upstream_transport_failure_reason"] is None
    assert entry["upstream_server_name"] is None  # plain HTTP to the backend: no SNI


def test_dragoman_metrics_see_the_envoy_connected_and_acking(world: World) -> None:
    def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        _, body = request(world.metrics_port, "GET", "/metrics")
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(body)
            for sample in family.samples
        }

    values = scraped()
    assert values[("dragoman_xds_clients", (("client", "envoy"),))] == 1
    for xds_type in ("CDS", "EDS", "LDS", "RDS"):
        assert values[("dragoman_xds_responses_total", (("type", xds_type),))] >= 1
        acked = values[("dragoman_xds_ack_latency_seconds_count", (("type", xds_type),))]
        assert acked >= 1, xds_type
        assert values[("dragoman_xds_nacks_total", (("type", xds_type),))] == 0
    assert values[("dragoman_builds_total", (("kind", "full"),))] == 1


def test_dragoman_config_shows_what_the_connected_envoy_holds(world: World) -> None:
    """`dragoman config NODE` against the running dragoman: the real Envoy's version (from its
    node), when it connected, the replica serving it, and each type's resources ACKed."""
    command = [sys.executable, "-m", "dragoman", "config", "observed"]
    address = ["--xds-address", world.dragoman.xds_address]
    shown = subprocess.run([*command, *address], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "node       observed (default/edge)"
    assert re.fullmatch(r"client     envoy 1\.\d+\.\d+", lines[1]), lines[1]
    assert re.fullmatch(
        r"connected  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ from \S+ \(1 stream\)", lines[2]
    )
    assert lines[3].startswith("replica    ") and lines[3].split()[1]
    held = {line.split()[0]: line.split() for line in lines if line.startswith("  ")}
    for name in ("default/web/80", "http-" + world.url.rsplit(":", 1)[1]):
        assert held[name][2] == "acked", (name, shown.stdout)
    for xds_type in ("CDS", "EDS", "LDS", "RDS"):
        assert any(line.startswith(f"{xds_type}: ") for line in lines), (xds_type, shown.stdout)
    dumped = subprocess.run(
        [*command, *address, "-o", "yaml"], capture_output=True, text=True, timeout=60
    )
    assert dumped.returncode == 0, dumped.stderr
    document = yaml.safe_load(dumped.stdout)
    (cluster,) = [c for c in document["CDS"] if c["name"] == "default/web/80"]
    assert cluster["resource"]["name"] == "default/web/80"
