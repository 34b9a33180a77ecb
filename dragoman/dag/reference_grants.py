"""ReferenceGrants: which references across namespaces the target namespace allows.

A reference from an object in one namespace to an object in another is valid only when a
ReferenceGrant in the target's namespace names the referring kind and namespace (`from`) and
the target's kind, and its name or every name (`to`). Same-namespace references need none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from dragoman.objects import ReferenceGrant
from dragoman.objects.gateway import GATEWAY_GROUP


@dataclass(frozen=True, slots=True)
class Referrer:
    """The referring side: group, kind and namespace of the object that holds the reference."""

    group: str
    kind: str
    namespace: str


@dataclass(frozen=True, slots=True)
class Target:
    """The referenced object."""

    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def route_referrer(kind: str, namespace: str) -> Referrer:
    return Referrer(GATEWAY_GROUP, kind, namespace)


def service_target(namespace: str, name: str) -> Target:
    return Target("", "Service", namespace, name)


class ReferenceGrants:
    """An index of every ReferenceGrant, answering "is this reference allowed?"."""

    __slots__ = ("_allowed",)

    def __init__(self, grants: Iterable[ReferenceGrant] = ()) -> None:
        # (target namespace, referrer) -> (group, kind, name or None for any name)
        self._allowed: dict[tuple[str, Referrer], set[tuple[str, str, str | None]]] = defaultdict(
            set
        )
        for grant in grants:
            for source in grant.from_:
                referrer = Referrer(source.group, source.kind, source.namespace)
                entries = self._allowed[(grant.meta.namespace, referrer)]
                entries.update((to.group, to.kind, to.name) for to in grant.to)

    def permits(self, referrer: Referrer, target: Target) -> bool:
        if referrer.namespace == target.namespace:
            return True
        entries = self._allowed.get((target.namespace, referrer))
        if not entries:
            return False
        return (target.group, target.kind, None) in entries or (
            target.group,
            target.kind,
            target.name,
        ) in entries


NO_GRANTS = ReferenceGrants()


def not_permitted_message(referrer: Referrer, target: Target) -> str:
    """What a person must add to allow the reference."""
    group = f"group {referrer.group!r} " if referrer.group != GATEWAY_GROUP else ""
    return (
        f"a reference from {referrer.kind} in namespace {referrer.namespace!r} to {target} needs "
        f"a ReferenceGrant in namespace {target.namespace!r} whose `from` names {group}kind "
        f"{referrer.kind} in namespace {referrer.namespace!r} and whose `to` names kind "
        f"{target.kind} (and name {target.name!r}, or no name)"
    )
