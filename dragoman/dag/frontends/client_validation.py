"""A Gateway's spec.tls.frontend: the client certificates its TLS-terminating listeners ask
for (GEP-91). The configuration of a listener's port (perPort) applies, else the default.

It applies to every listener that terminates TLS (HTTPS, and TLS in Terminate mode), the
Gateway's own and those its ListenerSets add: a port's TLS handshake is shared by every
listener on it. CA certificates come from ConfigMaps or Secrets (key `ca.crt`, read as for
BackendTLSPolicies); across namespaces only with a ReferenceGrant. A listener with some
invalid references has ResolvedRefs False and uses the others; with none valid it is not
accepted (NoValidCACertificate) and not served, so no client ever gets through unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.backend_tls_policy import CA_KINDS, bundle_not_after, ca_bundle
from dragoman.dag.context import BuildContext
from dragoman.dag.model import ClientValidation
from dragoman.dag.reference_grants import Referrer, Target, not_permitted_message
from dragoman.objects import Gateway, ObjectKey
from dragoman.objects.gateway import (
    ALLOW_INSECURE_FALLBACK,
    GATEWAY_GROUP,
    FrontendValidation,
)

# Listener condition reasons (gateway.networking.k8s.io/v1 ListenerConditionReason).
NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
REF_NOT_PERMITTED = "RefNotPermitted"
# The Gateway condition set while some configuration lets clients through unchecked.
INSECURE_FRONTEND_VALIDATION_MODE = "InsecureFrontendValidationMode"
CONFIGURATION_CHANGED = "ConfigurationChanged"


@dataclass(frozen=True, slots=True)
class ValidationProblem:
    field: str  # in the Gateway, e.g. spec.tls.frontend.default.validation.caCertificateRefs[0]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ValidationVerdict:
    """The validation one listener port gets: None when no reference is valid (the listener
    must not be served), with the problems of the references that are not."""

    validation: ClientValidation | None
    field: str  # the configuration's, e.g. spec.tls.frontend.perPort[0].tls.validation
    problems: tuple[ValidationProblem, ...] = ()


def client_ca_name(gateway: ObjectKey, port: int) -> str:
    """The SDS name of a Gateway port's validation context. Never a Secret's `ns/name`."""
    return f"client-ca/{gateway.namespace}/{gateway.name}/{port}"


def client_validation(
    gateway: Gateway, port: int, context: BuildContext
) -> ValidationVerdict | None:
    """What `gateway` asks of clients' certificates on `port`; None when it asks nothing."""
    frontend = gateway.frontend_tls
    if frontend is None:
        return None
    config = frontend.for_port(port)
    if not config.ca_certificate_refs:
        return None
    at = f"{config.field}.validation"
    bundles: list[bytes] = []
    problems: list[ValidationProblem] = []
    for index in range(len(config.ca_certificate_refs)):
        field = f"{at}.caCertificateRefs[{index}]"
        found = _bundle(gateway, config, index, context)
        if isinstance(found, bytes):
            bundles.append(found)
        else:
            reason, message = found
            problems.append(ValidationProblem(field, reason, f"{field}: {message}"))
    if not bundles:
        return ValidationVerdict(None, at, tuple(problems))
    trusted = b"".join(b if b.endswith(b"\n") else b + b"\n" for b in bundles)
    validation = ClientValidation(
        name=client_ca_name(gateway.key, port),
        trusted_ca=trusted,
        insecure_fallback=config.mode == ALLOW_INSECURE_FALLBACK,
        # Each bundle was read by ca_bundle's check just now (memoised): not parsed again.
        not_after=min(bundle_not_after(bundle) or 0.0 for bundle in bundles),
    )
    return ValidationVerdict(validation, at, tuple(problems))


def _bundle(
    gateway: Gateway, config: FrontendValidation, index: int, context: BuildContext
) -> bytes | tuple[str, str]:
    ref = config.ca_certificate_refs[index]
    if ref.group != "" or ref.kind not in CA_KINDS:
        shown = f"{ref.group}/{ref.kind}" if ref.group else ref.kind
        return (
            INVALID_CA_CERTIFICATE_KIND,
            f"kind {shown!r} is not supported; use a core ConfigMap or Secret holding 'ca.crt'",
        )
    namespace = ref.namespace or gateway.meta.namespace
    referrer = Referrer(GATEWAY_GROUP, "Gateway", gateway.meta.namespace)
    target = Target(ref.group, ref.kind, namespace, ref.name)
    if not context.grants.permits(referrer, target):
        return REF_NOT_PERMITTED, not_permitted_message(referrer, target)
    store = context.store
    return ca_bundle(namespace, ref.group, ref.kind, ref.name, store.config_maps, store.secrets)


def insecure_fields(gateway: Gateway) -> tuple[str, ...]:
    """Where the Gateway lets clients through without a valid certificate (the fields of
    its AllowInsecureFallback configurations)."""
    frontend = gateway.frontend_tls
    if frontend is None:
        return ()
    configs = (frontend.default, *(config for _, config in frontend.per_port))
    return tuple(
        config.field
        for config in configs
        if config.ca_certificate_refs and config.mode == ALLOW_INSECURE_FALLBACK
    )
