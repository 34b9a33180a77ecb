"""`dragoman drain` against a scripted admin interface: what it asks Envoy, when it stops
waiting, what it tells the caller. (tests/e2e/test_envoy_drain.py drains real Envoys.)"""

from __future__ import annotations

import argparse
import http.server
import select
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from dragoman.cli import main
from dragoman.commands import drain as drain_command
from dragoman.commands.drain import DrainState, drain, duration


class ScriptedAdmin:
    """Answers drain_state() from a script of states, one per call; records the POSTs."""

    def __init__(self, states: list[DrainState]) -> None:
        self.script: Iterator[DrainState] = iter(states)
        self.posts: list[str] = []

    def post(self, path: str) -> None:
        self.posts.append(path)

    def drain_state(self) -> DrainState:
        return next(self.script)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def state(connections: int, stopped: int, listeners: int = 2) -> DrainState:
    return DrainState(connections=connections, listeners=listeners, stopped=stopped)


def test_readiness_fails_before_the_listeners_drain() -> None:
    admin = ScriptedAdmin([state(0, 0), state(0, 2)])
    clock = Clock()
    outcome = drain(admin, timeout=10, clock=clock, sleep=clock.sleep)
    assert admin.posts == ["/healthcheck/fail", "/drain_listeners?graceful"]
    assert outcome.drained


def test_no_connection_is_not_enough_while_listeners_still_accept() -> None:
    # Connections at zero at once, but the listeners stop only on the fourth look.
    admin = ScriptedAdmin([state(0, 5), state(0, 5), state(0, 6), state(0, 7)])
    clock = Clock()
    outcome = drain(admin, timeout=10, interval=1, clock=clock, sleep=clock.sleep)
    assert outcome.drained
    assert outcome.seconds == 2.0  # two polls after the first look


def test_waits_for_the_last_connection_after_the_listeners_stopped() -> None:
    admin = ScriptedAdmin([state(3, 0), state(3, 2), state(1, 2), state(0, 2)])
    clock = Clock()
    outcome = drain(admin, timeout=10, interval=0.5, clock=clock, sleep=clock.sleep)
    assert outcome.drained
    assert outcome.seconds == 1.0


def test_the_timeout_bounds_the_wait() -> None:
    admin = ScriptedAdmin([state(4, 0)] + [state(4, 2)] * 100)
    clock = Clock()
    outcome = drain(admin, timeout=3, interval=1, clock=clock, sleep=clock.sleep)
    assert not outcome.drained
    assert outcome.listeners_stopped
    assert outcome.connections == 4
    assert outcome.seconds == 3.0


def test_durations_are_gateway_api_durations() -> None:
    assert duration("1m30s") == 90.0
    assert duration("500ms") == 0.5
    with pytest.raises(argparse.ArgumentTypeError):
        duration("90")


def test_an_unreachable_admin_fails_and_still_writes_the_done_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = tmp_path / "drained"
    code = main(
        ["drain", "--admin-socket", str(tmp_path / "missing.sock"), "--done-file", str(done)]
    )
    assert code == 1
    assert "admin interface" in capsys.readouterr().err
    # Envoy's preStop hook waits for this file: it must not wait out the grace period.
    assert done.exists()


def test_as_a_sidecar_it_drains_on_sigterm_and_writes_the_done_file(tmp_path: Path) -> None:
    done = tmp_path / "drained"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dragoman",
            "drain",
            "--admin-socket",
            str(tmp_path / "admin.sock"),
            "--after-sigterm",
            "--done-file",
            str(done),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Its handler is in place once it says so (a SIGTERM before would just end it).
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready and "waiting for SIGTERM" in process.stdout.readline()
        assert process.poll() is None
        assert not done.exists()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    # No Envoy here: the drain fails, and still says it is over.
    assert process.returncode == 1
    assert "admin interface" in stderr
    assert done.exists()


def test_one_admin_address_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["drain"])
    assert "--admin-socket" in capsys.readouterr().err
    assert drain_command.CONNECTIONS_STAT == "server.total_connections"


class _FakeAdmin(http.server.BaseHTTPRequestHandler):
    """Envoy's admin interface as far as the drain uses it: listeners stop at the third look."""

    calls: list[str] = []

    def do_POST(self) -> None:
        self.calls.append(f"POST {self.path}")
        self._answer(b"OK\n")

    def do_GET(self) -> None:
        self.calls.append(f"GET {urllib.parse.urlsplit(self.path).path}")
        looks = sum(call.startswith("GET") for call in self.calls)
        stopped = 1 if looks >= 3 else 0
        self._answer(
            f"listener_manager.listener_stopped: {stopped}\n"
            "listener_manager.total_listeners_active: 1\n"
            "server.total_connections: 0\n".encode()
        )

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_a_tcp_admin_address_is_drained_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    _FakeAdmin.calls = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeAdmin)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        code = main(["drain", "--admin-address", address, "--interval", "10ms", "--timeout", "5s"])
    finally:
        server.shutdown()
        thread.join(timeout=5)
    assert code == 0
    assert "drained in" in capsys.readouterr().out
    assert _FakeAdmin.calls[:3] == [
        "GET /stats",
        "POST /healthcheck/fail",
        "POST /drain_listeners?graceful",
    ]
    assert _FakeAdmin.calls.count("GET /stats") == 3
