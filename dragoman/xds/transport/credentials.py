"""Mutual TLS for the xDS server: grpcio credentials that pick up rotated files.

grpcio asks for a certificate configuration at every new handshake (dynamic server
credentials); the files are re-read only when one of them changed on disk (a rotated
Kubernetes Secret swaps the mounted files at once), and established connections keep the
configuration they were made with, so rotation never drops a stream. A rotation whose files
do not check out (half written, key and certificate from different pairs) is logged once and
the previous configuration kept until the files change again. The expiry metrics read the
files the same way (`material`), so they show what the next handshake will use.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import grpc

from dragoman.security.files import TlsFileError, TlsFiles, TlsMaterial, load_material

logger = logging.getLogger("dragoman.xds")

_Stamp = tuple[tuple[int, int, int, int] | None, ...]


def _stamp(paths: tuple[Path, ...]) -> _Stamp:
    stamps: list[tuple[int, int, int, int] | None] = []
    for path in paths:
        try:
            status = os.stat(path)  # follows the symlinks of a mounted Secret
        except OSError:
            stamps.append(None)
        else:
            stamps.append((status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns))
    return tuple(stamps)


def _configuration(material: TlsMaterial) -> grpc.ServerCertificateConfiguration:
    return grpc.ssl_server_certificate_configuration(
        [(material.private_key, material.certificate_chain)],
        root_certificates=material.trusted_ca,
    )


class RotatingServerCredentials:
    """Server credentials requiring a client certificate signed by `files.trusted_ca`.

    Raises TlsFileError (naming the file) if the files cannot be used now.
    """

    def __init__(self, files: TlsFiles) -> None:
        self.files = files
        self._paths = (files.certificate, files.private_key, files.trusted_ca)
        self._lock = threading.Lock()  # grpcio may ask from several handshakes at once
        self._stamp = _stamp(self._paths)
        self.rotations = 0
        self._material = load_material(files)
        self._configured = self._material  # what grpcio was last given
        self.credentials = grpc.dynamic_ssl_server_credentials(
            _configuration(self._material), self._fetch, require_client_authentication=True
        )

    def material(self) -> TlsMaterial:
        """The files' checked contents now (re-read if they changed): what the next
        handshake uses."""
        with self._lock:
            self._refresh()
            return self._material

    def _refresh(self) -> None:
        """Under the lock: re-read the files if one changed on disk."""
        stamp = _stamp(self._paths)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            material = load_material(self.files)
        except TlsFileError as error:
            logger.warning(
                "xDS TLS files changed but cannot be used, keeping the previous ones "
                "until they change again: %s",
                error,
            )
            return
        self.rotations += 1
        logger.info("xDS TLS files changed: new connections use %s", self.files.certificate)
        self._material = material

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """grpcio's fetcher: a new configuration if the files changed, else None (keep)."""
        try:
            with self._lock:
                self._refresh()
                if self._material is self._configured:
                    return None
                self._configured = self._material
                return _configuration(self._material)
        except Exception:  # an exception escaping into grpcio would fail the handshake
            logger.exception("reading the xDS TLS files failed; keeping the previous ones")
            return None
