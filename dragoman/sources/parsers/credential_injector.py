"""CredentialInjector (dragoman.dev/v1alpha1) from decoded manifests, validated as its CRD
(deploy/00-crd-credentialinjectors.yaml) validates it.

What the CRD accepts but dragoman cannot use (a Secret or key that does not exist, a Secret
in another namespace, a value Envoy could not send, a token endpoint that cannot be
reached) is not a parse error: the build reports it in the injector's status and on the
routes that name it.
"""

from __future__ import annotations

import re

from dragoman.objects import (
    BackendRef,
    CredentialInjector,
    CredentialSecretRef,
    OAuth2ClientCredentials,
    ObjectMeta,
    TokenEndpoint,
)
from dragoman.objects.credential_injector import (
    DEFAULT_CREDENTIAL_HEADER,
    DEFAULT_TOKEN_TIMEOUT_S,
)
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, DNS1123_SUBDOMAIN, GROUP, KIND, Format
from dragoman.sources.parsers.backend_policy import duration
from dragoman.sources.parsers.route_parts import HEADER_NAME

# What Kubernetes allows as a key of a Secret's data.
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
SECRET_KEY = Format(
    'a key of a Secret\'s data such as "token" (letters, digits, "-", "_" and ".")',
    lambda value: len(value) <= 253 and _SECRET_KEY.fullmatch(value) is not None,
)
# RFC 6749: a client_id is visible ASCII (spaces left out: Envoy sends it as it is), and a
# scope token is visible ASCII but '"' and '\' (scopes are sent space-separated).
CLIENT_ID = Format(
    'an OAuth2 client identifier such as "my-client" (visible ASCII, no spaces, at most 256)',
    lambda value: re.fullmatch(r"[\x21-\x7e]{1,256}", value) is not None,
)
SCOPE = Format(
    "an OAuth2 scope such as \"read:orders\" (visible ASCII but '\"' and '\\', no spaces)",
    lambda value: re.fullmatch(r"[\x21\x23-\x5b\x5d-\x7e]{1,256}", value) is not None,
)
TOKEN_PATH = Format(
    'an absolute path such as "/oauth2/token" (visible ASCII, no "#", at most 1024)',
    lambda value: re.fullmatch(r"/[\x21-\x22\x24-\x7e]{0,1023}", value) is not None,
)
MAX_SCOPES = 32
# A token request bounded in [1ms, 5m]; Envoy waits at least 1s between failed fetches.
TOKEN_TIMEOUT_BOUNDS = (0.001, 300.0, "from 1ms to 5m")
RETRY_INTERVAL_BOUNDS = (1.0, 3600.0, "from 1s to 1h (Envoy waits at least 1s)")


def parse_credential_injector(root: Node, meta: ObjectMeta) -> CredentialInjector:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return CredentialInjector(meta=meta)
    if spec.has("secretRef") == spec.has("oauth2"):
        spec.report(spec.at("secretRef"), "exactly one of secretRef and oauth2 is required")
    ref = spec.mapping("secretRef")
    oauth2 = spec.mapping("oauth2")
    header = spec.string("header", default=DEFAULT_CREDENTIAL_HEADER, format=HEADER_NAME)
    if oauth2 is not None and header.lower() != "authorization":
        # A CEL rule of the CRD: Envoy's OAuth2 credential has no other header.
        spec.report(spec.at("header"), "must be Authorization with oauth2 (or left unset)")
    return CredentialInjector(
        meta=meta,
        secret_ref=_secret_ref(ref) if ref is not None else None,
        header=header,
        overwrite=spec.boolean("overwrite", default=False),
        oauth2=_oauth2(oauth2) if oauth2 is not None else None,
    )


def _secret_ref(ref: Node) -> CredentialSecretRef:
    return CredentialSecretRef(
        name=ref.string("name", required=True, format=DNS1123_SUBDOMAIN),
        key=ref.string("key", required=True, format=SECRET_KEY),
        namespace=ref.optional_string("namespace", format=DNS1123_LABEL),
    )


def _oauth2(node: Node) -> OAuth2ClientCredentials | None:
    endpoint = node.mapping("tokenEndpoint", required=True)
    secret = node.mapping("clientSecretRef", required=True)
    client_id = node.string("clientID", required=True, format=CLIENT_ID)
    scopes = node.strings("scopes", format=SCOPE, max_items=MAX_SCOPES)
    retry = duration(node, "tokenFetchRetryInterval", bounds=RETRY_INTERVAL_BOUNDS)
    token_endpoint = _token_endpoint(endpoint) if endpoint is not None else None
    if token_endpoint is None or secret is None:
        return None  # reported as required
    return OAuth2ClientCredentials(
        token_endpoint=token_endpoint,
        client_id=client_id,
        client_secret_ref=_secret_ref(secret),
        scopes=scopes,
        token_fetch_retry_interval_s=retry,
    )


def _token_endpoint(node: Node) -> TokenEndpoint | None:
    ref = node.mapping("backendRef", required=True)
    path = node.string("path", required=True, format=TOKEN_PATH)
    timeout = duration(node, "timeout", bounds=TOKEN_TIMEOUT_BOUNDS)
    if ref is None:
        return None
    group = ref.string("group", format=GROUP)
    kind = ref.string("kind", default="Service", format=KIND)
    if group == "" and kind == "Service" and not ref.has("port"):
        ref.report(ref.at("port"), "is required when the backend is a Service")
    backend = BackendRef(
        name=ref.string("name", required=True, format=DNS1123_SUBDOMAIN),
        namespace=ref.optional_string("namespace", format=DNS1123_LABEL),
        group=group,
        kind=kind,
        port=ref.optional_integer("port", minimum=1, maximum=65535),
    )
    return TokenEndpoint(
        backend_ref=backend,
        path=path,
        timeout_s=DEFAULT_TOKEN_TIMEOUT_S if timeout is None else timeout,
    )
