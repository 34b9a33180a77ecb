"""A client for Envoy's admin API served on a UNIX socket.

The admin listens on a socket file rather than a TCP port so that no route
can ever reach it. UNIX socket paths are limited to about 100 bytes, so
callers keep the socket in a short directory.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any

# sun_path is 108 bytes on Linux and 104 on macOS, terminating NUL included.
MAX_SOCKET_PATH_BYTES = 103


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client over a UNIX stream socket instead of TCP."""

    def __init__(self, socket_path: Path, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(os.fspath(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


class AdminError(RuntimeError):
    """The admin answered with a status other than the one expected."""


def check_socket_path(path: Path) -> None:
    """Fail early, with a clear message, on a socket path the kernel would refuse."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"UNIX socket path is {len(os.fsencode(path))} bytes, over the "
            f"{MAX_SOCKET_PATH_BYTES}-byte limit; use a short directory: {path}"
        )


def parse_stats(text: str) -> dict[str, int]:
    """Counters and gauges from the text of GET /stats; histograms and text readouts are skipped."""
    stats: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(": ")
        if sep and value.strip().lstrip("-").isdigit():
            stats[name.strip()] = int(value)
    return stats


class EnvoyAdmin:
    """Reads Envoy's state through the admin API on a UNIX socket."""

    def __init__(self, socket_path: Path, timeout: float = 2.0) -> None:
        check_socket_path(socket_path)
        self.socket_path = socket_path
        self.timeout = timeout

    def request(
        self, method: str, path: str, params: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """One request on a fresh connection: (status, body)."""
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        connection = UnixHTTPConnection(self.socket_path, self.timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def get(self, path: str, params: dict[str, str] | None = None) -> str:
        """The body of a GET that must answer 200."""
        status, body = self.request("GET", path, params)
        if status != 200:
            raise AdminError(f"GET {path} answered {status}: {body[:200]!r}")
        return body.decode()

    def is_live(self) -> bool:
        """True once the server is initialized (GET /ready answers 200 LIVE)."""
        status, _ = self.request("GET", "/ready")
        return status == 200

    def stats(self, pattern: str | None = None) -> dict[str, int]:
        """Counters and gauges by name; `pattern` is Envoy's regular expression on names."""
        return parse_stats(self.get("/stats", {"filter": pattern} if pattern else None))

    def stat(self, name: str, default: int | None = None) -> int:
        """One counter or gauge; KeyError when absent unless a default is given."""
        value = self.stats().get(name, default)
        if value is None:
            raise KeyError(f"Envoy has no stat named {name!r}")
        return value

    def clusters_text(self) -> str:
        """GET /clusters: one line per fact, e.g. `c::127.0.0.2:80::health_flags::healthy`."""
        return self.get("/clusters")

    def config_dump(self, resource: str | None = None) -> dict[str, Any]:
        """GET /config_dump as JSON; `resource` narrows it (e.g. "dynamic_active_clusters")."""
        data: dict[str, Any] = json.loads(
            self.get("/config_dump", {"resource": resource} if resource else None)
        )
        return data

    def post(self, path: str) -> str:
        """A POST that must answer 200, e.g. "/healthcheck/fail" or "/quitquitquit"."""
        status, body = self.request("POST", path)
        if status != 200:
            raise AdminError(f"POST {path} answered {status}: {body[:200]!r}")
        return body.decode()
