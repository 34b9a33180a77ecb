"""HTTP echo backends on loopback addresses, and the helpers that query them."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from dragoman.demo.http import http_get, wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.processes import reaped


def test_echo_names_itself_and_echoes_the_request() -> None:
    with EchoBackend("web-1") as backend:
        assert backend.host == "127.0.0.2"
        assert backend.url == f"http://127.0.0.2:{backend.port}"
        status, headers, body = http_get(backend.url + "/some/path?q=1", host="web.demo.test")
    assert status == 200
    assert headers["x-backend"] == "web-1"
    assert headers["content-type"] == "application/json"
    echoed = json.loads(body)
    assert echoed["backend"] == "web-1"
    assert echoed["host"] == "web.demo.test"
    assert echoed["method"] == "GET"
    assert echoed["path"] == "/some/path?q=1"
    assert echoed["headers"]["host"] == "web.demo.test"


def test_any_method_and_several_requests_per_connection() -> None:
    with EchoBackend("api", host="127.0.0.3") as backend:
        connection = http.client.HTTPConnection(backend.host, backend.port, timeout=2)
        try:
            for method in ("POST", "PUT", "DELETE", "PATCH", "GET"):
                connection.request(method, "/m", body=b"payload", headers={"X-Custom": "yes"})
                response = connection.getresponse()
                echoed = json.loads(response.read())
                assert response.status == 200
                assert echoed["method"] == method
                assert echoed["headers"]["x-custom"] == "yes"
            connection.request("HEAD", "/h")
            response = connection.getresponse()
            assert response.status == 200
            assert response.getheader("x-backend") == "api"
            assert response.read() == b""
        finally:
            connection.close()


def test_parallel_requests_are_served() -> None:
    with EchoBackend("busy") as backend, ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda i: http_get(f"{backend.url}/{i}"), range(64)))
    assert [json.loads(body)["path"] for _, _, body in results] == [f"/{i}" for i in range(64)]


def test_stop_closes_open_connections_and_releases_the_port() -> None:
    backend = EchoBackend("short-lived").start()
    port = backend.port
    connection = http.client.HTTPConnection(backend.host, port, timeout=2)
    connection.request("GET", "/")
    connection.getresponse().read()
    backend.stop()
    backend.stop()  # idempotent
    # The kept-alive connection was hung up on, not left answering for a stopped backend.
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        connection.request("GET", "/")
        connection.getresponse()
    connection.close()
    with pytest.raises(ConnectionRefusedError):
        http_get(f"http://127.0.0.2:{port}/")
    with EchoBackend("again", port=port) as again:
        assert json.loads(http_get(again.url)[2])["backend"] == "again"


def test_two_backends_share_a_port_on_different_loopback_addresses() -> None:
    with (
        EchoBackend("two", host="127.0.0.2") as two,
        EchoBackend("three", host="127.0.0.3", port=two.port) as three,
    ):
        assert http_get(two.url)[1]["x-backend"] == "two"
        assert http_get(three.url)[1]["x-backend"] == "three"


def test_wait_until_returns_the_first_truthy_value() -> None:
    calls: list[int] = []

    def third_time_lucky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("not yet")
        return "ready"

    assert wait_until(third_time_lucky, timeout=2, interval=0.01) == "ready"
    assert len(calls) == 3


def test_wait_until_times_out_naming_the_last_error_or_value() -> None:
    def refuse() -> None:
        raise ConnectionRefusedError("nobody home")

    with pytest.raises(TimeoutError, match="nobody home"):
        wait_until(refuse, timeout=0.2, interval=0.05)
    with pytest.raises(TimeoutError, match="last value: 0"):
        wait_until(lambda: 0, timeout=0.2, interval=0.05)


def test_wait_until_lets_fatal_errors_through_at_once() -> None:
    def broken() -> None:
        raise KeyError("fatal")

    with pytest.raises(KeyError):
        wait_until(broken, timeout=5, interval=0.05, fatal=(KeyError,))


def test_http_get_rejects_other_schemes() -> None:
    with pytest.raises(ValueError):
        http_get("https://127.0.0.1/")


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def test_module_runs_one_backend_in_the_foreground_until_sigterm() -> None:
    port = _free_port("127.0.0.4")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dragoman.demo.sample_backends",
            "--name",
            "fg",
            "--host",
            "127.0.0.4",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    with reaped(process):
        status, headers, _ = wait_until(
            lambda: http_get(f"http://127.0.0.4:{port}/"), timeout=10, interval=0.05
        )
        assert (status, headers["x-backend"]) == (200, "fg")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=5) == 0
        assert process.stdout is not None
        assert b"listening on http://127.0.0.4:" in process.stdout.read()
