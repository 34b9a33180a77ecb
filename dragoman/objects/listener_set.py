"""ListenerSet (gateway.networking.k8s.io/v1): listeners another team adds to a Gateway that
allows them (spec.allowedListeners), with a status of their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.gateway import GATEWAY_GROUP, GatewayListener
from dragoman.objects.meta import KindObject, ObjectMeta


@dataclass(frozen=True, slots=True)
class ListenerSetParent:
    """spec.parentRef: the Gateway the listeners join."""

    name: str
    namespace: str | None = None  # None: the ListenerSet's own namespace
    group: str = GATEWAY_GROUP
    kind: str = "Gateway"


@dataclass(frozen=True, slots=True)
class ListenerSet(KindObject):
    kind: ClassVar[str] = "ListenerSet"

    meta: ObjectMeta
    parent_ref: ListenerSetParent = ListenerSetParent(name="")
    listeners: tuple[GatewayListener, ...] = ()
