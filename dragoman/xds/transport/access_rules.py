"""What a connected client may receive, decided by its certificate's identity.

A pure rule (no I/O): the node's own claim (`node.cluster`) is never trusted alone. Without
TLS (plaintext on loopback, or an explicit insecure flag) there is no identity and every
client may do everything, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.security.identities import Identity, Role


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a client is refused (the gRPC status is PERMISSION_DENIED)."""

    message: str


@dataclass(frozen=True, slots=True)
class Grant:
    """A client may be served; `group` set: always this node group, whatever it claims."""

    group: str | None = None


def xds_access(
    identity: Identity | None, authenticated: bool, node_cluster: str, grpc_client: bool
) -> Grant | Refusal:
    """Whether a client may receive xDS resources, and which group.

    `authenticated`: the connection is mutual TLS (then `identity` None means a certificate
    that names no identity of dragoman's).
    """
    if not authenticated:
        return Grant()
    if identity is None:
        return Refusal("the client certificate names no dragoman identity (URI SAN)")
    if identity.role is Role.FLEET:
        return Grant()
    if identity.role is Role.ADMIN:
        return Refusal(f"identity {identity} may use CSDS only, not receive configuration")
    if identity.role is Role.GRPC:
        if not grpc_client:
            return Refusal(
                f"identity {identity} may receive proxyless gRPC configuration only, and the "
                "node is not a gRPC client"
            )
        return Grant()
    if node_cluster != identity.gateway:
        return Refusal(
            f"identity {identity} may receive Gateway {identity.gateway} only; the node "
            f"claims cluster {node_cluster!r}"
        )
    return Grant(group=identity.gateway)


def csds_access(identity: Identity | None, authenticated: bool) -> Refusal | None:
    """None if the client may use CSDS (and so `dragoman clients`)."""
    if not authenticated:
        return None
    if identity is not None and identity.role is Role.ADMIN:
        return None
    named = f"identity {identity}" if identity is not None else "a certificate with no identity"
    return Refusal(f"{named} may not use CSDS; only spiffe://dragoman.dev/admin may")
