"""Listener certificates checked as Envoy checks them: key types and sizes it refuses are
`InvalidCertificateRef` (never Programmed), and a chain keeps its CERTIFICATE blocks only (a
key appended to `tls.crt` is reported and dropped, never served or printed)."""

from __future__ import annotations

import datetime
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2

from dragoman.envoy import translate
from dragoman.envoy.text.snapshot_yaml import render_yaml
from dragoman.snapshots.resources import SECRET
from tests.support.builders import gateway, listener, tls_secret
from tests.support.envoy_dags import envoy_binary
from tests.support.status_builds import build_text, listener_condition
from tests.support.status_builds import listener as listener_status

HTTPS_GATEWAY = gateway(
    listeners=[listener("https", 443, "HTTPS", tls={"certificateRefs": [{"name": "site"}]})]
)


def pem_pair(key: Any) -> tuple[bytes, bytes]:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "site.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("site.example.com")]), False)
        .sign(key, algorithm)
    )
    return (
        certificate.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


KEYS = {
    "RSA 1024": (lambda: rsa.generate_private_key(65537, 1024), "2048 bits"),
    "RSA 2047": (lambda: rsa.generate_private_key(65537, 2047), "2048 bits"),
    "P-224": (lambda: ec.generate_private_key(ec.SECP224R1()), "secp224r1"),
    "secp256k1": (lambda: ec.generate_private_key(ec.SECP256K1()), "secp256k1"),
    "RSA 2048": (lambda: rsa.generate_private_key(65537, 2048), None),
    "P-256": (lambda: ec.generate_private_key(ec.SECP256R1()), None),
    "P-384": (lambda: ec.generate_private_key(ec.SECP384R1()), None),
    "P-521": (lambda: ec.generate_private_key(ec.SECP521R1()), None),
    "Ed25519": (ed25519.Ed25519PrivateKey.generate, None),
}


@pytest.fixture(scope="module")
def pairs() -> dict[str, tuple[bytes, bytes]]:
    return {name: pem_pair(make()) for name, (make, _) in KEYS.items()}


@pytest.mark.parametrize("kind", list(KEYS))
def test_key_types_and_sizes_as_envoy_takes_them(
    kind: str, pairs: dict[str, tuple[bytes, bytes]], tmp_path: Path
) -> None:
    chain, key = pairs[kind]
    refused_because = KEYS[kind][1]
    dag = build_text(HTTPS_GATEWAY, tls_secret("site", chain, key))
    if refused_because is None:
        assert listener_condition(dag, "gw", "https", "Programmed") == ("True", "Programmed")
        assert listener_condition(dag, "gw", "https", "ResolvedRefs") == ("True", "ResolvedRefs")
    else:
        assert listener_condition(dag, "gw", "https", "Programmed") == ("False", "Invalid")
        resolved = listener_condition(dag, "gw", "https", "ResolvedRefs")
        assert resolved == ("False", "InvalidCertificateRef")
        [message] = [
            c["message"]
            for c in listener_status(dag, "gw", "https")["conditions"]
            if c["type"] == "ResolvedRefs"
        ]
        assert refused_because in message and "Secret default/site" in message
    # The judgement is Envoy's own: the pair in a static listener, validated.
    assert _envoy_accepts(chain, key, tmp_path) == (refused_because is None)


DOWNSTREAM_TLS = (
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
)


def _envoy_accepts(chain: bytes, key: bytes, tmp_path: Path) -> bool:
    (tmp_path / "c.pem").write_bytes(chain)
    (tmp_path / "k.pem").write_bytes(key)
    config = f"""
static_resources:
  listeners:
  - name: l
    address: {{socket_address: {{address: 127.0.0.1, port_value: 1}}}}
    filter_chains:
    - filters:
      - name: tcp
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: s
          cluster: c
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": {DOWNSTREAM_TLS}
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{filename: {tmp_path / "c.pem"}}}
              private_key: {{filename: {tmp_path / "k.pem"}}}
  clusters:
  - name: c
    load_assignment:
      cluster_name: c
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address:
        {{address: 127.0.0.1, port_value: 2}}}}}}}}]}}]
"""
    (tmp_path / "envoy.yaml").write_text(config)
    result = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(tmp_path / "envoy.yaml"), "-l", "error"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return result.returncode == 0


def test_a_key_appended_to_the_chain_is_reported_and_never_served(
    pairs: dict[str, tuple[bytes, bytes]],
) -> None:
    chain, key = pairs["P-256"]
    dag = build_text(HTTPS_GATEWAY, tls_secret("site", chain + key, key))
    # Served with the certificate alone, and the extra block reported.
    assert listener_condition(dag, "gw", "https", "Programmed") == ("True", "Programmed")
    assert listener_condition(dag, "gw", "https", "ResolvedRefs") == (
        "False",
        "InvalidCertificateRef",
    )
    [message] = [
        c["message"]
        for c in listener_status(dag, "gw", "https")["conditions"]
        if c["type"] == "ResolvedRefs"
    ]
    assert "tls.crt holds a private key besides certificates" in message
    assert "BEGIN" not in message and "PRIVATE KEY" not in message
    snapshots = translate(dag)
    [served] = snapshots["default/gw"].of_type(SECRET).resources.values()
    message_served = secret_pb2.Secret.FromString(served.body)
    assert message_served.tls_certificate.certificate_chain.inline_bytes == chain
    assert b"PRIVATE KEY" not in message_served.tls_certificate.certificate_chain.inline_bytes
    assert "PRIVATE KEY" not in render_yaml(snapshots)


def test_a_chain_of_keys_only_is_refused(pairs: dict[str, tuple[bytes, bytes]]) -> None:
    _, key = pairs["P-256"]
    dag = build_text(HTTPS_GATEWAY, tls_secret("site", key, key))
    assert listener_condition(dag, "gw", "https", "Programmed") == ("False", "Invalid")
    assert listener_condition(dag, "gw", "https", "ResolvedRefs") == (
        "False",
        "InvalidCertificateRef",
    )
