"""The one operations HTTP server of a `dragoman serve` process: /metrics (Prometheus),
/healthz and /readyz (probes), /debug, /debug/dag and /debug/config (what is served).

It runs the standard library's HTTP server in a thread of its own, so a slow scrape or a
large debug page never holds up xDS. What the debug pages show is taken on the event loop
(one consistent view of immutable values) and rendered in that thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
import threading
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dragoman.runtime.debug.view import DebugView
    from dragoman.runtime.metrics import Metrics

log = logging.getLogger("dragoman.runtime.ops")

DEFAULT_OPS_ADDRESS = "127.0.0.1:8002"
# A check returns "" when all is well, or why not.
Check = Callable[[], str]
# How long a debug page waits for the event loop to hand over its view.
VIEW_TIMEOUT_S = 5.0


class OpsAddressError(OSError):
    """The server could not listen where it was told to."""


class OpsServer:
    def __init__(
        self,
        address: str,
        *,
        live: Check,
        ready: Check,
        metrics: Metrics | None = None,
        debug_view: Callable[[], DebugView] | None = None,
        debug_remote: bool = False,
        flag: str = "--metrics-address",
        ready_notes: Check | None = None,
    ) -> None:
        self.address = address
        self.live = live
        self.ready = ready
        # What a ready answer adds below its "ok": degraded but serving ("" for nothing).
        self.ready_notes = ready_notes
        self.metrics = metrics
        self.debug_view = debug_view
        # The debug pages name every route, cluster and client: by default they answer
        # only peers on loopback (`kubectl port-forward` arrives there), while probes and
        # scrapes on the same port come from anywhere.
        self.debug_remote = debug_remote
        self.flag = flag
        self._httpd: _OpsHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        host, port = split_address(self.address)
        server_class = _server_class(host)
        try:
            self._httpd = server_class((host, port), _Handler)
        except OSError as error:
            raise OpsAddressError(
                f"cannot serve {self.flag} {self.address}: {error.strerror or error}"
            ) from None
        self._httpd.ops = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="dragoman-ops-http", daemon=True
        )
        self._thread.start()
        log.info(
            "operations endpoint on %s, port %d (/metrics, /healthz, /readyz, /debug)",
            self.address,
            self.port,
        )

    async def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        await asyncio.to_thread(httpd.shutdown)
        httpd.server_close()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 2.0)

    def view(self) -> DebugView:
        """The debug view, taken on the event loop (the values it reads change there)."""
        debug_view = self.debug_view
        assert debug_view is not None and self._loop is not None
        future: concurrent.futures.Future[DebugView] = concurrent.futures.Future()

        def take() -> None:
            try:
                future.set_result(debug_view())
            except Exception as error:
                future.set_exception(error)

        self._loop.call_soon_threadsafe(take)
        return future.result(VIEW_TIMEOUT_S)


def split_address(value: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port`; port 0 picks a free port."""
    host, colon, port = value.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"expected HOST:PORT (port 0 picks a free one), got {value!r}")
    return host.strip("[]"), int(port)


class _OpsHTTPServer(ThreadingHTTPServer):
    """The HTTP server, holding the OpsServer its handlers answer for."""

    daemon_threads = True
    allow_reuse_address = True
    ops: OpsServer


def _server_class(host: str) -> type[_OpsHTTPServer]:
    import socket

    class Server(_OpsHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return Server


class _Handler(BaseHTTPRequestHandler):
    server_version = "dragoman"
    protocol_version = "HTTP/1.1"
    # A stuck client must not keep a thread forever.
    timeout = 10

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        assert isinstance(self.server, _OpsHTTPServer)
        ops = self.server.ops
        path, _, query = self.path.partition("?")
        try:
            status, content_type, body = _route(ops, path, query, peer=self.client_address[0])
        except Exception:
            log.exception("operations endpoint: %s failed", path)
            status, content_type, body = 500, "text/plain; charset=utf-8", b"internal error\n"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if content_type.startswith("text/html"):
            # The debug page's own style and script only (by their hashes), nothing fetched
            # but itself.
            from dragoman.runtime.debug.pages import CONTENT_SECURITY_POLICY

            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


def _text(status: int, text: str) -> tuple[int, str, bytes]:
    return status, "text/plain; charset=utf-8", (text + "\n").encode()


def is_loopback_peer(peer: str) -> bool:
    """Whether a connection's source address is loopback (IPv4-mapped IPv6 included)."""
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def _route(
    ops: OpsServer, path: str, query: str = "", peer: str = "127.0.0.1"
) -> tuple[int, str, bytes]:
    if path in ("/healthz", "/livez"):
        problem = ops.live()
        return _text(503, problem) if problem else _text(200, "ok")
    if path == "/readyz":
        problem = ops.ready()
        if problem:
            return _text(503, problem)
        notes = ops.ready_notes() if ops.ready_notes is not None else ""
        return _text(200, f"ok\n{notes}" if notes else "ok")
    if path == "/metrics" and ops.metrics is not None:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST  # with the metrics

        return 200, CONTENT_TYPE_LATEST, ops.metrics.exposition()
    if path.startswith("/debug") and ops.debug_view is not None:
        if not ops.debug_remote and not is_loopback_peer(peer):
            return _text(
                int(HTTPStatus.FORBIDDEN),
                "the debug pages answer loopback peers only: use `kubectl port-forward`, or "
                "start dragoman with --debug-remote",
            )
        from dragoman.runtime.debug.pages import PAGES

        page = PAGES.get(path.rstrip("/") or "/debug")
        if page is not None:
            parameters = dict(urllib.parse.parse_qsl(query[:1000]))
            content_type, text = page(ops.view(), parameters)
            return 200, content_type, text.encode()
    return _text(
        int(HTTPStatus.NOT_FOUND),
        "not found: try /metrics, /healthz, /readyz, /debug, /debug/dag or /debug/config",
    )
