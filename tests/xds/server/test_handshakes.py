"""Connections that never finish their handshake are closed within the handshake timeout,
not after gRPC's default 120 s: each holds a file descriptor until then."""

from __future__ import annotations

import asyncio
import socket
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
