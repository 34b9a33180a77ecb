"""The certificate, key and CA files of a TLS endpoint, read and checked before they are used.

Every problem names the file: a missing or unreadable file, something other than PEM, a key
that does not belong to the certificate, a certificate not yet or no longer valid, a
certificate the CA did not sign. Messages never show key material.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

# `cryptography` is imported by the functions that read files: a plaintext server, which only
# names TlsFiles in its signatures, never loads it.
if TYPE_CHECKING:
    from cryptography import x509

# A PEM file larger than this is not a certificate chain or a key.
MAX_FILE_BYTES = 1 << 20


class TlsFileError(ValueError):
    """A TLS file cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where a TLS endpoint's files are."""

    certificate: Path
    private_key: Path
    trusted_ca: Path


@dataclass(frozen=True, slots=True)
class TlsMaterial:
    """The checked contents of TlsFiles, PEM."""

    certificate_chain: bytes
    private_key: bytes = field(repr=False)
    trusted_ca: bytes = b""
    # Read while checking (Unix seconds): when the chain's first certificate to expire does,
    # and each trusted CA's subject and expiry, for the expiry metric.
    not_after: float = 0.0
    authorities: tuple[tuple[str, float], ...] = ()


def read_pem(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise TlsFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TlsFileError(f"{path}: is a directory, not a PEM file") from None
    except OSError as error:
        raise TlsFileError(f"{path}: cannot be read ({error.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise TlsFileError(f"{path}: larger than {MAX_FILE_BYTES} bytes, not a PEM file")
    return data


def load_certificates(path: Path, data: bytes) -> list[x509.Certificate]:
    from cryptography import x509

    if b"PRIVATE KEY-----" in data:
        raise TlsFileError(f"{path}: holds a private key; expected certificates only")
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsFileError(f"{path}: not a PEM certificate (chain)") from None


def load_private_key(path: Path, data: bytes) -> object:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise TlsFileError(
            f"{path}: the private key is encrypted; expected an unencrypted key"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise TlsFileError(f"{path}: not a PEM private key") from None


def load_material(files: TlsFiles, *, now: datetime.datetime | None = None) -> TlsMaterial:
    """Read and check `files`; raises TlsFileError naming the first file with a problem."""
    chain_pem = read_pem(files.certificate)
    key_pem = read_pem(files.private_key)
    ca_pem = read_pem(files.trusted_ca)
    chain = load_certificates(files.certificate, chain_pem)
    authorities = load_certificates(files.trusted_ca, ca_pem)
    key = load_private_key(files.private_key, key_pem)
    leaf = chain[0]
    if not _same_public_key(key, leaf):
        raise TlsFileError(
            f"{files.private_key}: the private key does not belong to the certificate in "
            f"{files.certificate}"
        )
    when = now or datetime.datetime.now(datetime.UTC)
    check_validity(files.certificate, leaf, when)
    for authority in authorities:
        check_validity(files.trusted_ca, authority, when)
    if not any(signed_by(certificate, authorities) for certificate in chain):
        raise TlsFileError(
            f"{files.certificate}: not signed by the CA in {files.trusted_ca} (nor is any "
            "certificate of its chain)"
        )
    return TlsMaterial(
        certificate_chain=chain_pem,
        private_key=key_pem,
        trusted_ca=ca_pem,
        not_after=min(certificate.not_valid_after_utc.timestamp() for certificate in chain),
        authorities=tuple(
            (authority.subject.rfc4514_string(), authority.not_valid_after_utc.timestamp())
            for authority in authorities
        ),
    )


def check_validity(path: Path, certificate: x509.Certificate, now: datetime.datetime) -> None:
    if now < certificate.not_valid_before_utc:
        raise TlsFileError(
            f"{path}: the certificate is not valid before "
            f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
        )
    if now > certificate.not_valid_after_utc:
        raise TlsFileError(
            f"{path}: the certificate expired at "
            f"{certificate.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
        )


def signed_by(certificate: x509.Certificate, authorities: list[x509.Certificate]) -> bool:
    """Whether one of `authorities` signed `certificate` (issuer name and signature)."""
    from cryptography.exceptions import InvalidSignature

    for authority in authorities:
        if authority.subject != certificate.issuer:
            continue
        try:
            certificate.verify_directly_issued_by(authority)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def _same_public_key(key: object, certificate: x509.Certificate) -> bool:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    public = getattr(key, "public_key", None)
    if public is None:
        return False
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    try:
        theirs = certificate.public_key().public_bytes(der, spki)
    except (ValueError, UnsupportedAlgorithm):
        return False
    return bool(public().public_bytes(der, spki) == theirs)
