"""A `kubernetes.io/tls` Secret to the certificate chain and key Envoy terminates TLS with.

Envoy rejects a whole listener update when one certificate or key is malformed or the two do
not belong together, so every pair is checked here first. Messages never show key material.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from dragoman.dag.model import TlsCertificate
from dragoman.objects import Secret
from dragoman.objects.secrets import TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, TLS_SECRET_TYPE


def tls_certificate(secret: Secret) -> TlsCertificate | str:
    """The Secret's certificate, or a message saying what is wrong with it."""
    name = f"Secret {secret.meta.namespace}/{secret.meta.name}"
    if secret.type != TLS_SECRET_TYPE:
        return f"{name} has type {secret.type!r}, not {TLS_SECRET_TYPE!r}"
    chain = secret.data.get(TLS_CERT_KEY)
    key = secret.data.get(TLS_PRIVATE_KEY_KEY)
    if not chain or not key:
        return f"{name} has no {TLS_CERT_KEY if not chain else TLS_PRIVATE_KEY_KEY!r}"
    problem = pair_problem(chain, key)
    if problem is not None:
        return f"{name}: {problem}"
    return TlsCertificate(secret=secret.key, certificate_chain=chain, private_key=key)


# Pure and deterministic, so memoising it is safe; parsing keys is the slow part of a build.
@lru_cache(maxsize=512)
def pair_problem(chain: bytes, key: bytes) -> str | None:
    """None when `chain` is PEM certificates whose first matches the PEM private `key`."""
    try:
        certificates = x509.load_pem_x509_certificates(chain)
    except ValueError:
        return f"{TLS_CERT_KEY} is not a PEM certificate (chain)"
    try:
        private_key = serialization.load_pem_private_key(
            key, password=None, unsafe_skip_rsa_key_validation=True
        )
    except (ValueError, TypeError):
        # TypeError: the key is encrypted; Envoy cannot use it without a password.
        return f"{TLS_PRIVATE_KEY_KEY} is not an unencrypted PEM private key"
    except UnsupportedAlgorithm:
        return f"{TLS_PRIVATE_KEY_KEY} is a private key of a type that cannot be used"
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    leaf_public = certificates[0].public_key().public_bytes(der, spki)
    if private_key.public_key().public_bytes(der, spki) != leaf_public:
        return f"{TLS_PRIVATE_KEY_KEY} does not belong to the first certificate of {TLS_CERT_KEY}"
    return None
