"""The certificate a clientCertificateRef names (a Gateway's spec.tls.backend, an
XBackend's spec.tls): the Secret it names, where a ReferenceGrant allows it, checked as Envoy
checks a certificate and its key."""

from __future__ import annotations

from dragoman.dag.context import BuildContext
from dragoman.dag.model import TlsCertificate
from dragoman.dag.reference_grants import Referrer, Target, not_permitted_message
from dragoman.dag.tls_certificates import tls_certificate
from dragoman.objects import CertificateRef

INVALID = "InvalidClientCertificateRef"


def referenced_certificate(
    ref: CertificateRef, referrer: Referrer, context: BuildContext
) -> TlsCertificate | tuple[str, str]:
    """The certificate a clientCertificateRef names (a Gateway's, an XBackend's), or (reason,
    message) saying why it cannot be used: another kind, another namespace without a
    ReferenceGrant, a missing or unusable Secret."""
    if (ref.group, ref.kind) != ("", "Secret"):
        kind = f"{ref.group}/{ref.kind}" if ref.group else ref.kind
        return (
            INVALID,
            f"kind {kind!r} is not supported; only core Secrets (group '', kind 'Secret')",
        )
    namespace = ref.namespace or referrer.namespace
    target = Target(ref.group, ref.kind, namespace, ref.name)
    if not context.grants.permits(referrer, target):
        return "RefNotPermitted", not_permitted_message(referrer, target)
    secret = context.store.secrets.get((namespace, ref.name))
    if secret is None:
        return INVALID, f"Secret {namespace}/{ref.name} not found"
    certificate = tls_certificate(secret)
    if isinstance(certificate, str):
        return INVALID, certificate
    return certificate
