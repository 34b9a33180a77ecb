"""PEM blocks by label, and private keys recognised by content, however they are wrapped."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from dragoman.security.certgen import new_authority
from dragoman.security.pem import holds_private_key, split_chain
from tests.e2e.conftest import leaked_keys

CA = new_authority().pair


def test_split_chain_keeps_certificates_only() -> None:
    chain, dropped = split_chain(b"# comment\n" + CA.certificate + CA.private_key + CA.certificate)
    assert chain == CA.certificate + CA.certificate
    assert dropped == ("PRIVATE KEY",)
    assert split_chain(CA.certificate) == (CA.certificate, ())
    # A malformed key block is dropped too, and reported.
    chain, dropped = split_chain(CA.certificate + b"-----BEGIN PRIVATE KEY-----\nMII")
    assert chain == CA.certificate and dropped == ("PRIVATE KEY",)
    assert split_chain(b"-----BEGIN X509 CRL-----\nAA==\n-----END X509 CRL-----\n") == (
        b"",
        ("X509 CRL",),
    )


def _keys() -> list[bytes]:
    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(65537, 2048)
    none = serialization.NoEncryption()
    return [
        ec_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, none),
        ec_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.TraditionalOpenSSL, none
        ),
        rsa_key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, none),
        ec_key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"password"),
        ),
    ]


@pytest.mark.parametrize("index", range(4))
def test_der_keys_in_base64_are_recognised(index: int) -> None:
    der = _keys()[index]
    assert holds_private_key(base64.b64encode(der).decode())
    assert holds_private_key(base64.b64encode(b"x\n" + CA.private_key))


def test_other_values_are_not_keys() -> None:
    for value in (
        "default/web/80",
        base64.b64encode(CA.certificate).decode(),
        base64.b64encode(b"\x30" + b"\x00" * 95).decode(),
        "A" * 128,
        "",
    ):
        assert not holds_private_key(value), value


def test_the_end_to_end_scan_finds_a_leaked_key(tmp_path: Path) -> None:
    (tmp_path / "dragoman.log").write_text("all good\n")
    (tmp_path / "secret.yaml").write_bytes(CA.private_key)  # manifests may hold keys
    assert leaked_keys(tmp_path) == []
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "envoy.log").write_bytes(b"oops " + CA.private_key)
    assert leaked_keys(tmp_path) == ["sub/envoy.log"]
