"""Whether Envoy originates TLS to a Service port, and how.

- A BackendTLSPolicy on the port (or the Service) decides: its SNI, names and CAs.
- Without one, an ExternalName port 443 (without an appProtocol saying otherwise) or with
  `appProtocol: https` gets TLS with the external name as SNI, a certificate that must carry
  that name, and the system CAs.
- A pod-backed port with `appProtocol: https` needs a policy: there is no name to verify.
- `appProtocol: http`, `kubernetes.io/h2c` or `kubernetes.io/ws` keeps a port 443 cleartext.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.backend_tls_policy import BackendTlsPolicies
from dragoman.dag.model import UpstreamTls
from dragoman.objects import Service

TLS_PORT = 443
TLS_APP_PROTOCOLS = frozenset({"https", "kubernetes.io/wss"})
# With the endpoint's hostname as SNI and as the name the certificate must carry.
AUTO_TLS = UpstreamTls()

INVALID_BACKEND_TLS_POLICY = "InvalidBackendTLSPolicy"


@dataclass(frozen=True, slots=True)
class TlsRefusal:
    reason: str
    message: str


def upstream_tls(
    service: Service,
    port: int,
    port_name: str,
    app_protocol: str,
    policies: BackendTlsPolicies,
    *,
    automatic: bool = True,
) -> UpstreamTls | TlsRefusal | None:
    """The TLS Envoy uses to reach `port` of `service`; None for cleartext.

    `automatic` False: only a BackendTLSPolicy turns TLS on (connections proxied whole)."""
    meta = service.meta
    verdict = policies.for_port(meta.namespace, meta.name, port_name) if policies else None
    if verdict is not None:
        if verdict.tls is not None:
            return verdict.tls
        reason = verdict.invalid[1] if verdict.invalid else "it cannot be used"
        key = verdict.key
        return TlsRefusal(
            INVALID_BACKEND_TLS_POLICY,
            f"port {port} is governed by BackendTLSPolicy {key.namespace}/{key.name}, which "
            f"cannot be used ({reason}); requests to it fail",
        )
    if not automatic:
        return None
    app = app_protocol.lower()
    if app in TLS_APP_PROTOCOLS:
        if service.is_external_name:
            return AUTO_TLS
        return TlsRefusal(
            "UnsupportedProtocol",
            f"port {port} declares appProtocol {app_protocol!r}: TLS to pods needs a "
            "BackendTLSPolicy naming the hostname their certificate must carry",
        )
    if port == TLS_PORT and not app and service.is_external_name:
        return AUTO_TLS
    return None
