"""CredentialInjector manifests, and a route rule whose ExtensionRef filter names one."""

from __future__ import annotations

from typing import Any

from tests.support.builders import metadata

Object = dict[str, Any]


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
