"""A minimal WebSocket (RFC 6455) echo backend and client, on the standard library only.

Enough to prove an upgrade crosses Envoy: the opening handshake, then one masked text frame
from the client echoed back unmasked. Payloads are short (under 126 bytes).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import socket
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT_FRAME = 0x1
FIN = 0x80
MASKED = 0x80
MAX_HEADER_BYTES = 16384


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def read_head(sock: socket.socket) -> bytes:
    """Bytes up to the blank line that ends an HTTP head (anything after it is lost: the
    peers here send nothing more until answered)."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1024)
        if not chunk:
            raise ConnectionError(f"closed before the end of the HTTP head: {head!r}")
        head += chunk
        if len(head) > MAX_HEADER_BYTES:
            raise ConnectionError("HTTP head too long")
    return head


def headers_of(head: bytes) -> tuple[str, dict[str, str]]:
    """(first line, headers by lower-case name)."""
    lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return lines[0], fields


def frame(payload: bytes, *, masked: bool) -> bytes:
    assert len(payload) < 126
    if not masked:
        return bytes([FIN | TEXT_FRAME, len(payload)]) + payload
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([FIN | TEXT_FRAME, MASKED | len(payload)]) + mask + body


def read_frame(sock: socket.socket) -> bytes:
    """One short text frame's payload, unmasked."""
    first, second = _exactly(sock, 2)
    if first & 0x0F != TEXT_FRAME:
        raise ConnectionError(f"not a text frame: opcode {first & 0x0F}")
    length = second & 0x7F
    mask = _exactly(sock, 4) if second & MASKED else b""
    payload = _exactly(sock, length)
    return bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if mask else payload


def _exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed mid-frame")
        data += chunk
    return data


class WebSocketEchoBackend:
    """Answers each upgrade with 101, echoes one text frame prefixed with its name, closes.
    Records the request line and headers of the last handshake."""

    def __init__(self, name: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.name = name
        self._server = socket.create_server((host, port))
        self._server.settimeout(0.2)
        self.host, self.port = self._server.getsockname()[:2]
        self.handshakes = 0
        self.last_request: tuple[str, dict[str, str]] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=f"ws-{name}", daemon=True)

    def start(self) -> WebSocketEchoBackend:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._server.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            # A broken client (ConnectionError is an OSError) must not stop the backend.
            with connection, contextlib.suppress(OSError):
                connection.settimeout(5)
                self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        request_line, fields = headers_of(read_head(connection))
        self.last_request = (request_line, fields)
        key = fields.get("sec-websocket-key")
        if fields.get("upgrade", "").lower() != "websocket" or key is None:
            connection.sendall(
                b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            return
        self.handshakes += 1
        connection.sendall(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept_key(key)}\r\n\r\n"
            ).encode()
        )
        message = read_frame(connection)
        connection.sendall(frame(self.name.encode() + b": " + message, masked=False))


def websocket_echo(host: str, port: int, path: str, message: bytes, timeout: float = 5.0) -> bytes:
    """Opens a WebSocket through `host:port`, sends `message`, returns the frame echoed back.
    Raises ConnectionError naming the status when the upgrade is refused."""
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        status_line, fields = headers_of(read_head(sock))
        if status_line.split(" ")[1:2] != ["101"]:
            raise ConnectionError(f"upgrade refused: {status_line}")
        if fields.get("sec-websocket-accept") != accept_key(key):
            raise ConnectionError(f"wrong Sec-WebSocket-Accept: {fields}")
        sock.sendall(frame(message, masked=True))
        return read_frame(sock)
