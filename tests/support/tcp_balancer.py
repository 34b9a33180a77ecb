"""A round-robin TCP balancer on loopback, as a Service's load balancer stands before Envoys.

Each accepted connection goes to the next backend in the list, byte for byte both ways. A
backend leaves the list as a terminating pod leaves a Service's endpoints: connections it
already has stay; new ones go elsewhere. Runs its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType
from typing import Self

_CHUNK = 65536


class TcpBalancer:
    def __init__(self, backends: list[tuple[str, int]], host: str = "127.0.0.1") -> None:
        self._backends = list(backends)
        self._next = 0
        self._host = host
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self.port = 0
        self.refused = 0  # connections closed for want of a reachable backend

    def start(self) -> Self:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, self._host, 0), self._loop
        ).result(timeout=5)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def add(self, backend: tuple[str, int]) -> None:
        with self._lock:
            self._backends.append(backend)

    def remove(self, backend: tuple[str, int]) -> None:
        with self._lock:
            self._backends.remove(backend)

    def _pick(self) -> tuple[str, int] | None:
        with self._lock:
            if not self._backends:
                return None
            self._next = (self._next + 1) % len(self._backends)
            return self._backends[self._next]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backend = self._pick()
        try:
            if backend is None:
                raise OSError("no backend")
            upstream_reader, upstream_writer = await asyncio.open_connection(*backend)
        except OSError:
            self.refused += 1
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            for w in (writer, upstream_writer):
                w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then half-close, as a TCP proxy passes a FIN on."""
    with contextlib.suppress(OSError):
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
