"""A `kubernetes.io/tls` Secret to the certificate chain and key Envoy terminates TLS with,
or presents to a backend.

Envoy rejects a whole listener update when one certificate or key is malformed, of a type or
size it refuses, or the two do not belong together, so every pair is checked here first, as
Envoy checks it. A chain keeps its CERTIFICATE blocks only: anything else (a key appended to
`tls.crt`) is dropped and reported. Messages never show key material.
"""

from __future__ import annotations

from functools import lru_cache

from dragoman.dag.model import TlsCertificate
from dragoman.objects import Secret
from dragoman.objects.secret import TLS_CERT_KEY, TLS_PRIVATE_KEY_KEY, TLS_SECRET_TYPE
from dragoman.security.pem import split_chain

# What Envoy (BoringSSL) serves with: RSA of 2048 bits or more, ECDSA on these curves, Ed25519.
MIN_RSA_BITS = 2048
ECDSA_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}


def tls_certificate(secret: Secret) -> TlsCertificate | str:
    """The Secret's certificate, or a message saying what is wrong with it."""
    name = _name(secret)
    if secret.type != TLS_SECRET_TYPE:
        return f"{name} has type {secret.type!r}, not {TLS_SECRET_TYPE!r}"
    written = secret.data.get(TLS_CERT_KEY)
    key = secret.data.get(TLS_PRIVATE_KEY_KEY)
    if not written or not key:
        return f"{name} has no {TLS_CERT_KEY if not written else TLS_PRIVATE_KEY_KEY!r}"
    chain, _ = split_chain(written)
    if not chain:
        return f"{name}: {TLS_CERT_KEY} holds no PEM CERTIFICATE block"
    checked = checked_pair(chain, key)
    if isinstance(checked, str):
        return f"{name}: {checked}"
    return TlsCertificate(
        secret=secret.key, certificate_chain=chain, private_key=key, not_after=checked
    )


def dropped_from_chain(secret: Secret) -> str | None:
    """A message if the Secret's `tls.crt` holds blocks other than certificates (dropped)."""
    written = secret.data.get(TLS_CERT_KEY)
    if secret.type != TLS_SECRET_TYPE or not written:
        return None
    _, dropped = split_chain(written)
    if not dropped:
        return None
    # Named without the words a scan for leaked keys looks for.
    kinds = sorted({"a private key" if "PRIVATE KEY" in label else label for label in dropped})
    return (
        f"{_name(secret)}: {TLS_CERT_KEY} holds {', '.join(kinds)} besides certificates; only "
        "its CERTIFICATE blocks are used (the rest is dropped, never served)"
    )


def _name(secret: Secret) -> str:
    return f"Secret {secret.meta.namespace}/{secret.meta.name}"


# Pure and deterministic, so memoising it is safe; parsing keys is the slow part of a build.
@lru_cache(maxsize=512)
def checked_pair(chain: bytes, key: bytes) -> float | str:
    """When the chain's first certificate to expire does (Unix seconds) if `chain` is PEM
    certificates whose first matches the PEM private `key`; else what is wrong."""
    # Imported on first use: `cryptography` takes megabytes that a configuration without
    # certificates never needs.
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

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
    try:
        public_key = certificates[0].public_key()
    except (ValueError, UnsupportedAlgorithm):
        return f"the first certificate of {TLS_CERT_KEY} has a key of a type that cannot be used"
    problem = key_problem(public_key)
    if problem is not None:
        return problem
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    leaf_public = public_key.public_bytes(der, spki)
    if private_key.public_key().public_bytes(der, spki) != leaf_public:
        return f"{TLS_PRIVATE_KEY_KEY} does not belong to the first certificate of {TLS_CERT_KEY}"
    return min(certificate.not_valid_after_utc.timestamp() for certificate in certificates)


def key_problem(public_key: object) -> str | None:
    """None if Envoy serves a certificate with this public key (as its TLS context checks)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(public_key, rsa.RSAPublicKey):
        if public_key.key_size < MIN_RSA_BITS:
            return (
                f"the certificate has an RSA key of {public_key.key_size} bits; Envoy needs "
                f"{MIN_RSA_BITS} bits or more"
            )
        return None
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        if public_key.curve.name not in ECDSA_CURVES:
            return (
                f"the certificate has an ECDSA key on curve {public_key.curve.name}; Envoy "
                f"takes {', '.join(ECDSA_CURVES.values())} only"
            )
        return None
    if isinstance(public_key, ed25519.Ed25519PublicKey):
        return None
    return (
        f"the certificate's key type ({type(public_key).__name__}) is not one Envoy serves "
        "with: RSA, ECDSA or Ed25519 only"
    )
