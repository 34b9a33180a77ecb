"""XBackend (gateway.networking.x-k8s.io/v1alpha1, GEP-4894): an external host named as a
route's backend, with the port, protocol and TLS Envoy uses to reach it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dragoman.objects.backend_tls import CACertificateRef, SubjectAltName
from dragoman.objects.gateway import CertificateRef
from dragoman.objects.meta import KindObject, ObjectMeta

XBACKEND_GROUP = "gateway.networking.x-k8s.io"
EXTERNAL_HOSTNAME = "ExternalHostname"

# spec.protocol: None (unset) lets the route decide.
XBackendProtocol = Literal["TCP", "HTTP", "HTTP2", "HTTP11", "H2C", "MCP"]
XBACKEND_PROTOCOLS: tuple[XBackendProtocol, ...] = get_args(XBackendProtocol)
# spec.tls.mode.
TlsMode = Literal["None", "ServerOnly", "ClientAndServer"]
TLS_MODES: tuple[TlsMode, ...] = get_args(TlsMode)


@dataclass(frozen=True, slots=True)
class XBackendValidation:
    """spec.tls.validation: as a BackendTLSPolicy's validation."""

    hostname: str
    ca_certificate_refs: tuple[CACertificateRef, ...] = ()
    well_known_ca_certificates: str | None = None
    subject_alt_names: tuple[SubjectAltName, ...] = ()


@dataclass(frozen=True, slots=True)
class XBackendTls:
    mode: TlsMode
    client_certificate_ref: CertificateRef | None = None
    validation: XBackendValidation | None = None


@dataclass(frozen=True, slots=True)
class XBackend(KindObject):
    kind: ClassVar[str] = "XBackend"

    meta: ObjectMeta
    type: str = EXTERNAL_HOSTNAME
    hostname: str = ""  # spec.externalHostname.hostname, as written
    port: int = 0  # spec.port.port
    port_name: str = ""  # spec.port.name
    protocol: XBackendProtocol | None = None
    tls: XBackendTls | None = None
