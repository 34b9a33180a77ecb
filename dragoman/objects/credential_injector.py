"""CredentialInjector (dragoman.dev/v1alpha1): a header whose value, read from a Secret in
the injector's own namespace (or an OAuth2 access token Envoy fetches with the client
credentials grant), Envoy adds to the requests of the route rules whose `ExtensionRef`
filter names the injector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.gateway import BackendRef
from dragoman.objects.meta import KindObject, ObjectMeta

CREDENTIAL_INJECTOR = "CredentialInjector"
DEFAULT_CREDENTIAL_HEADER = "Authorization"
DEFAULT_TOKEN_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class CredentialSecretRef:
    """spec.secretRef: the Secret and the key of its data that holds the header's value."""

    name: str
    key: str
    # Written only to be refused when it names another namespace: the Secret must be in the
    # injector's own namespace. None: not written.
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class TokenEndpoint:
    """spec.oauth2.tokenEndpoint: the backend that answers the token request, and the path
    the request is POSTed to."""

    backend_ref: BackendRef  # a Service (with its port) or an XBackend, in the same namespace
    path: str
    timeout_s: float = DEFAULT_TOKEN_TIMEOUT_S


@dataclass(frozen=True, slots=True)
class OAuth2ClientCredentials:
    """spec.oauth2: Envoy fetches an access token with the client credentials grant
    (RFC 6749 section 4.4) and sends it as `Authorization: Bearer <token>`."""

    token_endpoint: TokenEndpoint
    client_id: str
    client_secret_ref: CredentialSecretRef  # the client secret, read from a Secret
    scopes: tuple[str, ...] = ()
    # How long Envoy waits before fetching again after a failed fetch; None: Envoy's 2s.
    token_fetch_retry_interval_s: float | None = None


@dataclass(frozen=True, slots=True)
class CredentialInjector(KindObject):
    kind: ClassVar[str] = CREDENTIAL_INJECTOR

    meta: ObjectMeta
    # Exactly one of secret_ref and oauth2 (both None only when the object is refused).
    secret_ref: CredentialSecretRef | None = None
    header: str = DEFAULT_CREDENTIAL_HEADER
    overwrite: bool = False  # replace a value the client sent; False keeps the client's
    oauth2: OAuth2ClientCredentials | None = None
