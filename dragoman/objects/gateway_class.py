"""Gateway API GatewayClass (gateway.networking.k8s.io)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta


@dataclass(frozen=True, slots=True)
class ParametersRef:
    group: str
    kind: str
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class GatewayClass(KindObject):
    """Cluster-scoped: `meta.namespace` is ""."""

    kind: ClassVar[str] = "GatewayClass"
    cluster_scoped: ClassVar[bool] = True

    meta: ObjectMeta
    controller_name: str = ""
    parameters_ref: ParametersRef | None = None
