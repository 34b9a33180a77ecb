"""CredentialInjector (dragoman.dev/v1alpha1): a header whose value, read from a Secret in
the injector's own namespace, Envoy adds to the requests of the route rules whose
`ExtensionRef` filter names the injector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta

CREDENTIAL_INJECTOR = "CredentialInjector"
DEFAULT_CREDENTIAL_HEADER = "Authorization"


@dataclass(frozen=True, slots=True)
class CredentialSecretRef:
    """spec.secretRef: the Secret and the key of its data that holds the header's value."""

    name: str
    key: str
    # Written only to be refused when it names another namespace: the Secret must be in the
    # injector's own namespace. None: not written.
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class CredentialInjector(KindObject):
    kind: ClassVar[str] = CREDENTIAL_INJECTOR

    meta: ObjectMeta
    secret_ref: CredentialSecretRef | None = None  # None only when the object is refused
    header: str = DEFAULT_CREDENTIAL_HEADER
    overwrite: bool = False  # replace a value the client sent; False keeps the client's
