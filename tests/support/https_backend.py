"""An HTTPS echo backend on loopback for the TLS origination tests: it answers with JSON naming
itself and echoing the Host header, the SNI the client sent, the protocol ALPN settled on and,
when it demands a client certificate, the common name of the one presented."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.certificates import Pem

_STOP_TIMEOUT_S = 5.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], name: str, context: ssl.SSLContext) -> None:
        self.backend_name = name
        self.context = context
        self.handshakes = 0
        self.failed_handshakes = 0
        self.last_sni: str | None = None
        # The protocol ALPN settled on, per handshake (None: the client offered none we speak).
        self.alpn: list[str | None] = []
        # (path, Host, SNI) of every request answered.
        self.requests: list[tuple[str, str, str | None]] = []
        super().__init__(address, _Handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The handshake runs in the connection's own thread, never in the accept loop.
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            self.failed_handshakes += 1
            return
        self.handshakes += 1
        self.alpn.append(wrapped.selected_alpn_protocol())
        super().finish_request(wrapped, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
        subject = dict(item[0] for item in (peer or {}).get("subject", ()))
        self.server.requests.append((self.path, self.headers.get("Host", ""), self.server.last_sni))
        body = json.dumps(
            {
                "backend": self.server.backend_name,
                "host": self.headers.get("Host", ""),
                "sni": self.server.last_sni,
                "path": self.path,
                "client": subject.get("commonName"),
                "alpn": self.connection.selected_alpn_protocol()
                if hasattr(self.connection, "selected_alpn_protocol")
                else None,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HttpsEchoBackend:
    def __init__(
        self,
        name: str,
        host: str,
        pem: Pem,
        workdir: Path,
        port: int = 0,
        client_ca: bytes | None = None,
        maximum_version: ssl.TLSVersion | None = None,
        alpn: Sequence[str] = (),
    ) -> None:
        """`client_ca`: demand a client certificate that this CA signed; `maximum_version`:
        the newest TLS version spoken (a legacy server); `alpn`: the protocols it accepts by
        ALPN, the first the client offers picked (it speaks HTTP/1.1 alone whatever it picks,
        so a test can see what a client offered)."""
        certificate = workdir / f"{name}.crt"
        key = workdir / f"{name}.key"
        certificate.write_bytes(pem.certificate)
        key.write_bytes(pem.private_key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        if maximum_version is not None:
            context.maximum_version = maximum_version
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=client_ca.decode())
        if alpn:
            context.set_alpn_protocols(list(alpn))
        context.sni_callback = self._record_sni
        self._server = _Server((host, port), name, context)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def handshakes(self) -> int:
        return self._server.handshakes

    @property
    def failed_handshakes(self) -> int:
        return self._server.failed_handshakes

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        """(path, Host, SNI) of every request answered (the SNI: the last handshake's)."""
        return list(self._server.requests)

    @property
    def alpn(self) -> list[str | None]:
        """The protocol ALPN settled on, handshake by handshake."""
        return list(self._server.alpn)

    def _record_sni(self, connection: Any, server_name: str | None, context: Any) -> None:
        self._server.last_sni = server_name

    def start(self) -> HttpsEchoBackend:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(_STOP_TIMEOUT_S)
