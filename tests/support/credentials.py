"""CredentialInjector manifests, and a route rule whose ExtensionRef filter names one."""

from __future__ import annotations

from typing import Any

from tests.support.builders import (
    backend_ref,
    external_service,
    gateway,
    gateway_class,
    http_route,
    match,
    metadata,
    rule,
    secret,
    service,
)

Object = dict[str, Any]

# A credential that must never be shown: tests look for "s3cr3t" in what dragoman prints.
VALUE = b"Bearer s3cr3t-value-never-shown"
# Gateway gw (HTTP, port 8080), Service web, and Secret api-key: its key `token` holds VALUE,
# `bad` a value ending in a newline, `empty` nothing.
WORLD = (
    gateway_class(),
    gateway(),
    service("web", 80, 8080),
    secret("api-key", {"token": VALUE, "bad": b"Bearer x\n", "empty": b""}),
)


def credential_injector(
    name: str,
    secret: str,
    key: str,
    *,
    header: str | None = None,
    overwrite: bool | None = None,
    namespace: str = "default",
    secret_namespace: str | None = None,
) -> Object:
    ref: Object = {"name": secret, "key": key}
    if secret_namespace is not None:
        ref["namespace"] = secret_namespace
    spec: Object = {"secretRef": ref}
    if header is not None:
        spec["header"] = header
    if overwrite is not None:
        spec["overwrite"] = overwrite
    return {
        "apiVersion": "dragoman.dev/v1alpha1",
        "kind": "CredentialInjector",
        "metadata": metadata(name, namespace),
        "spec": spec,
    }


def injects(name: str) -> Object:
    """An HTTPRoute filter naming CredentialInjector `name` (in the route's namespace)."""
    return {
        "type": "ExtensionRef",
        "extensionRef": {"group": "dragoman.dev", "kind": "CredentialInjector", "name": name},
    }


def injector_route(*injectors: str, path: str = "/api") -> Object:
    """HTTPRoute r: `path` to Service web with filters naming `injectors`, and /plain
    without."""
    return http_route(
        "r",
        rules=[
            rule(
                backend_ref("web", 80),
                matches=[match(path)],
                filters=[injects(name) for name in injectors],
            ),
            rule(backend_ref("web", 80), matches=[match("/plain")]),
        ],
    )


# An OAuth2 client secret that must never be shown either.
CLIENT_SECRET = b"client-s3cr3t-never-shown"
# The identity provider of OAuth2 injectors: an ExternalName Service on 443 (TLS), and the
# Secret holding the client secret.
IDP = (
    external_service("idp", "auth.example.com", 443),
    secret("oauth-client", {"secret": CLIENT_SECRET, "bad": b"x\n"}),
)


def oauth2_injector(
    name: str,
    *,
    backend: Object | None = None,
    path: str | None = "/oauth2/token",
    key: str = "secret",
    namespace: str = "default",
    **fields: Any,
) -> Object:
    """A CredentialInjector fetching OAuth2 tokens from Service idp (or `backend`) with
    client id "dragoman" and the client secret of Secret oauth-client; `fields` adds to or
    replaces fields of spec.oauth2 (a value None removes it)."""
    endpoint: Object = {"backendRef": backend or {"name": "idp", "port": 443}}
    if path is not None:
        endpoint["path"] = path
    oauth2: Object = {
        "tokenEndpoint": endpoint,
        "clientID": "dragoman",
        "clientSecretRef": {"name": "oauth-client", "key": key},
    }
    for field_name, value in fields.items():
        if value is None:
            oauth2.pop(field_name, None)
        else:
            oauth2[field_name] = value
    return {
        "apiVersion": "dragoman.dev/v1alpha1",
        "kind": "CredentialInjector",
        "metadata": metadata(name, namespace),
        "spec": {"oauth2": oauth2},
    }
