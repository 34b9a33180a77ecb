"""BackendTLSPolicy (gateway.networking.k8s.io/v1): how a Gateway connects to a Service's
port over TLS: the name to send (SNI) and verify, and the certificate authorities to trust."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, get_args

from dragoman.objects.meta import KindObject, ObjectMeta, no_entries

# validation.wellKnownCACertificates: the system's trusted CA bundle.
WELL_KNOWN_SYSTEM = "System"
# subjectAltNames[].type values.
SubjectAltNameType = Literal["Hostname", "URI"]
SAN_TYPES: tuple[SubjectAltNameType, ...] = get_args(SubjectAltNameType)
SAN_HOSTNAME: Final = "Hostname"
SAN_URI: Final = "URI"


@dataclass(frozen=True, slots=True)
class PolicyTargetRef:
    """A targetRefs entry: the object (and optionally the port, by name) the policy applies to."""

    name: str
    group: str = ""
    kind: str = "Service"
    section_name: str | None = None  # a Service port name; None: every port


@dataclass(frozen=True, slots=True)
class CACertificateRef:
    """A validation.caCertificateRefs entry, always in the policy's own namespace."""

    name: str
    group: str = ""
    kind: str = "ConfigMap"


@dataclass(frozen=True, slots=True)
class SubjectAltName:
    type: SubjectAltNameType
    value: str  # the hostname (possibly "*.example.com") or the URI


@dataclass(frozen=True, slots=True)
class BackendTLSPolicy(KindObject):
    kind: ClassVar[str] = "BackendTLSPolicy"

    meta: ObjectMeta
    target_refs: tuple[PolicyTargetRef, ...] = ()
    # validation.hostname: the SNI sent, and the name verified unless subjectAltNames are given.
    hostname: str = ""
    ca_certificate_refs: tuple[CACertificateRef, ...] = ()
    well_known_ca_certificates: str | None = None
    subject_alt_names: tuple[SubjectAltName, ...] = ()
    options: Mapping[str, str] = field(default_factory=no_entries)
