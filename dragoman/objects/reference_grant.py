"""Gateway API ReferenceGrant (gateway.networking.k8s.io)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta


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
