"""When the certificates dragoman serves or uses expire: its own xDS server certificate and
the CAs it trusts for clients, the certificates it serves over SDS (Gateway listeners', the
CAs they validate clients' certificates with, and those clusters present to backends), and
the CA bundles clusters validate their backends' certificates with (a BackendTLSPolicy's
caCertificateRefs, an XBackend's spec.tls.validation).

Every expiry was read when the certificate was checked (the DAG's `TlsCertificate`, the xDS
files' `TlsMaterial`) and is carried here as a value: nothing is parsed again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dragoman.dag.model import Dag, HttpsListener, TcpListener, TlsCertificate
from dragoman.security.files import TlsFiles, TlsMaterial

XDS_SERVER = "xds_server"  # dragoman's own serving certificate (chain)
XDS_CLIENT_CA = "xds_client_ca"  # a CA it trusts to sign xDS clients' certificates
GATEWAY_LISTENER = "gateway_listener"  # a Secret a Gateway listener terminates TLS with
GATEWAY_CLIENT_CA = "gateway_client_ca"  # the CAs a Gateway port validates clients with
BACKEND_CLIENT = "backend_client"  # a Secret a cluster presents to its backends
BACKEND_CA = "backend_ca"  # the CAs a cluster validates its backends' certificates with
KINDS = (
    XDS_SERVER,
    XDS_CLIENT_CA,
    GATEWAY_LISTENER,
    GATEWAY_CLIENT_CA,
    BACKEND_CLIENT,
    BACKEND_CA,
)


@dataclass(frozen=True, slots=True, order=True)
class CertificateExpiry:
    kind: str  # one of KINDS
    name: str  # a Secret's `namespace/name`, a file, or a CA's subject
    not_after: float  # Unix seconds


def xds_expiries(files: TlsFiles, material: TlsMaterial) -> list[CertificateExpiry]:
    """The xDS server's certificate and each CA of its client CA bundle."""
    found = [CertificateExpiry(XDS_SERVER, str(files.certificate), material.not_after)]
    found += (
        CertificateExpiry(XDS_CLIENT_CA, subject, not_after)
        for subject, not_after in material.authorities
    )
    return found


def dag_expiries(dag: Dag | None) -> list[CertificateExpiry]:
    """Every certificate the DAG serves over SDS or validates backends with, once each (by
    kind and name)."""
    if dag is None:
        return []
    found = {(kind, name): not_after for kind, name, not_after in _dag_certificates(dag)}
    return [CertificateExpiry(kind, name, when) for (kind, name), when in sorted(found.items())]


def _dag_certificates(dag: Dag) -> Iterator[tuple[str, str, float]]:
    """(kind, name, not-after) of each certificate in the DAG, repeated where shared."""
    seen: set[int] = set()  # groups share their listeners: each walked once
    for group in dag.groups.values():
        for listener in group.listeners:
            if id(listener) in seen or not isinstance(listener, HttpsListener | TcpListener):
                continue
            seen.add(id(listener))
            for chain in listener.filter_chains:
                for certificate in chain.certificates:
                    yield GATEWAY_LISTENER, _secret_name(certificate), certificate.not_after
                validation = chain.client_validation
                if validation is not None:
                    name = validation.name.removeprefix("client-ca/")  # namespace/gateway/port
                    yield GATEWAY_CLIENT_CA, name, validation.not_after
    for cluster in dag.clusters.values():
        tls = getattr(cluster, "tls", None)  # an aggregate's TLS is its children's
        if tls is None:
            continue
        if tls.client_certificate is not None:
            certificate = tls.client_certificate
            yield BACKEND_CLIENT, _secret_name(certificate), certificate.not_after
        if tls.trusted_ca is not None and tls.policy is not None:
            yield BACKEND_CA, str(tls.policy), tls.ca_not_after


def _secret_name(certificate: TlsCertificate) -> str:
    return f"{certificate.secret.namespace}/{certificate.secret.name}"


def soonest(expiries: Iterable[CertificateExpiry]) -> float | None:
    """The first not-after among `expiries`; None when there are none."""
    return min((expiry.not_after for expiry in expiries), default=None)
