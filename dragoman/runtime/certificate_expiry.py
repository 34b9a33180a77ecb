"""When the certificates dragoman serves or uses expire: its own xDS server certificate and
the CAs it trusts for clients, and the certificates it serves over SDS (Gateway listeners',
the CAs they validate clients' certificates with, and those clusters present to backends).

Every expiry was read when the certificate was checked (the DAG's `TlsCertificate`, the xDS
files' `TlsMaterial`) and is carried here as a value: nothing is parsed again.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from dragoman.dag.model import ClientValidation, Dag, HttpsListener, TcpListener, TlsCertificate
from dragoman.security.files import TlsFiles, TlsMaterial

XDS_SERVER = "xds_server"  # dragoman's own serving certificate (chain)
XDS_CLIENT_CA = "xds_client_ca"  # a CA it trusts to sign xDS clients' certificates
GATEWAY_LISTENER = "gateway_listener"  # a Secret a Gateway listener terminates TLS with
GATEWAY_CLIENT_CA = "gateway_client_ca"  # the CAs a Gateway port validates clients with
BACKEND_CLIENT = "backend_client"  # a Secret a cluster presents to its backends
KINDS = (XDS_SERVER, XDS_CLIENT_CA, GATEWAY_LISTENER, GATEWAY_CLIENT_CA, BACKEND_CLIENT)


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
    """Every certificate the DAG serves over SDS, once each (by kind and Secret)."""
    if dag is None:
        return []
    found: dict[tuple[str, str], float] = {}
    for kind, value in _dag_certificates(dag):
        if isinstance(value, ClientValidation):
            name = value.name.removeprefix("client-ca/")  # namespace/gateway/port
        else:
            name = f"{value.secret.namespace}/{value.secret.name}"
        found[(kind, name)] = value.not_after
    return [CertificateExpiry(kind, name, when) for (kind, name), when in sorted(found.items())]


def _dag_certificates(dag: Dag) -> Iterator[tuple[str, TlsCertificate | ClientValidation]]:
    seen: set[int] = set()  # groups share their listeners: each walked once
    for group in dag.groups.values():
        for listener in group.listeners:
            if id(listener) in seen or not isinstance(listener, HttpsListener | TcpListener):
                continue
            seen.add(id(listener))
            for chain in listener.filter_chains:
                for certificate in chain.certificates:
                    yield GATEWAY_LISTENER, certificate
                if chain.client_validation is not None:
                    yield GATEWAY_CLIENT_CA, chain.client_validation
    for cluster in dag.clusters.values():
        tls = getattr(cluster, "tls", None)  # an aggregate's TLS is its children's
        if tls is not None and tls.client_certificate is not None:
            yield BACKEND_CLIENT, tls.client_certificate


def soonest(expiries: Iterable[CertificateExpiry]) -> float | None:
    """The first not-after among `expiries`; None when there are none."""
    return min((expiry.not_after for expiry in expiries), default=None)
