"""A BackendTLSPolicy's `options` of dragoman's own (`dragoman.dev/` keys): the client
certificate presented to the targeted Services, and the TLS versions, cipher suites and key
exchange groups Envoy offers them. Values are checked against what Envoy accepts, so a bad
one is refused on the policy, naming the key, and never reaches Envoy (which would reject
the whole update). Keys of other prefixes are other implementations' and are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.model import TlsCertificate, TlsParameters
from dragoman.dag.tls_certificates import tls_certificate
from dragoman.objects import BackendTLSPolicy, Secret
from dragoman.store import NamespacedName

PREFIX = "dragoman.dev/"
CLIENT_CERTIFICATE = PREFIX + "client-certificate"
MIN_TLS_VERSION = PREFIX + "min-tls-version"
MAX_TLS_VERSION = PREFIX + "max-tls-version"
CIPHER_SUITES = PREFIX + "cipher-suites"
ECDH_CURVES = PREFIX + "ecdh-curves"
KNOWN_OPTIONS = (CLIENT_CERTIFICATE, MIN_TLS_VERSION, MAX_TLS_VERSION, CIPHER_SUITES, ECDH_CURVES)

# Envoy's TlsParameters.TlsProtocol names, oldest first.
TLS_VERSIONS = ("TLSv1_0", "TLSv1_1", "TLSv1_2", "TLSv1_3")
# The minimum and the maximum Envoy offers an upstream unless told otherwise.
ENVOY_DEFAULT_VERSION = "TLSv1_2"
# The TLS 1.2-and-below cipher suites Envoy 1.40 (BoringSSL) accepts, as it names them
# (tests/envoy validates every one with the real binary). TLS 1.3 suites are not
# configurable in Envoy.
CIPHER_SUITE_NAMES = (
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-PSK-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-PSK-AES128-CBC-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "ECDHE-PSK-AES256-CBC-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "PSK-AES128-CBC-SHA",
    "AES256-SHA",
    "PSK-AES256-CBC-SHA",
    "DES-CBC3-SHA",
)
# The key exchange groups Envoy 1.40 (BoringSSL) accepts (validated alike), by their
# canonical names: BoringSSL refuses a list naming one group twice, and its aliases
# (prime256v1, secp384r1, secp521r1) would let a list do so unseen. Envoy's default offers the
# post-quantum X25519MLKEM768 first, which some middleboxes cannot parse.
ECDH_CURVE_NAMES = ("X25519MLKEM768", "X25519", "P-256", "P-384", "P-521", "MLKEM1024")

INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """What a policy's dragoman.dev/ options ask for."""

    client_certificate: TlsCertificate | None = None
    parameters: TlsParameters | None = None


@dataclass(frozen=True, slots=True)
class OptionRefusal:
    """Why the options cannot be used: the policy is then not accepted. `unresolved`: the
    client certificate Secret is at fault (ResolvedRefs=False too)."""

    message: str
    unresolved: bool = False


NO_OPTIONS = PolicyOptions()


def judge_options(
    policy: BackendTLSPolicy, secrets: Mapping[NamespacedName, Secret]
) -> PolicyOptions | OptionRefusal:
    options = policy.options
    ours = {key: value for key, value in options.items() if key.startswith(PREFIX)}
    if not ours:
        return NO_OPTIONS
    problems = [
        f"options[{key}]: unknown option (dragoman's: {', '.join(KNOWN_OPTIONS)})"
        for key in sorted(ours)
        if key not in KNOWN_OPTIONS
    ]
    parameters = _parameters(ours, problems)
    certificate: TlsCertificate | None = None
    name = ours.get(CLIENT_CERTIFICATE)
    if name is not None:
        found = _client_certificate(policy.meta.namespace, name.strip(), secrets)
        if isinstance(found, str):
            return OptionRefusal("; ".join([*problems, found]), unresolved=True)
        certificate = found
    if problems:
        return OptionRefusal("; ".join(problems))
    return PolicyOptions(certificate, parameters)


def _parameters(options: Mapping[str, str], problems: list[str]) -> TlsParameters | None:
    low = _version(options, MIN_TLS_VERSION, problems)
    high = _version(options, MAX_TLS_VERSION, problems)
    if low is not None and high is not None and _rank(low) > _rank(high):
        problems.append(
            f"options[{MIN_TLS_VERSION}] {low} is above options[{MAX_TLS_VERSION}] {high}"
        )
    ciphers = _names(options, CIPHER_SUITES, CIPHER_SUITE_NAMES, problems)
    curves = _names(options, ECDH_CURVES, ECDH_CURVE_NAMES, problems)
    if low is None and high is None and not ciphers and not curves:
        return None
    # Envoy's client defaults are TLSv1_2 at both ends: one end moved past the other's
    # default moves that one too (a minimum of TLSv1_3 alone would otherwise connect never).
    if low is not None and high is None and _rank(low) > _rank(ENVOY_DEFAULT_VERSION):
        high = low
    if high is not None and low is None and _rank(high) < _rank(ENVOY_DEFAULT_VERSION):
        low = high
    return TlsParameters(low, high, ciphers, curves)


def _rank(version: str) -> int:
    return TLS_VERSIONS.index(version)


def _version(options: Mapping[str, str], key: str, problems: list[str]) -> str | None:
    value = options.get(key)
    if value is None:
        return None
    version = value.strip()
    if version not in TLS_VERSIONS:
        problems.append(
            f"options[{key}]: {value!r} is not a TLS version ({', '.join(TLS_VERSIONS)})"
        )
        return None
    return version


def _names(
    options: Mapping[str, str], key: str, known: tuple[str, ...], problems: list[str]
) -> tuple[str, ...]:
    value = options.get(key)
    if value is None:
        return ()
    names = tuple(part.strip() for part in value.split(","))
    unknown = [name for name in names if name not in known]
    if unknown or not value.strip():
        shown = ", ".join(repr(name) for name in unknown) or "nothing"
        problems.append(
            f"options[{key}]: {shown} not known to Envoy (comma-separated, from: "
            f"{', '.join(known)})"
        )
        return ()
    if len(set(names)) != len(names):
        problems.append(f"options[{key}]: a name is given twice")
        return ()
    return names


def _client_certificate(
    namespace: str, name: str, secrets: Mapping[NamespacedName, Secret]
) -> TlsCertificate | str:
    secret = secrets.get((namespace, name))
    if secret is None:
        return f"options[{CLIENT_CERTIFICATE}]: Secret {namespace}/{name} not found"
    found = tls_certificate(secret)
    if isinstance(found, str):
        return f"options[{CLIENT_CERTIFICATE}]: {found}"
    return found
