"""An HTTP/1.1 backend on a loopback address whose misbehaviour a test turns on: slow
answers, 503s, and closing a keep-alive connection that sat idle too long just as the next
request arrives (the race behind "upstream connect error ... connection termination").
It counts what it answered and records each request's path and Host."""

from __future__ import annotations

import http.server
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Behaviour:
    delay_s: float = 0.0  # before each answer
    failing: bool = False  # answer 503
    # A connection idle longer than this when a request arrives is closed, unanswered.
    idle_close_s: float | None = None


@dataclass
class Seen:
    requests: int = 0  # answered, with any status
    failed: int = 0  # answered 503
    dropped: int = 0  # closed unanswered (idle too long)
    hosts: list[tuple[str, str]] = field(default_factory=list)  # (path, Host)
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
                if self.answered_once and limit is not None and idle > limit:
                    with backend.seen.lock:
                        backend.seen.dropped += 1
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

        self._server = Server((host, port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    def start(self) -> PolicyBackend:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def requests_to(self, path: str) -> list[str]:
        """The Host of every request for `path`."""
        with self.seen.lock:
            return [host for seen_path, host in self.seen.hosts if seen_path == path]
