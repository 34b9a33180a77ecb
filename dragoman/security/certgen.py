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
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
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


def new_authority(
    common_name: str = "dragoman xDS CA",
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    serial = x509.random_serial_number()
    # A subject of its own (the serial number in it): while a renewed CA and the one before
    # it are both trusted, a verifier looking an issuer up by name finds the right one.
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            x509.NameAttribute(NameOID.SERIAL_NUMBER, f"{serial:x}"),
        ]
    )
    certificate = (
        _builder(name, name, key.public_key(), days, now, serial)
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


def server_pair(
    authority: Authority,
    names: Sequence[str],
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> Pair:
    """dragoman's serving certificate: DNS names and IP addresses as SANs."""
    sans: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    usage = ExtendedKeyUsageOID.SERVER_AUTH
    return _issue(authority, "server", names[0], sans, usage, days, now)


def client_pair(
    authority: Authority,
    name: str,
    uri: str,
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> Pair:
    """A client certificate whose identity is the URI SAN `uri`."""
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(uri)]
    return _issue(authority, name, uri, sans, ExtendedKeyUsageOID.CLIENT_AUTH, days, now)


def standard_pairs(
    authority: Authority,
    server_names: Sequence[str] = DEFAULT_SERVER_NAMES,
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int = DEFAULT_DAYS,
    now: datetime.datetime | None = None,
) -> list[Pair]:
    """The server's pair, `fleet`, `admin`, and one per Gateway and proxyless gRPC client."""
    pairs = [
        server_pair(authority, server_names, days, now),
        client_pair(authority, "fleet", FLEET, days, now),
        client_pair(authority, "admin", ADMIN, days, now),
    ]
    for gateway in dict.fromkeys(gateways):
        stem = "gateway-" + gateway.replace("/", "-")
        pairs.append(client_pair(authority, stem, gateway_uri(gateway), days, now))
    for name in dict.fromkeys(grpc_clients):
        pairs.append(client_pair(authority, "grpc-" + name, grpc_uri(name), days, now))
    return pairs


def _issue(
    authority: Authority,
    stem: str,
    common_name: str,
    sans: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    days: int,
    now: datetime.datetime | None = None,
) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    # A common name is at most 64 characters (RFC 5280); identities live in the SANs anyway.
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])])
    certificate = (
        _builder(subject, authority.certificate.subject, key.public_key(), days, now)
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
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    days: int,
    now: datetime.datetime | None = None,
    serial: int | None = None,
) -> x509.CertificateBuilder:
    when = now or datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(serial if serial is not None else x509.random_serial_number())
        # An hour of slack for clocks a little behind.
        .not_valid_before(when - datetime.timedelta(hours=1))
        .not_valid_after(when + datetime.timedelta(days=days))
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


# A pair expiring sooner than this is issued again rather than kept (`--renew-before`).
RENEW_BEFORE = datetime.timedelta(days=30)


def renewal_problem(renew_before: datetime.timedelta, days: int) -> str | None:
    """Why `renew_before` cannot work with certificates of `days` days, or None.

    A leaf must outlive the threshold, or every run would issue it again; the CA is replaced
    at twice the threshold, so it must outlive that too (its validity: `days`, at least
    DEFAULT_DAYS)."""
    if renew_before <= datetime.timedelta(0):
        return "--renew-before must be positive"
    if renew_before >= datetime.timedelta(days=days):
        return f"--renew-before must be shorter than the certificates' {days} days"
    if 2 * renew_before >= datetime.timedelta(days=max(days, DEFAULT_DAYS)):
        return "--renew-before must be under half the CA's validity"
    return None


