"""Making a CA and the certificates of the xDS port: the server's, and one per client identity.

ECDSA P-256 keys (Envoy, grpcio and every TLS library accept them; small and fast), SHA-256
signatures, URI SANs for client identities (`dragoman.security.identities`).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from dragoman.security.identities import ADMIN, FLEET, gateway_uri, grpc_uri

DEFAULT_SERVER_NAMES = ("dragoman", "dragoman.dragoman-system.svc", "localhost", "127.0.0.1")
DEFAULT_DAYS = 365
CA_FILE = "ca.crt"
CA_KEY_FILE = "ca.key"


@dataclass(frozen=True, slots=True)
class Pair:
    """One certificate and its key, PEM; `name` is the file stem (`server`, `fleet`, ...)."""

    name: str
    certificate: bytes
    private_key: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Authority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey = field(repr=False)

    @property
    def pair(self) -> Pair:
        return Pair("ca", _certificate_pem(self.certificate), _key_pem(self.key))


def new_authority(common_name: str = "dragoman xDS CA", days: int = DEFAULT_DAYS) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        _builder(name, name, key.public_key(), days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Authority(certificate, key)


def load_authority(certificate_pem: bytes, key_pem: bytes) -> Authority:
    """A CA from its PEM certificate and unencrypted EC key (as `new_authority` writes them)."""
    certificate = x509.load_pem_x509_certificate(certificate_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an EC key")
    return Authority(certificate, key)


def server_pair(authority: Authority, names: Sequence[str], days: int = DEFAULT_DAYS) -> Pair:
    """dragoman's serving certificate: DNS names and IP addresses as SANs."""
    sans: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    return _issue(authority, "server", names[0], sans, ExtendedKeyUsageOID.SERVER_AUTH, days)


def client_pair(authority: Authority, name: str, uri: str, days: int = DEFAULT_DAYS) -> Pair:
    """A client certificate whose identity is the URI SAN `uri`."""
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(uri)]
    return _issue(authority, name, uri, sans, ExtendedKeyUsageOID.CLIENT_AUTH, days)


def standard_pairs(
    authority: Authority,
    server_names: Sequence[str] = DEFAULT_SERVER_NAMES,
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int = DEFAULT_DAYS,
) -> list[Pair]:
    """The server's pair, `fleet`, `admin`, and one per Gateway and proxyless gRPC client."""
    pairs = [
        server_pair(authority, server_names, days),
        client_pair(authority, "fleet", FLEET, days),
        client_pair(authority, "admin", ADMIN, days),
    ]
    for gateway in dict.fromkeys(gateways):
        stem = "gateway-" + gateway.replace("/", "-")
        pairs.append(client_pair(authority, stem, gateway_uri(gateway), days))
    for name in dict.fromkeys(grpc_clients):
        pairs.append(client_pair(authority, "grpc-" + name, grpc_uri(name), days))
    return pairs


def _issue(
    authority: Authority,
    stem: str,
    common_name: str,
    sans: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    days: int,
) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    # A common name is at most 64 characters (RFC 5280); identities live in the SANs anyway.
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    certificate = (
        _builder(subject, authority.certificate.subject, key.public_key(), days)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
        .sign(authority.key, hashes.SHA256())
    )
    return Pair(stem, _certificate_pem(certificate), _key_pem(key))


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # An hour of slack for clocks a little behind.
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _certificate_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


# A pair expiring sooner than this is issued again rather than kept.
RENEW_BEFORE = datetime.timedelta(days=30)


def still_good(
    authority: Authority,
    certificate_pem: bytes,
    key_pem: bytes,
    wanted: Pair,
    now: datetime.datetime | None = None,
) -> bool:
    """Whether an existing pair can be kept instead of `wanted` (freshly made, same purpose):
    signed by `authority`, the key its own, the same SANs, and not expiring soon."""
    when = now or datetime.datetime.now(datetime.UTC)
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        certificate.verify_directly_issued_by(authority.certificate)
        sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        wanted_sans = (
            x509.load_pem_x509_certificate(wanted.certificate)
            .extensions.get_extension_for_class(x509.SubjectAlternativeName)
            .value
        )
    except Exception:  # anything unreadable or unverifiable is replaced
        return False
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, spki) != certificate.public_key().public_bytes(der, spki):
        return False
    if set(sans.value) != set(wanted_sans):
        return False
    return certificate.not_valid_before_utc <= when < certificate.not_valid_after_utc - RENEW_BEFORE


def authority_still_good(
    certificate_pem: bytes, key_pem: bytes, now: datetime.datetime | None = None
) -> Authority | None:
    """The existing CA, if it is usable and not expiring soon; else None (make a new one)."""
    when = now or datetime.datetime.now(datetime.UTC)
    try:
        authority = load_authority(certificate_pem, key_pem)
    except Exception:  # unreadable: replaced
        return None
    certificate = authority.certificate
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if authority.key.public_key().public_bytes(der, spki) != certificate.public_key().public_bytes(
        der, spki
    ):
        return None
    if (
        not certificate.not_valid_before_utc
        <= when
        < certificate.not_valid_after_utc - RENEW_BEFORE
    ):
        return None
    return authority


@dataclass(frozen=True, slots=True)
class Issued:
    """What `renew` decided: the CA and every pair, each new or kept as it was."""

    authority: Authority
    authority_kept: bool
    pairs: tuple[tuple[Pair, bool], ...]  # (pair, kept)


def renew(
    existing_authority: tuple[bytes, bytes] | None,
    existing: dict[str, tuple[bytes, bytes]],
    server_names: Sequence[str] = DEFAULT_SERVER_NAMES,
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int = DEFAULT_DAYS,
) -> Issued:
    """Keep what is still good, make the rest: the same command run twice changes nothing.

    `existing`: certificate and key PEM by file stem (`server`, `fleet`, `gateway-ns-name`).
    """
    authority = authority_still_good(*existing_authority) if existing_authority else None
    kept_authority = authority is not None
    if authority is None:
        authority = new_authority(days=max(days, DEFAULT_DAYS))
    pairs: list[tuple[Pair, bool]] = []
    for wanted in standard_pairs(authority, server_names, gateways, grpc_clients, days):
        found = existing.get(wanted.name)
        if kept_authority and found is not None and still_good(authority, *found, wanted):
            pairs.append((Pair(wanted.name, found[0], found[1]), True))
        else:
            pairs.append((wanted, False))
    return Issued(authority, kept_authority, tuple(pairs))
