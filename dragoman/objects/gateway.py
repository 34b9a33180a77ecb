"""Gateway API kinds (gateway.networking.k8s.io/v1): Gateway and HTTPRoute."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import ObjectKey, ObjectMeta

GATEWAY_GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True, slots=True)
class GatewayListener:
    name: str
    port: int
    protocol: str = "HTTP"
    hostname: str | None = None
    # allowedRoutes.namespaces.from: "Same" (the API default) or "All".
    allowed_namespaces: str = "Same"


@dataclass(frozen=True, slots=True)
class Gateway:
    kind: ClassVar[str] = "Gateway"

    meta: ObjectMeta
    gateway_class_name: str = ""
    listeners: tuple[GatewayListener, ...] = ()

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.kind, self.meta.namespace, self.meta.name)


@dataclass(frozen=True, slots=True)
class ParentRef:
    name: str
    # None means the route's own namespace.
    namespace: str | None = None
    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    section_name: str | None = None
    port: int | None = None


@dataclass(frozen=True, slots=True)
class PathMatch:
    type: str = "PathPrefix"  # PathPrefix, Exact or RegularExpression
    value: str = "/"


@dataclass(frozen=True, slots=True)
class HTTPRouteMatch:
    path: PathMatch = PathMatch()


@dataclass(frozen=True, slots=True)
class BackendRef:
    name: str
    # None means the route's own namespace.
    namespace: str | None = None
    group: str = ""
    kind: str = "Service"
    port: int | None = None
    weight: int = 1


@dataclass(frozen=True, slots=True)
class HTTPRouteRule:
    # The API defaults an absent list to one match: PathPrefix "/".
    matches: tuple[HTTPRouteMatch, ...] = (HTTPRouteMatch(),)
    backend_refs: tuple[BackendRef, ...] = ()


@dataclass(frozen=True, slots=True)
class HTTPRoute:
    kind: ClassVar[str] = "HTTPRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    hostnames: tuple[str, ...] = ()
    rules: tuple[HTTPRouteRule, ...] = ()

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.kind, self.meta.namespace, self.meta.name)
