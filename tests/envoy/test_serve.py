"""A real Envoy serving translated routes answers with Gateway API semantics.

Envoy runs from a static bootstrap (inline routes, the EDS cluster's CLA as a STATIC cluster)
in front of an HTTP backend on loopback.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dragoman.dag.model import (
    Backend,
    Dag,
    DirectResponse,
    EdsCluster,
    Forward,
    HttpListener,
    LbEndpoint,
    LoadAssignment,
    Locality,
    NodeGroup,
    Route,
    RouteMatch,
    RouteTable,
    VirtualHost,
)
from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.objects import ObjectKey
from dragoman.snapshots.resources import ENDPOINT, LISTENER, ROUTE
from tests.support.envoy_dags import envoy_binary, messages, with_inline_routes

WEB = "default/web/80"
HTTP_ROUTE = ObjectKey("HTTPRoute", "default", "shop")
START_TIMEOUT_S = 20
REQUEST_TIMEOUT_S = 5


class EchoHandler(BaseHTTPRequestHandler):
    """Answers 200 with the path and Host header it received."""

    def do_GET(self) -> None:
        body = json.dumps({"path": self.path, "host": self.headers["Host"]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def shop_dag(backend_port: int, listener_port: int) -> Dag:
    def rule(index: int, path_type: str, path: str, action: Forward | DirectResponse) -> Route:
        return Route(RouteMatch(path_type, path), action, HTTP_ROUTE, index)

    web = Forward((Backend(WEB, 1),))
    table = RouteTable(
        "default/demo/http",
        (
            VirtualHost(
                "default/demo/http/shop",
                ("shop.example.com",),
                (
                    rule(0, "Exact", "/exact", web),
                    rule(1, "PathPrefix", "/api/", web),
                    rule(2, "PathPrefix", "/split", Forward((Backend(WEB, 1), Backend(None, 1)))),
                    rule(3, "Exact", "/broken", Forward((Backend(None, 1),))),
                    rule(4, "PathPrefix", "/", DirectResponse(404, "fallback")),
                ),
            ),
        ),
    )
    group = NodeGroup(
        "default/demo",
        (HttpListener("default/demo/http", listener_port, table.name),),
        (table,),
        (WEB,),
    )
    return Dag(
        groups={group.name: group},
        clusters={WEB: EdsCluster(WEB, ObjectKey("Service", "default", "web"), 80, 8080)},
        load_assignments={
            WEB: LoadAssignment(WEB, (Locality("", (LbEndpoint("127.0.0.1", backend_port),)),))
        },
    )


@pytest.fixture(scope="module")
def backend() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def listener_port(backend: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """One Envoy for the whole module, serving the shop routes on a loopback port."""
    tmp_path = tmp_path_factory.mktemp("envoy")
    port = free_port()
    snapshot = translate(shop_dag(backend, port), TranslateOptions(listener_address="127.0.0.1"))[
        "default/demo"
    ]
    tables = {t.name: t for t in messages(snapshot, ROUTE)}
    listener = with_inline_routes(messages(snapshot, LISTENER)[0], tables)
    listener.address.socket_address.port_value = port
    (assignment,) = messages(snapshot, ENDPOINT)
    config = {
        "static_resources": {
            "listeners": [to_json_mapping(listener)],
            "clusters": [
                {
                    "name": WEB,
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "load_assignment": to_json_mapping(assignment),
                }
            ],
        }
    }
    path = tmp_path / "envoy.yaml"
    path.write_text(dump_yaml(config))
    log = (tmp_path / "envoy.log").open("w")
    process = subprocess.Popen(
        [envoy_binary(), "-c", str(path), "--disable-hot-restart", "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_serving(port, process)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


def wait_until_serving(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, "envoy exited"
        try:
            get(port, "/exact")
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"envoy did not serve on port {port} within {START_TIMEOUT_S}s")


def get(port: int, path: str, host: str = "shop.example.com") -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def upstream_path(port: int, path: str) -> str | None:
    status, body = get(port, path)
    return json.loads(body)["path"] if status == 200 else None


@pytest.mark.parametrize(
    ("path", "seen_upstream"),
    [
        ("/exact", "/exact"),
        ("/exact/", None),
        ("/api", "/api"),
        ("/api/", "/api/"),
        ("/api/items?id=1", "/api/items?id=1"),
        ("/apix", None),  # a prefix matches whole path elements only
        ("//api//items", "/api/items"),  # merged slashes
        ("/x/../api/items", "/api/items"),  # normalized
    ],
)
def test_path_matches(listener_port: int, path: str, seen_upstream: str | None) -> None:
    assert upstream_path(listener_port, path) == seen_upstream


def test_host_with_a_port_matches_the_virtual_host(listener_port: int) -> None:
    status, body = get(listener_port, "/exact", host="shop.example.com:8443")

    assert status == 200
    # Envoy strips the port from the Host it forwards, too.
    assert json.loads(body)["host"] == "shop.example.com"


def test_unmatched_paths_get_the_direct_response(listener_port: int) -> None:
    assert get(listener_port, "/elsewhere") == (404, b"fallback")


def test_unknown_host_gets_404(listener_port: int) -> None:
    assert get(listener_port, "/exact", host="other.example.com")[0] == 404


def test_a_rule_with_only_invalid_backends_answers_500(listener_port: int) -> None:
    assert get(listener_port, "/broken")[0] == 500


def test_the_invalid_share_of_a_split_answers_500(listener_port: int) -> None:
    # Half of the weight is an invalid reference: 40 requests all landing on one side would
    # happen about once in 10^12 runs.
    statuses = {get(listener_port, "/split")[0] for _ in range(40)}

    assert statuses == {200, 500}
