"""TLS files checked before anything is served: each malformed input gives a clear error
naming the file, and `dragoman serve` exits before serving."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from dragoman.security.certgen import Pair, new_authority, server_pair
from dragoman.security.files import MAX_FILE_BYTES, TlsFileError, TlsFiles, load_material
from tests.support.harness import free_port
from tests.support.mtls import Material, material


@pytest.fixture
def tls(tmp_path: Path) -> Material:
    return material(tmp_path)


def test_good_files_load(tls: Material) -> None:
    loaded = load_material(tls.server_files())
    assert loaded.certificate_chain == tls.pairs["server"].certificate
    assert "PRIVATE" not in repr(loaded)


def _expired(tls: Material) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "old")]))
        .issuer_name(tls.authority.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=10))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(tls.authority.key, hashes.SHA256())
    )
    return Pair(
        "server",
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _break(tls: Material, how: str) -> tuple[TlsFiles, str, str]:
    """Break the server files one way; returns them, the file to name and a phrase."""
    files = tls.server_files()
    if how == "missing certificate":
        files.certificate.unlink()
        return files, str(files.certificate), "no such file"
    if how == "missing CA":
        files.trusted_ca.unlink()
        return files, str(files.trusted_ca), "no such file"
    if how == "key of another pair":
        files.private_key.write_bytes(tls.pairs["fleet"].private_key)
        return files, str(files.private_key), "does not belong to the certificate"
    if how == "expired":
        expired = _expired(tls)
        files.certificate.write_bytes(expired.certificate)
        files.private_key.write_bytes(expired.private_key)
        return files, str(files.certificate), "expired"
    if how == "CA that did not sign it":
        files.trusted_ca.write_bytes(new_authority("other").pair.certificate)
        return files, str(files.certificate), "not signed by the CA in"
    if how == "not PEM":
        files.certificate.write_bytes(b"hello")
        return files, str(files.certificate), "not a PEM certificate"
    if how == "key in the certificate file":
        files.certificate.write_bytes(tls.pairs["server"].private_key)
        return files, str(files.certificate), "holds a private key"
    if how == "encrypted key":
        key = serialization.load_pem_private_key(tls.pairs["server"].private_key, None)
        files.private_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"secret"),
            )
        )
        return files, str(files.private_key), "encrypted"
    if how == "huge":
        files.trusted_ca.write_bytes(b"A" * (MAX_FILE_BYTES + 1))
        return files, str(files.trusted_ca), "larger than"
    if how == "a directory":
        files.private_key.unlink()
        files.private_key.mkdir()
        return files, str(files.private_key), "is a directory"
    raise AssertionError(how)


BROKEN = [
    "missing certificate",
    "missing CA",
    "key of another pair",
    "expired",
    "CA that did not sign it",
    "not PEM",
    "key in the certificate file",
    "encrypted key",
    "huge",
    "a directory",
]


@pytest.mark.parametrize("how", BROKEN)
def test_each_malformed_input_names_its_file(tls: Material, how: str) -> None:
    files, named, phrase = _break(tls, how)
    with pytest.raises(TlsFileError) as caught:
        load_material(files)
    message = str(caught.value)
    assert message.startswith(named + ":"), message
    assert phrase in message
    assert "PRIVATE KEY" not in message and "BEGIN" not in message


@pytest.mark.parametrize("how", ["missing certificate", "key of another pair", "expired"])
def test_serve_exits_before_serving(tls: Material, how: str, tmp_path: Path) -> None:
    files, named, phrase = _break(tls, how)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    port = free_port()
    result = subprocess.run(
        [
            sys.executable, "-m", "dragoman", "serve", "--manifests", str(manifests),
            "--xds-address", f"127.0.0.1:{port}",
            "--xds-tls-cert", str(files.certificate),
            "--xds-tls-key", str(files.private_key),
            "--xds-tls-client-ca", str(files.trusted_ca),
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert named in result.stderr and phrase in result.stderr
    assert "listening" not in result.stderr


def test_serve_refuses_plaintext_off_loopback_and_incomplete_flags(
    tls: Material, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dragoman", "serve", "--manifests", str(manifests), *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    plaintext = serve("--xds-address", f"0.0.0.0:{free_port()}")
    assert plaintext.returncode == 2
    assert "--xds-insecure" in plaintext.stderr and "plaintext" in plaintext.stderr
    partial = serve(
        "--xds-address", f"127.0.0.1:{free_port()}",
        "--xds-tls-cert", str(tls.server_files().certificate),
    )  # fmt: skip
    assert partial.returncode == 2
    assert "missing --xds-tls-key, --xds-tls-client-ca" in partial.stderr


def test_server_pair_names(tls: Material) -> None:
    pair = server_pair(tls.authority, ["dragoman", "10.0.0.1", "::1"])
    sans = x509.load_pem_x509_certificate(pair.certificate).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert sans.value.get_values_for_type(x509.DNSName) == ["dragoman"]
    assert [str(a) for a in sans.value.get_values_for_type(x509.IPAddress)] == ["10.0.0.1", "::1"]
