"""Client identities: the URI SANs of the certificates xDS and CSDS clients present.

A platform team can issue the same identities with any CA (cert-manager, say): a client
certificate carries one of these URIs as a subject alternative name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

TRUST_DOMAIN = "dragoman.dev"
PREFIX = f"spiffe://{TRUST_DOMAIN}/"
FLEET = PREFIX + "fleet"
ADMIN = PREFIX + "admin"
GATEWAY_PREFIX = PREFIX + "gateway/"
GRPC_PREFIX = PREFIX + "grpc/"

# A DNS label (Kubernetes namespace) and a DNS subdomain (Gateway name).
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN = rf"{_LABEL}(\.{_LABEL})*"
_GATEWAY = re.compile(rf"({_LABEL})/({_SUBDOMAIN})")
_GRPC_NAME = re.compile(r"[A-Za-z0-9][-._A-Za-z0-9]{0,252}")


class Role(Enum):
    FLEET = "fleet"  # any node group, Envoy or proxyless gRPC
    ADMIN = "admin"  # CSDS and `dragoman clients` only
    GATEWAY = "gateway"  # one Gateway's node group
    GRPC = "grpc"  # proxyless gRPC variants of any group


@dataclass(frozen=True, slots=True)
class Identity:
    role: Role
    uri: str
    gateway: str = ""  # "<namespace>/<name>" for Role.GATEWAY

    def __str__(self) -> str:
        return self.uri


def gateway_uri(gateway: str) -> str:
    """The identity of the Envoys of Gateway `namespace/name`."""
    if not _GATEWAY.fullmatch(gateway):
        raise ValueError(f"expected a Gateway as NAMESPACE/NAME, got {gateway!r}")
    return GATEWAY_PREFIX + gateway


def grpc_uri(name: str) -> str:
    """The identity of a proxyless gRPC client called `name`."""
    if not _GRPC_NAME.fullmatch(name):
        raise ValueError(f"expected a name of letters, digits, '-', '.', '_', got {name!r}")
    return GRPC_PREFIX + name


def parse_identity(uri: str) -> Identity | None:
    """The identity a URI SAN names, or None if it names none of dragoman's."""
    if uri == FLEET:
        return Identity(Role.FLEET, uri)
    if uri == ADMIN:
        return Identity(Role.ADMIN, uri)
    if uri.startswith(GATEWAY_PREFIX):
        gateway = uri[len(GATEWAY_PREFIX) :]
        if _GATEWAY.fullmatch(gateway):
            return Identity(Role.GATEWAY, uri, gateway=gateway)
        return None
    if uri.startswith(GRPC_PREFIX) and _GRPC_NAME.fullmatch(uri[len(GRPC_PREFIX) :]):
        return Identity(Role.GRPC, uri)
    return None


def identity_of(uris: list[str]) -> Identity | None:
    """The one identity among a certificate's URI SANs; None if none, or several disagree
    (a certificate naming two identities is ambiguous, so it gets neither)."""
    found = {identity for identity in map(parse_identity, uris) if identity is not None}
    return found.pop() if len(found) == 1 else None
