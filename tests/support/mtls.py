"""Mutual TLS material for tests: a CA, dragoman's server pair and client pairs, as files."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from dragoman.security.certgen import Authority, Pair, client_pair, new_authority, standard_pairs
from dragoman.security.files import TlsFiles
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_registry import StreamRegistry
from dragoman.xds.transport.credentials import RotatingServerCredentials


@dataclass
class Material:
    directory: Path
    authority: Authority
    pairs: dict[str, Pair]

    @property
    def ca_pem(self) -> bytes:
        return self.authority.pair.certificate

    def server_files(self) -> TlsFiles:
        return TlsFiles(
            self.directory / "server.crt", self.directory / "server.key", self.directory / "ca.crt"
        )

    def client_files(self, name: str) -> TlsFiles:
        return TlsFiles(
            self.directory / f"{name}.crt",
            self.directory / f"{name}.key",
            self.directory / "ca.crt",
        )

    def credentials(self, name: str, ca_pem: bytes | None = None) -> grpc.ChannelCredentials:
        pair = self.pairs[name]
        return grpc.ssl_channel_credentials(
            ca_pem or self.ca_pem, pair.private_key, pair.certificate
        )

    def add(self, pair: Pair) -> None:
        self.pairs[pair.name] = pair
        write_pair(self.directory, pair)


def write_pair(directory: Path, pair: Pair) -> None:
    """Write then rename, as a Secret update does: a reader never sees half a file."""
    for suffix, data in ((".key", pair.private_key), (".crt", pair.certificate)):
        temporary = directory / f".{pair.name}{suffix}.tmp"
        temporary.write_bytes(data)
        temporary.rename(directory / f"{pair.name}{suffix}")


def material(
    directory: Path, gateways: tuple[str, ...] = ("default/a",), grpc_clients: tuple[str, ...] = ()
) -> Material:
    directory.mkdir(parents=True, exist_ok=True)
    authority = new_authority()
    pairs = {
        p.name: p for p in standard_pairs(authority, gateways=gateways, grpc_clients=grpc_clients)
    }
    (directory / "ca.crt").write_bytes(authority.pair.certificate)
    for pair in pairs.values():
        write_pair(directory, pair)
    return Material(directory, authority, pairs)


def stranger(uri: str = "spiffe://dragoman.dev/fleet") -> tuple[bytes, Pair]:
    """A client pair from another CA (and that CA's certificate), claiming `uri`."""
    other = new_authority("some other CA")
    return other.pair.certificate, client_pair(other, "stranger", uri)


@contextlib.asynccontextmanager
async def mtls_endpoint(
    cache: SnapshotCache, tls: Material, *, registry: StreamRegistry | None = None
) -> AsyncIterator[tuple[str, RotatingServerCredentials]]:
    """A real dragoman xDS server over mutual TLS on loopback: its address ("localhost:port",
    a name the server certificate carries) and its credentials."""
    credentials = RotatingServerCredentials(tls.server_files())
    server = await start_xds_server(cache, "127.0.0.1:0", registry=registry, tls=credentials)
    try:
        yield f"localhost:{bound_port(server)}", credentials
    finally:
        await server.stop(None)