def pem_certificates(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; none when it cannot be read (it is then replaced)."""
    try:
        return x509.load_pem_x509_certificates(pem) if pem.strip() else []
    except ValueError:
        return []


def _same_key(key: object, certificate: x509.Certificate) -> bool:
    if not isinstance(
        key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
    ):
        return False
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return key.public_key().public_bytes(der, spki) == certificate.public_key().public_bytes(
        der, spki
    )


def _lasts(
    certificate: x509.Certificate, when: datetime.datetime, margin: datetime.timedelta
) -> bool:
    """Valid now and for more than `margin` still."""
    return certificate.not_valid_before_utc <= when < certificate.not_valid_after_utc - margin


def _issuer(
    certificate: x509.Certificate, authorities: Sequence[x509.Certificate]
) -> x509.Certificate | None:
    from dragoman.security.files import signed_by

    for authority in authorities:
        if signed_by(certificate, [authority]):
            return authority
    return None


def still_good(
    authorities: Sequence[x509.Certificate],
    certificate_pem: bytes,
    key_pem: bytes,
    wanted: Pair,
    when: datetime.datetime,
    renew_before: datetime.timedelta = RENEW_BEFORE,
) -> bool:
    """Whether an existing pair can be kept instead of `wanted` (freshly made, same purpose):
    signed by one of the trusted `authorities`, the key its own, the same SANs, and neither
    it nor the CA that signed it expiring within `renew_before`."""
    try:
        wanted_sans = (
            x509.load_pem_x509_certificate(wanted.certificate)
            .extensions.get_extension_for_class(x509.SubjectAlternativeName)
            .value
        )
    except Exception:  # anything unreadable is replaced
        return False
    return _keeps(authorities, certificate_pem, key_pem, set(wanted_sans), when, renew_before)


def _keeps(
    authorities: Sequence[x509.Certificate],
    certificate_pem: bytes,
    key_pem: bytes,
    wanted_sans: set[x509.GeneralName],
    when: datetime.datetime,
    renew_before: datetime.timedelta,
) -> bool:
    """`still_good`, with the SANs wanted given."""
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
        sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except Exception:  # anything unreadable is replaced
        return False
    issuer = _issuer(certificate, authorities)
    if issuer is None or not _same_key(key, certificate) or set(sans.value) != wanted_sans:
        return False
    return _lasts(certificate, when, renew_before) and _lasts(issuer, when, renew_before)


def _signing_authority(
    key_pem: bytes, candidates: Sequence[x509.Certificate], when: datetime.datetime
) -> Authority | None:
    """The CA among `candidates` whose key `key_pem` is, if it is valid now."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except Exception:  # unreadable: a new CA is made
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        return None
    for certificate in candidates:
        if _same_key(key, certificate) and _lasts(certificate, when, datetime.timedelta(0)):
            return Authority(certificate, key)
    return None


@dataclass(frozen=True, slots=True)
class Issued:
    """What `renew` decided: the CA, the CAs to trust, and every pair, each new or kept."""

    authority: Authority
    authority_kept: bool
    # PEM: the signing CA first, then the CA it replaced while that one is still trusted.
    trust_bundle: bytes
    pairs: tuple[tuple[Pair, bool], ...]  # (pair, kept)


def renew(
    existing_authority: tuple[bytes, bytes] | None,
    existing: dict[str, tuple[bytes, bytes]],
    server_names: Sequence[str] = DEFAULT_SERVER_NAMES,
    gateways: Iterable[str] = (),
    grpc_clients: Iterable[str] = (),
    days: int = DEFAULT_DAYS,
    *,
    trusted: bytes = b"",
    renew_before: datetime.timedelta = RENEW_BEFORE,
    now: datetime.datetime | None = None,
) -> Issued:
    """Keep what is still good, make the rest: the same command run twice changes nothing.

    `existing_authority`: the CA's certificate (or a bundle holding it) and key, PEM;
    `trusted`: the bundle of CAs trusted so far, if kept apart; `existing`: certificate and
    key PEM by file stem (`server`, `fleet`, `gateway-ns-name`).

    The CA is replaced at twice `renew_before` before it expires, and the pairs it signed
    are kept until `renew_before`: for that long both CAs are trusted everywhere before any
    certificate of the new one is used. The old CA is trusted until half `renew_before`
    before it expires, after every pair it signed was replaced and before any file holds an
    expired CA.
    """
    when = now or datetime.datetime.now(datetime.UTC)
    known = pem_certificates(existing_authority[0]) if existing_authority else []
    known += pem_certificates(trusted)
    authority = (
        _signing_authority(existing_authority[1], known, when) if existing_authority else None
    )
    kept_authority = authority is not None and _lasts(authority.certificate, when, 2 * renew_before)
    if authority is None or not kept_authority:
        authority = new_authority(days=max(days, DEFAULT_DAYS), now=when)
    trusted_cas = [authority.certificate]
    for certificate in known:
        if certificate not in trusted_cas and _lasts(certificate, when, renew_before / 2):
            trusted_cas.append(certificate)
    pairs: list[tuple[Pair, bool]] = []
    for wanted in standard_pairs(authority, server_names, gateways, grpc_clients, days, when):
        found = existing.get(wanted.name)
        if found is not None and still_good(trusted_cas, *found, wanted, when, renew_before):
            pairs.append((Pair(wanted.name, found[0], found[1]), True))
        else:
            pairs.append((wanted, False))
    bundle = b"".join(_certificate_pem(certificate) for certificate in trusted_cas)
    return Issued(authority, kept_authority, bundle, tuple(pairs))


def renew_client_pair(
    authority_pem: tuple[bytes, bytes],
    existing: tuple[bytes, bytes] | None,
    name: str,
    uri: str,
    days: int,
    *,
    trusted: bytes = b"",
    renew_before: datetime.timedelta = RENEW_BEFORE,
    now: datetime.datetime | None = None,
) -> tuple[Pair, bool]:
    """One client pair, kept while still good (as `renew` keeps each pair), else issued by
    the CA `authority_pem` (its certificate, or a bundle holding it, and its key): for a CA
    managed elsewhere, which this never replaces. `trusted`: the CAs trusted besides it (a
    pair signed by one of them is kept too). Returns (pair, kept); raises ValueError when
    that CA cannot sign (no certificate valid now whose key it is)."""
    when = now or datetime.datetime.now(datetime.UTC)
    known = pem_certificates(authority_pem[0]) + pem_certificates(trusted)
    authority = _signing_authority(authority_pem[1], known, when)
    if authority is None:
        raise ValueError(
            "the key is not the EC key of a CA certificate beside it that is valid now"
        )
    trusted_cas = [authority.certificate]
    trusted_cas += [c for c in known if c != authority.certificate and _lasts(c, when, ZERO)]
    # A CA ending within the threshold cannot issue a pair that lasts longer: the pair in
    # place is kept while it is valid, instead of being issued again on every pass.
    if not _lasts(authority.certificate, when, renew_before):
        renew_before = ZERO
    sans: set[x509.GeneralName] = {x509.UniformResourceIdentifier(uri)}  # as client_pair's
    if existing is not None and _keeps(trusted_cas, *existing, sans, when, renew_before):
        return Pair(name, existing[0], existing[1]), True
    return client_pair(authority, name, uri, days, when), False


ZERO = datetime.timedelta(0)
