"""v1 Secret."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta, no_entries

TLS_SECRET_TYPE = "kubernetes.io/tls"
TLS_CERT_KEY = "tls.crt"
TLS_PRIVATE_KEY_KEY = "tls.key"


@dataclass(frozen=True, slots=True)
class Secret(KindObject):
    kind: ClassVar[str] = "Secret"

    meta: ObjectMeta
    type: str = "Opaque"
    # Values base64-decoded. Never shown by repr: keys must not reach logs or tracebacks.
    data: Mapping[str, bytes] = field(default_factory=no_entries, repr=False)
