"""HTTP echo backends on loopback addresses, for the demo and the end-to-end tests.

Each answers every request with JSON naming itself and echoing what it
received (Host header, method, path, headers), so a test can tell which
backend Envoy picked and what Envoy rewrote. A `delay` query parameter
(`?delay=1.5`, seconds, at most 30) makes it answer that much later, to
exercise timeouts. Run one in the foreground
with `python -m dragoman.demo.sample_backends --name N --host H --port P`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from dragoman.stop_signals import StopSignals

_IDLE_CONNECTION_SECONDS = 30.0  # bounds how long a keep-alive connection holds a thread
_STOP_TIMEOUT_SECONDS = 5.0
_MAX_DELAY_SECONDS = 30.0  # a slow answer, never a hung thread


class _EchoServer(ThreadingHTTPServer):
    """A threaded HTTP server that can close its open keep-alive connections on stop."""

    daemon_threads = True
    # Restarting on the same port must not wait for TIME_WAIT to pass.
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops SYNs under a burst, costing a 1 s retransmit.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], backend_name: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.backend_name = backend_name
        self.requests = 0  # answered so far; tests prove a backend was never reached
        self.last_request: dict[str, Any] | None = None  # what the last response echoed
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, _EchoHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-connection (Envoy resetting a pooled one) are routine.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """Hang up on every client, so a stopped backend stops answering at once."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _EchoHandler(BaseHTTPRequestHandler):
    """Answers any method with a JSON description of the request."""

    server: _EchoServer
    protocol_version = "HTTP/1.1"  # keep-alive, as Envoy's upstream pools expect
    timeout = _IDLE_CONNECTION_SECONDS

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)  # drained so the next request on this connection parses
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            name = key.lower()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        with self.server._connections_lock:
            self.server.requests += 1
        delay = _requested_delay(self.path)
        if delay > 0:
            time.sleep(delay)
        echoed = {
            "backend": self.server.backend_name,
            "host": self.headers.get("Host", ""),
            "method": self.command,
            "path": self.path,
            "headers": headers,
        }
        with self.server._connections_lock:
            self.server.last_request = echoed
        body = json.dumps(echoed, sort_keys=True).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-backend", self.server.backend_name)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _echo

    def log_message(self, format: str, *args: Any) -> None:
        # Quiet: tests and the demo report what matters themselves.
        pass


def _requested_delay(path: str) -> float:
    """Seconds asked for by a `delay` query parameter; 0 when absent or not a number."""
    values = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("delay", [])
    try:
        delay = float(values[0]) if values else 0.0
    except ValueError:
        return 0.0
    if not delay > 0:  # negative, zero or NaN
        return 0.0
    return min(delay, _MAX_DELAY_SECONDS)


class EchoBackend:
    """An HTTP/1.1 echo server on a loopback address, served from background threads."""

    def __init__(self, name: str, host: str = "127.0.0.2", port: int = 0) -> None:
        self.name = name
        self.host = host
        self._requested_port = port
        self._server: _EchoServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port; known once started."""
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    @property
    def requests(self) -> int:
        """How many requests this backend has answered since it started."""
        return self._server.requests if self._server is not None else 0

    @property
    def last_request(self) -> dict[str, Any] | None:
        """What this backend echoed last (backend, host, method, path, headers), if anything."""
        return self._server.last_request if self._server is not None else None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError(f"EchoBackend {self.name!r} already started")
        self._server = _EchoServer((self.host, self._requested_port), self.name)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"echo-{self.name}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, hang up on open connections and release the port. Idempotent."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if thread is not None:
            thread.join(_STOP_TIMEOUT_SECONDS)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one echo backend in the foreground until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(
        prog="python -m dragoman.demo.sample_backends", description="An HTTP echo backend."
    )
    parser.add_argument("--name", required=True, help="reported in every response")
    parser.add_argument("--host", default="127.0.0.2", help="address to listen on")
    parser.add_argument("--port", type=int, default=8080, help="port to listen on (0: any)")
    args = parser.parse_args(argv)

    stop = StopSignals()
    with EchoBackend(args.name, host=args.host, port=args.port) as backend:
        print(f"echo backend {backend.name!r} listening on {backend.url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
