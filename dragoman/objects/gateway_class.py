"""Gateway API GatewayClass and ReferenceGrant (gateway.networking.k8s.io)."""

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


@dataclass(frozen=True, slots=True)
class ReferenceGrantFrom:
    group: str  # "" is the core group
    kind: str
    namespace: str


@dataclass(frozen=True, slots=True)
class ReferenceGrantTo:
    group: str
    kind: str
    name: str | None = None  # None: every object of that kind in the grant's namespace


@dataclass(frozen=True, slots=True)
class ReferenceGrant(KindObject):
    """Lets objects in other namespaces (`from`) refer to objects in this one (`to`)."""

    kind: ClassVar[str] = "ReferenceGrant"

    meta: ObjectMeta
    from_: tuple[ReferenceGrantFrom, ...] = ()
    to: tuple[ReferenceGrantTo, ...] = ()
