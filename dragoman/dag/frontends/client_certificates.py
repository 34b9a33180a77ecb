"""A Gateway's spec.tls.backend.clientCertificateRef: the certificate and key Envoy presents
to backends it reaches over TLS that ask for one (mutual TLS to an external API).

Invalid references are reported on the Gateway (ResolvedRefs=False, reason
InvalidClientCertificateRef or RefNotPermitted); Envoy then presents no certificate.
"""

from __future__ import annotations

from dragoman.dag.context import BuildContext
from dragoman.dag.frontends.certificates import tls_certificate
from dragoman.dag.model import Problem, TlsCertificate
from dragoman.dag.reference_grants import Referrer, Target, not_permitted_message
from dragoman.objects import Gateway
from dragoman.objects.gateway import GATEWAY_GROUP

FIELD = "spec.tls.backend.clientCertificateRef"
INVALID = "InvalidClientCertificateRef"


def client_certificate(gateway: Gateway, context: BuildContext) -> TlsCertificate | Problem | None:
    """The certificate, why it cannot be used, or None when the Gateway names none."""
    ref = gateway.backend_client_certificate
    if ref is None:
        return None

    def problem(reason: str, message: str) -> Problem:
        return Problem(gateway.key, FIELD, reason, f"clientCertificateRef: {message}")

    if (ref.group, ref.kind) != ("", "Secret"):
        kind = f"{ref.group}/{ref.kind}" if ref.group else ref.kind
        return problem(
            INVALID, f"kind {kind!r} is not supported; only core Secrets (group '', kind 'Secret')"
        )
    namespace = ref.namespace or gateway.meta.namespace
    referrer = Referrer(GATEWAY_GROUP, "Gateway", gateway.meta.namespace)
    target = Target(ref.group, ref.kind, namespace, ref.name)
    if not context.grants.permits(referrer, target):
        return problem("RefNotPermitted", not_permitted_message(referrer, target))
    secret = context.store.secrets.get((namespace, ref.name))
    if secret is None:
        return problem(INVALID, f"Secret {namespace}/{ref.name} not found")
    certificate = tls_certificate(secret)
    if isinstance(certificate, str):
        return problem(INVALID, certificate)
    return certificate
