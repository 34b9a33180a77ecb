"""Connections that never finish their handshake are closed within the handshake timeout,
not after gRPC's default 120 s: each holds a file descriptor until then. Connections that
finish it and never open a stream are closed once idle, not when their age runs out."""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from pathlib import Path

import grpc
import pytest
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.snapshots.resources import CLUSTER
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.transport.credentials import RotatingServerCredentials
from tests.support.mtls import material
from tests.support.xds_builders import eds_cluster, snapshot
from tests.support.xds_client import XdsClient

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


def closed_at_once(sockets: list[socket.socket], seconds: float) -> int:
    """How many of `sockets` (that send nothing) the server closes within `seconds`."""
    closed = 0
    deadline = time.monotonic() + seconds
    for sock in sockets:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            while sock.recv(4096):
                pass
            closed += 1
        except ConnectionResetError:
            closed += 1
        except TimeoutError:
            pass
    return closed


async def served_clusters(port: int) -> set[str]:
    """What a well-behaved client gets, trying again every 0.2 s while it is refused (as
    Envoy does, with its backoff)."""
    while True:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            client = XdsClient(channel, Node(id="good", cluster="edge"))
            try:
                await client.subscribe(CLUSTER)
                return set((await client.receive(timeout=10.0)).resources)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise
            finally:
                client.cancel()
        await asyncio.sleep(0.2)


def test_connections_beyond_the_bound_are_closed_at_once_and_a_good_client_gets_in() -> None:
    """Stalled handshakes fill the bound: the connections above it are closed as soon as
    they are accepted (no file descriptor held for them); the ones within it go at the
    handshake timeout, and a well-behaved client connects then."""
    bound, stalled, timeout_s = 10, 40, 2.0

    async def scenario() -> tuple[int, int, set[str], float]:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        limits = XdsLimits(max_connections=bound, handshake_timeout_s=timeout_s)
        server = await start_xds_server(cache, "127.0.0.1:0", limits=limits)
        port = bound_port(server)
        loop = asyncio.get_running_loop()
        sockets: list[socket.socket] = []
        try:
            for _ in range(stalled):
                sockets.append(socket.create_connection(("127.0.0.1", port)))
                await asyncio.sleep(0.005)  # accepted in turn, as a flood of clients would be
            # Above the bound: closed within a fraction of the handshake timeout.
            early = await loop.run_in_executor(None, closed_at_once, sockets, timeout_s / 4)
            started = time.monotonic()
            clusters = await asyncio.wait_for(served_clusters(port), timeout_s + 10)
            waited = time.monotonic() - started
            # Within the bound: closed at the handshake timeout.
            late = await loop.run_in_executor(None, closed_at_once, sockets, timeout_s + 3)
            return early, late, clusters, waited
        finally:
            for sock in sockets:
                sock.close()
            await server.stop(None)

    early, late, clusters, waited = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert early == stalled - bound
    assert late == stalled
    assert clusters == {"a"}
    assert waited < timeout_s + 5, waited


def test_below_the_bound_a_good_client_connects_beside_stalled_ones() -> None:
    bound, stalled = 10, 5

    async def scenario() -> tuple[int, set[str]]:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        limits = XdsLimits(max_connections=bound, handshake_timeout_s=30.0)
        server = await start_xds_server(cache, "127.0.0.1:0", limits=limits)
        port = bound_port(server)
        sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(stalled)]
        try:
            clusters = await asyncio.wait_for(served_clusters(port), 5)
            loop = asyncio.get_running_loop()
            closed = await loop.run_in_executor(None, closed_at_once, sockets, 0.5)
            return closed, clusters
        finally:
            for sock in sockets:
                sock.close()
            await server.stop(None)

    closed, clusters = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert clusters == {"a"}
    assert closed == 0  # held: within the bound, within their handshake time
