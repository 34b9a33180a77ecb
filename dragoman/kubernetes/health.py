"""Liveness and readiness over plain HTTP, for Kubernetes probes.

GET /healthz answers 200 while the process works (and 503 once a check says otherwise);
GET /readyz answers 200 once every watched kind has been listed and xDS is served, and
503 with the reason before that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("dragoman.kubernetes")

# A check returns "" when all is well, or why not.
Check = Callable[[], str]

_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class HealthServer:
    def __init__(self, address: str, live: Check, ready: Check) -> None:
        self.address = address
        self.live = live
        self.ready = ready
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        host, _, port = self.address.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        self._server = await asyncio.start_server(self._serve, host, int(port))
        log.info("health endpoint on %s (/healthz, /readyz)", self.address)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5.0)
            for _ in range(100):  # headers, read and ignored; probes send no body
                if await asyncio.wait_for(reader.readline(), 5.0) in (b"\r\n", b"\n", b""):
                    break
            words = request.decode("latin-1").split()
            status, body = self._answer(words)
            payload = b"" if words[:1] == ["HEAD"] else body.encode() + b"\n"
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(body.encode()) + 1}\r\n"
                "Connection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, request: list[str]) -> tuple[int, str]:
        if len(request) < 2:
            return 405, "bad request"
        method, path = request[0], request[1].split("?")[0]
        if method not in ("GET", "HEAD"):
            return 405, "only GET"
        check = {"/healthz": self.live, "/livez": self.live, "/readyz": self.ready}.get(path)
        if check is None:
            return 404, "not found: try /healthz or /readyz"
        problem = check()
        return (503, problem) if problem else (200, "ok")
