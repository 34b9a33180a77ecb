"""An HTTP/1.1 backend on a loopback address whose misbehaviour a test turns on: slow
answers, 503s, and closing a keep-alive connection that sat idle too long just as the next
request arrives (the race behind "upstream connect error ... connection termination"),
and refusing connections (its port closed) until it listens again. It counts what it
answered and records each request's path and Host, and when it was answered."""

from __future__ import annotations

import http.server
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Behaviour:
    delay_s: float = 0.0  # before each answer
    failing: bool = False  # answer 503
    # A connection idle longer than this when a request arrives is closed, unanswered.
    idle_close_s: float | None = None
    refusing: bool = False  # set by `refuse`: open connections closed at their next request


@dataclass
class Seen:
    requests: int = 0  # answered, with any status
    failed: int = 0  # answered 503
    dropped: int = 0  # closed unanswered (idle too long, or refusing)
    hosts: list[tuple[str, str]] = field(default_factory=list)  # (path, Host)
    answers: list[tuple[float, str, int]] = field(default_factory=list)  # (monotonic, path, status)
    dropped_at: list[float] = field(default_factory=list)  # monotonic
    lock: threading.Lock = field(default_factory=threading.Lock)


class PolicyBackend:
    def __init__(self, name: str, host: str, port: int) -> None:
        self.name = name
        self.behaviour = Behaviour()
        self.seen = Seen()
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            answered_once = False

            def handle_one_request(self) -> None:
                waiting_since = time.monotonic()
                line = self.rfile.readline(65537)
                idle = time.monotonic() - waiting_since
                limit = backend.behaviour.idle_close_s
                if not line:
                    self.close_connection = True
                    return
                refusing = backend.behaviour.refusing
                if refusing or (self.answered_once and limit is not None and idle > limit):
                    with backend.seen.lock:
                        backend.seen.dropped += 1
                        backend.seen.dropped_at.append(time.monotonic())
                    self.close_connection = True
                    return
                self.raw_requestline = line
                if not self.parse_request():
                    return
                self._answer()
                self.answered_once = True
                self.wfile.flush()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                behaviour = backend.behaviour
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)
                status = 503 if behaviour.failing else 200
                body = f'{{"backend": "{backend.name}"}}'.encode()
                with backend.seen.lock:
                    backend.seen.requests += 1
                    backend.seen.failed += status == 503
                    backend.seen.hosts.append((self.path, self.headers.get("Host", "")))
                    backend.seen.answers.append((time.monotonic(), self.path, status))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request: object, client_address: object) -> None:
                # A peer resetting its connection (Envoy after a failed attempt) is expected.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)  # type: ignore[arg-type]

        self.address = (host, port)

        def make_server() -> http.server.ThreadingHTTPServer:
            return Server(self.address, Handler)

        self._make_server = make_server
        self._server = make_server()
        self._thread = self._serving_thread()

    def _serving_thread(self) -> threading.Thread:
        return threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    def start(self) -> PolicyBackend:
        self._thread.start()
        return self

    def refuse(self) -> None:
        """As a host whose port closed: new connections refused, open ones closed unanswered
        at their next request (counted as dropped), until `listen`."""
        self.behaviour.refusing = True
        self.stop()

    def listen(self) -> None:
        """Accepts and answers again after `refuse`."""
        self.behaviour.refusing = False
        self._server = self._make_server()
        self._thread = self._serving_thread()
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def requests_to(self, path: str) -> list[str]:
        """The Host of every request for `path`."""
        with self.seen.lock:
            return [host for seen_path, host in self.seen.hosts if seen_path == path]


@dataclass
class Flaps:
    """When a flapping backend began failing and recovered (monotonic)."""

    failed_at: list[float] = field(default_factory=list)
    recovered_at: list[float] = field(default_factory=list)


@contextmanager
def flapping(backend: PolicyBackend, how: str, period: float) -> Iterator[Flaps]:
    """`backend` healthy for `period` seconds, then failing as long, in turn until the block
    ends (healthy again after): `how` is "503" (it answers 503) or "refused" (its port
    closed, see `PolicyBackend.refuse`)."""
    if how not in ("503", "refused"):
        raise ValueError(f"how: 503 or refused, not {how!r}")
    flaps = Flaps()
    stop = threading.Event()

    def turn(failing: bool) -> None:
        if how == "503":
            backend.behaviour.failing = failing
        elif failing:
            backend.refuse()
        else:
            backend.listen()

    def run() -> None:
        failing = False
        while not stop.wait(period):
            failing = not failing
            turn(failing)
            (flaps.failed_at if failing else flaps.recovered_at).append(time.monotonic())
        if failing:
            turn(False)

    thread = threading.Thread(target=run, daemon=True, name=f"flapping-{backend.name}")
    thread.start()
    try:
        yield flaps
    finally:
        stop.set()
        thread.join(timeout=10)
