"""The HTTP shell: reads requests, writes JSON replies and chunked watch streams."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.kubeapi.api import Reply, RestApi
from tests.support.kubeapi.watch import OpenWatches, WatchSession

# An idle keep-alive connection is dropped after this long, so no handler waits forever.
IDLE_CONNECTION_SECONDS = 30.0


class ApiHttpServer(ThreadingHTTPServer):
    """One listening socket; handler threads are joined on close, connections are tracked."""

    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], rest: RestApi, watches: OpenWatches) -> None:
        super().__init__(address, ApiRequestHandler)
        self.rest = rest
        self.watches = watches
        self._connections_lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """Closes every client connection, idle keep-alive ones included."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)


class ApiRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as clients expect
    server_version = "kubeapi-test"
    timeout = IDLE_CONNECTION_SECONDS
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: ApiHttpServer

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # tests read counters, not access logs

    def _serve(self) -> None:
        body = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = self.server.rest.handle(self.command, self.path, headers, body)
        if isinstance(reply, WatchSession):
            self._stream(reply)
        else:
            self._send(reply)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()  # the blank line after the last chunk
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        if isinstance(reply.body, str):
            payload, content_type = reply.body.encode(), "text/plain; charset=utf-8"
        else:
            payload, content_type = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, session: WatchSession) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            # Counted as open once the client has its 200: a cut is then always mid-stream.
            self.server.watches.add(session, self.connection)
            for event in session.events():
                line = json.dumps(event).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            if session.cancelled:
                self.close_connection = True  # cut: no final chunk, the client sees a break
            else:
                self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
        finally:
            self.server.watches.remove(session)
