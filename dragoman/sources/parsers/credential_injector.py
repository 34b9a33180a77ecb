"""CredentialInjector (dragoman.dev/v1alpha1) from decoded manifests, validated as its CRD
(deploy/00-crd-credentialinjectors.yaml) validates it.

What the CRD accepts but dragoman cannot use (a Secret or key that does not exist, a Secret
in another namespace, a value Envoy could not send) is not a parse error: the build reports
it in the injector's status and on the routes that name it.
"""

from __future__ import annotations

import re

from dragoman.objects import CredentialInjector, CredentialSecretRef, ObjectMeta
from dragoman.objects.credential_injector import DEFAULT_CREDENTIAL_HEADER
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, DNS1123_SUBDOMAIN, Format
from dragoman.sources.parsers.route_parts import HEADER_NAME

# What Kubernetes allows as a key of a Secret's data.
_SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
SECRET_KEY = Format(
    'a key of a Secret\'s data such as "token" (letters, digits, "-", "_" and ".")',
    lambda value: len(value) <= 253 and _SECRET_KEY.fullmatch(value) is not None,
)


def parse_credential_injector(root: Node, meta: ObjectMeta) -> CredentialInjector:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return CredentialInjector(meta=meta)
    ref = spec.mapping("secretRef", required=True)
    secret_ref = None
    if ref is not None:
        secret_ref = CredentialSecretRef(
            name=ref.string("name", required=True, format=DNS1123_SUBDOMAIN),
            key=ref.string("key", required=True, format=SECRET_KEY),
            namespace=ref.optional_string("namespace", format=DNS1123_LABEL),
        )
    return CredentialInjector(
        meta=meta,
        secret_ref=secret_ref,
        header=spec.string("header", default=DEFAULT_CREDENTIAL_HEADER, format=HEADER_NAME),
        overwrite=spec.boolean("overwrite", default=False),
    )
