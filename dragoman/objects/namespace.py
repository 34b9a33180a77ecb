"""v1 Namespace."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta

# The label the API server puts on every Namespace (Kubernetes 1.22+), naming it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


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
