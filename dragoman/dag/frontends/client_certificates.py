"""A Gateway's spec.tls.backend.clientCertificateRef: the certificate and key Envoy presents
to backends it reaches over TLS that ask for one (mutual TLS to an external API).

Invalid references are reported on the Gateway (ResolvedRefs=False, reason
InvalidClientCertificateRef or RefNotPermitted); Envoy then presents no certificate.
"""

from __future__ import annotations

from dragoman.dag.certificate_refs import referenced_certificate
from dragoman.dag.context import BuildContext
from dragoman.dag.model import Problem, TlsCertificate
from dragoman.dag.reference_grants import Referrer
from dragoman.objects import Gateway
from dragoman.objects.gateway import GATEWAY_GROUP

FIELD = "spec.tls.backend.clientCertificateRef"


def client_certificate(gateway: Gateway, context: BuildContext) -> TlsCertificate | Problem | None:
    """The certificate, why it cannot be used, or None when the Gateway names none."""
    ref = gateway.backend_client_certificate
    if ref is None:
        return None
    referrer = Referrer(GATEWAY_GROUP, "Gateway", gateway.meta.namespace)
    found = referenced_certificate(ref, referrer, context)
    if isinstance(found, TlsCertificate):
        return found
    reason, message = found
    return Problem(gateway.key, FIELD, reason, f"clientCertificateRef: {message}")
