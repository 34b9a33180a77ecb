"""Gateway API routes of whole connections (gateway.networking.k8s.io/v1): TCPRoute,
TLSRoute and UDPRoute. In v1 each has exactly one rule: weighted backends, no matches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.gateway import BackendRef, ParentRef
from dragoman.objects.meta import KindObject, ObjectMeta


@dataclass(frozen=True, slots=True)
class L4RouteRule:
    backend_refs: tuple[BackendRef, ...] = ()
    name: str | None = None


@dataclass(frozen=True, slots=True)
class TCPRoute(KindObject):
    kind: ClassVar[str] = "TCPRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    rules: tuple[L4RouteRule, ...] = ()

    @property
    def hostnames(self) -> tuple[str, ...]:
        return ()  # a TCP connection names no host: every listener hostname matches


@dataclass(frozen=True, slots=True)
class TLSRoute(KindObject):
    kind: ClassVar[str] = "TLSRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    # Matched against the SNI of the client's ClientHello (at least one in v1).
    hostnames: tuple[str, ...] = ()
    rules: tuple[L4RouteRule, ...] = ()


@dataclass(frozen=True, slots=True)
class UDPRoute(KindObject):
    kind: ClassVar[str] = "UDPRoute"

    meta: ObjectMeta
    parent_refs: tuple[ParentRef, ...] = ()
    rules: tuple[L4RouteRule, ...] = ()

    @property
    def hostnames(self) -> tuple[str, ...]:
        return ()


L4Route = TCPRoute | TLSRoute | UDPRoute
