"""Core kinds dragoman reads for what they hold: v1 Namespace, Secret and ConfigMap."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta, no_entries

# The label the API server puts on every Namespace (Kubernetes 1.22+), naming it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
TLS_SECRET_TYPE = "kubernetes.io/tls"
TLS_CERT_KEY = "tls.crt"
TLS_PRIVATE_KEY_KEY = "tls.key"


@dataclass(frozen=True, slots=True)
class Namespace(KindObject):
    """Cluster-scoped: `meta.namespace` is ""."""

    kind: ClassVar[str] = "Namespace"
    cluster_scoped: ClassVar[bool] = True

    meta: ObjectMeta

    @property
    def labels(self) -> Mapping[str, str]:
        """Its labels, with the name label the API server always sets."""
        return {**self.meta.labels, NAMESPACE_NAME_LABEL: self.meta.name}


@dataclass(frozen=True, slots=True)
class Secret(KindObject):
    kind: ClassVar[str] = "Secret"

    meta: ObjectMeta
    type: str = "Opaque"
    # Values base64-decoded. Never shown by repr: keys must not reach logs or tracebacks.
    data: Mapping[str, bytes] = field(default_factory=no_entries, repr=False)


@dataclass(frozen=True, slots=True)
class ConfigMap(KindObject):
    kind: ClassVar[str] = "ConfigMap"

    meta: ObjectMeta
    data: Mapping[str, str] = field(default_factory=no_entries)
