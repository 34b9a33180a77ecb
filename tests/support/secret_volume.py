"""Files laid out as Kubernetes mounts a Secret (`..data`, a symbolic link to a timestamped
directory, swapped by one rename), and dragoman's own xDS server files replaced by renames:
how certificates rotate in place."""

from __future__ import annotations

import itertools
from pathlib import Path

from dragoman.security.certgen import Authority, Pair

_generation = itertools.count()


def swap_secret_volume(volume: Path, files: dict[str, bytes]) -> None:
    """What the kubelet does to a mounted Secret: a new directory, `..data` renamed onto it."""
    data = volume / f"..{next(_generation)}"
    data.mkdir()
    for name, content in files.items():
        (data / name).write_bytes(content)
        link = volume / name
        if not link.is_symlink():
            link.symlink_to(Path("..data") / name)
    staged = volume / "..data_tmp"
    staged.symlink_to(data.name)
    staged.rename(volume / "..data")


def client_files(authority: Authority, client: Pair) -> dict[str, bytes]:
    """An xDS client's Secret: its CA, certificate and key."""
    return {
        "ca.crt": authority.pair.certificate,
        "tls.crt": client.certificate,
        "tls.key": client.private_key,
    }


def write_server_files(directory: Path, server: Pair, client_ca: Authority) -> None:
    """dragoman's certificate, key and the CA it trusts clients by, each replaced by a rename."""
    for name, content in (
        ("server.crt", server.certificate),
        ("server.key", server.private_key),
        ("client-ca.crt", client_ca.pair.certificate),
    ):
        (directory / f".{name}.tmp").write_bytes(content)
        (directory / f".{name}.tmp").rename(directory / name)


def server_arguments(directory: Path) -> list[str]:
    """`dragoman serve`'s flags for the files write_server_files writes."""
    return [
        "--xds-tls-cert", str(directory / "server.crt"),
        "--xds-tls-key", str(directory / "server.key"),
        "--xds-tls-client-ca", str(directory / "client-ca.crt"),
    ]  # fmt: skip
