"""Connections that never finish their handshake are closed within the handshake timeout,
not after gRPC's default 120 s: each holds a file descriptor until then. Connections that
finish it and never open a stream are closed once idle, not when their age runs out."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import pytest

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.transport.credentials import RotatingServerCredentials
from tests.support.mtls import material
from tests.support.xds_builders import eds_cluster, snapshot

SILENT = 20
TIMEOUT_S = 1.0


def closed_within(port: int, count: int, seconds: float) -> int:
    """Connects `count` sockets that send nothing; how many the server closed in `seconds`."""
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    closed = 0
    deadline = time.monotonic() + seconds
    try:
        for sock in sockets:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                while sock.recv(4096):  # the server may send its settings first
                    pass
                closed += 1
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
    finally:
        for sock in sockets:
            sock.close()
    return closed


@pytest.mark.parametrize("tls", [True, False], ids=["mutual-tls", "plaintext"])
def test_silent_connections_are_closed_within_the_handshake_timeout(
    tls: bool, tmp_path: Path
) -> None:
    async def scenario() -> int:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        credentials = RotatingServerCredentials(material(tmp_path).server_files()) if tls else None
        server = await start_xds_server(
            cache,
            "127.0.0.1:0",
            tls=credentials,
            limits=XdsLimits(handshake_timeout_s=TIMEOUT_S),
        )
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(
                None, closed_within, bound_port(server), SILENT, TIMEOUT_S + 4
            )
        finally:
            await server.stop(None)

    closed = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert closed == SILENT


# HTTP/2's client connection preface and an empty SETTINGS frame; then the ACK of the
# server's SETTINGS: the handshake is done, and no stream is ever opened.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS_ACK = bytes([0, 0, 0, 4, 1, 0, 0, 0, 0])


def seconds_until_closed(sock: socket.socket, seconds: float) -> float | None:
    """Completes the HTTP/2 handshake on `sock`, opens no stream; when the server closed it
    (None: still open after `seconds`)."""
    started = time.monotonic()
    sock.settimeout(seconds)
    sock.sendall(PREFACE)
    acked = False
    try:
        while sock.recv(4096):  # the server's SETTINGS, later its GOAWAY
            if not acked:
                sock.sendall(SETTINGS_ACK)
                acked = True
    except (ConnectionResetError, ssl.SSLError):
        pass
    except TimeoutError:
        return None
    finally:
        sock.close()
    return time.monotonic() - started


@pytest.mark.parametrize("tls", [True, False], ids=["mutual-tls", "plaintext"])
def test_a_connection_that_opens_no_stream_is_closed_once_idle(tls: bool, tmp_path: Path) -> None:
    idle_s = 1.0
    keys = material(tmp_path)

    def connect(port: int) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", port))
        if not tls:
            return sock
        files = keys.client_files("fleet")
        context = ssl.create_default_context(cafile=str(files.trusted_ca))
        context.load_cert_chain(str(files.certificate), str(files.private_key))
        context.set_alpn_protocols(["h2"])
        context.check_hostname = False
        return context.wrap_socket(sock)

    async def scenario() -> float | None:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        credentials = RotatingServerCredentials(keys.server_files()) if tls else None
        server = await start_xds_server(
            cache,
            "127.0.0.1:0",
            tls=credentials,
            # The handshake is done within its timeout: only idleness can close it.
            limits=XdsLimits(handshake_timeout_s=idle_s, max_connection_idle_s=idle_s),
        )
        try:
            loop = asyncio.get_running_loop()
            sock = await loop.run_in_executor(None, connect, bound_port(server))
            return await loop.run_in_executor(None, seconds_until_closed, sock, idle_s + 5)
        finally:
            await server.stop(None)

    seconds = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert seconds is not None and seconds < idle_s + 3, seconds
