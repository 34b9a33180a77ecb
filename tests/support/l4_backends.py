"""Echo servers for whole connections and datagrams, on loopback, each counting what reached
it: TCP (optionally TLS with its own certificate) and UDP."""

from __future__ import annotations

import socket
import socketserver
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.support.certificates import Pem


class _Threaded(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


class TcpEcho:
    """Echoes every byte of every connection back; with `pem`, inside TLS first."""

    def __init__(self, host: str, port: int, pem: Pem | None = None) -> None:
        self.connections = 0
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        if pem is not None:
            self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            with tempfile.TemporaryDirectory() as directory:
                cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
                cert.write_bytes(pem.certificate)
                key.write_bytes(pem.private_key)
                self._context.load_cert_chain(cert, key)
        echo = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                with echo._lock:
                    echo.connections += 1
                conn: Any = self.request
                conn.settimeout(10)
                try:
                    if echo._context is not None:
                        conn = echo._context.wrap_socket(conn, server_side=True)
                    while data := conn.recv(65536):
                        conn.sendall(data)
                except (OSError, ssl.SSLError):
                    pass

        self._server = _Threaded((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> TcpEcho:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class UdpEcho:
    """Answers every datagram with the same bytes."""

    def __init__(self, host: str, port: int) -> None:
        self.datagrams = 0
        echo = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                echo.datagrams += 1
                sock.sendto(data, self.client_address)

        self._server = socketserver.UDPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> UdpEcho:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tcp_round_trip(port: int, payload: bytes, timeout: float = 5.0) -> bytes:
    """Send `payload` through a TCP port, half-close, and read everything that comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := conn.recv(65536):
            received += chunk
        return bytes(received)


def tls_round_trip(
    port: int, server_name: str, ca: bytes, payload: bytes, timeout: float = 5.0
) -> tuple[bytes, dict[str, Any]]:
    """A TLS connection with this SNI, verified against `ca`: what came back, and the peer
    certificate the client saw."""
    context = ssl.create_default_context(cadata=ca.decode())
    with (
        socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as conn,
    ):
        peer = conn.getpeercert() or {}
        conn.sendall(payload)
        received = bytearray()
        while len(received) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        return bytes(received), dict(peer)


def udp_round_trip(port: int, payload: bytes, timeout: float = 2.0) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(payload, ("127.0.0.1", port))
        try:
            return sock.recv(65536)
        except TimeoutError:
            return None
