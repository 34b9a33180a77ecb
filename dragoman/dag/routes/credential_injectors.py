"""CredentialInjectors judged: the header each one adds and the value it reads from its
Secret (or, for OAuth2, the client secret and the cluster of the token endpoint), or why it
cannot add it (the field at fault, a reason and a message, which never quote the value).

Judged once per injector, for the routes that name it (dag/routes/actions.py) and for the
injector's own status (dag/status/credential_injectors.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import (
    AggregateCluster,
    Cluster,
    DnsCluster,
    InjectedCredential,
    OAuth2Grant,
    Problem,
)
from dragoman.dag.routes.backends import resolve_backend_ref
from dragoman.dag.routes.envoy_strings import header_name_problem, header_value_problem
from dragoman.objects import CredentialInjector, CredentialSecretRef, OAuth2ClientCredentials
from dragoman.store import Store

# Reasons of the injector's ResolvedRefs condition (and of the routes that name it).
SECRET_NOT_FOUND = "SecretNotFound"
REF_NOT_PERMITTED = "RefNotPermitted"
INVALID_CREDENTIAL = "InvalidCredential"


@dataclass(frozen=True, slots=True)
class InjectorRefusal:
    """Why an injector adds nothing: `field` of the injector, `reason`, `message`."""

    field: str
    reason: str
    message: str
    # The spec itself is wrong (Accepted False), not only what it refers to.
    spec: bool = False


@dataclass(frozen=True, slots=True)
class JudgedInjector:
    """What an injector adds, and the cluster its OAuth2 token endpoint is served by (None
    for a static credential), with what of that backend is not served as it asks."""

    credential: InjectedCredential
    token_cluster: Cluster | None = None
    warnings: tuple[str, ...] = ()


def judged_injector(
    injector: CredentialInjector, context: BuildContext
) -> JudgedInjector | InjectorRefusal:
    """The credential `injector` adds, read from its Secret, or why it cannot."""
    name_problem = (
        "the Host header cannot carry a credential"
        if injector.header.lower() == "host"
        else header_name_problem(injector.header, editable_host=True)
    )
    if name_problem is not None:
        return InjectorRefusal("spec.header", "Invalid", name_problem, spec=True)
    if injector.oauth2 is not None:
        return _judged_oauth2(injector, injector.oauth2, context)
    ref = injector.secret_ref
    if ref is None:
        return InjectorRefusal("spec.secretRef", "Invalid", "is required", spec=True)
    value = _secret_value(injector, ref, "spec.secretRef", context.store)
    if isinstance(value, InjectorRefusal):
        return value
    credential = InjectedCredential(
        name=f"{injector.meta.namespace}/{injector.meta.name}",
        header=injector.header,
        overwrite=injector.overwrite,
        value=value,
    )
    return JudgedInjector(credential)


def _secret_value(
    injector: CredentialInjector, ref: CredentialSecretRef, field: str, store: Store
) -> bytes | InjectorRefusal:
    """The value `ref` (at `field`) names in the injector's namespace, or why it cannot be
    sent."""
    namespace = injector.meta.namespace
    if ref.namespace is not None and ref.namespace != namespace:
        return InjectorRefusal(
            f"{field}.namespace",
            REF_NOT_PERMITTED,
            f"the Secret must be in the injector's own namespace ({namespace}), not "
            f"{ref.namespace}: credentials are not read across namespaces",
        )
    secret = store.secrets.get((namespace, ref.name))
    if secret is None:
        return InjectorRefusal(
            f"{field}.name", SECRET_NOT_FOUND, f"Secret {namespace}/{ref.name} not found"
        )
    value = secret.data.get(ref.key)
    if value is None:
        return InjectorRefusal(
            f"{field}.key",
            SECRET_NOT_FOUND,
            f"Secret {namespace}/{ref.name} has no key {ref.key!r}",
        )
    why = _value_problem(value)
    if why is not None:
        return InjectorRefusal(
            f"{field}.key",
            INVALID_CREDENTIAL,
            f"the value of key {ref.key!r} of Secret {namespace}/{ref.name} {why}",
        )
    return value


def _judged_oauth2(
    injector: CredentialInjector, oauth2: OAuth2ClientCredentials, context: BuildContext
) -> JudgedInjector | InjectorRefusal:
    """An OAuth2 injector: its client secret and its token endpoint's cluster, or why not.
    (Its header is Authorization and it has no secretRef: the parser sees to both.)"""
    secret = _secret_value(
        injector, oauth2.client_secret_ref, "spec.oauth2.clientSecretRef", context.store
    )
    if isinstance(secret, InjectorRefusal):
        return secret
    endpoint = oauth2.token_endpoint
    field = "spec.oauth2.tokenEndpoint.backendRef"
    namespace = injector.meta.namespace
    ref = endpoint.backend_ref
    if ref.namespace is not None and ref.namespace != namespace:
        return InjectorRefusal(
            f"{field}.namespace",
            REF_NOT_PERMITTED,
            f"the token endpoint must be in the injector's own namespace ({namespace}), not "
            f"{ref.namespace}",
        )
    resolved = resolve_backend_ref(injector, field, ref, context)
    if isinstance(resolved, Problem):
        return InjectorRefusal(resolved.field, resolved.reason, resolved.message)
    cluster = resolved.cluster
    grant = OAuth2Grant(
        token_uri=_token_uri(cluster, endpoint.path, context),
        cluster=cluster.name,
        timeout_ms=round(endpoint.timeout_s * 1000),
        client_id=oauth2.client_id,
        scopes=oauth2.scopes,
        retry_interval_ms=None
        if oauth2.token_fetch_retry_interval_s is None
        else round(oauth2.token_fetch_retry_interval_s * 1000),
    )
    credential = InjectedCredential(
        name=f"{namespace}/{injector.meta.name}",
        header=injector.header,
        overwrite=injector.overwrite,
        value=secret,
        oauth2=grant,
    )
    return JudgedInjector(credential, cluster, resolved.warnings)


def _token_uri(cluster: Cluster, path: str, context: BuildContext) -> str:
    """The URI Envoy's token request is made of: its host is the request's Host header (and
    the SNI and the name the certificate must carry, for a TLS cluster without its own)."""
    leaf = cluster.children[0] if isinstance(cluster, AggregateCluster) else cluster
    if leaf.tls is not None and leaf.tls.sni is not None:
        host = leaf.tls.sni
    elif isinstance(leaf, DnsCluster):
        host = leaf.hostname
    else:
        service = leaf.service
        host = f"{service.name}.{service.namespace}.svc.{context.options.cluster_domain}"
    scheme = "https" if leaf.tls is not None else "http"
    default_port = 443 if leaf.tls is not None else 80
    authority = host if leaf.port == default_port else f"{host}:{leaf.port}"
    return f"{scheme}://{authority}{path}"


def _value_problem(value: bytes) -> str | None:
    """Why Envoy could not send `value` as a header value (never quoting it), or None."""
    if not value:
        return "is empty"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    why = header_value_problem(text)
    if why is not None and text.endswith("\n"):
        return why + " (it ends with a newline: was the Secret made from a file?)"
    return why
