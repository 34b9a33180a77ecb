"""HTTPRoutes and GRPCRoutes that share hostnames on one listener: exactly one is accepted.

The Gateway API (GRPCRoute and HTTPRoute spec.hostnames): when a route of one kind attaches
to a listener that already has a route of the other kind whose hostnames intersect its own,
the implementation accepts exactly one of the two, the oldest by creation timestamp, then
the first by "{namespace}/{name}"; the other's parent status says Accepted=False.

Routes are taken in that order, listener by listener, and a route loses the listener when
its domains overlap those of a route of the other kind already kept there. Listeners
carrying one kind only, the usual case, cost one pass over their attachments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dragoman.dag.frontends.attachment import Attachable, Attachment, ParentOutcome
from dragoman.dag.frontends.hostnames import covering_domains
from dragoman.dag.model import Problem
from dragoman.objects import ObjectKey

# The reason on the Accepted=False condition of the route that lost a listener.
KIND_CONFLICT = "RouteKindConflict"

_Listener = tuple[ObjectKey, str]  # (Gateway, listener name)


@dataclass(frozen=True, slots=True)
class AttachedRoute:
    """A route and what became of each of its parentRefs."""

    route: Attachable
    parents: tuple[ParentOutcome, ...]


def without_kind_conflicts(
    routes: Sequence[AttachedRoute],
) -> tuple[list[AttachedRoute], list[Problem]]:
    """`routes` (same order) with every attachment lost to a route of the other kind
    removed. A parentRef left with no attachment carries the conflict as its problem (its
    Accepted=False); the problems returned are those of parentRefs that kept some."""
    kinds: dict[_Listener, set[str]] = {}
    for item in routes:
        for parent in item.parents:
            for attachment in parent.attachments:
                kinds.setdefault(_listener(attachment), set()).add(item.route.kind)
    shared = {listener for listener, seen in kinds.items() if len(seen) > 1}
    if not shared:
        return list(routes), []

    kept: dict[tuple[_Listener, str], _Domains] = {}
    lost: dict[tuple[ObjectKey, int], list[tuple[Attachment, ObjectKey]]] = {}
    for item in sorted(routes, key=_precedence):
        route = item.route
        for parent in item.parents:
            for attachment in parent.attachments:
                listener = _listener(attachment)
                if listener not in shared:
                    continue
                other = next(kind for kind in kinds[listener] if kind != route.kind)
                theirs = kept.get((listener, other))
                winner = theirs.overlapping(attachment.domains) if theirs is not None else None
                if winner is not None:
                    lost.setdefault((route.key, parent.index), []).append((attachment, winner))
                    continue
                kept.setdefault((listener, route.kind), _Domains()).add(
                    attachment.domains, route.key
                )

    if not lost:
        return list(routes), []
    result: list[AttachedRoute] = []
    problems: list[Problem] = []
    for item in routes:
        parents = []
        for parent in item.parents:
            losses = lost.get((item.route.key, parent.index))
            if losses is None:
                parents.append(parent)
                continue
            problem = _conflict(item.route, parent, losses)
            dropped = {id(attachment) for attachment, _ in losses}
            remaining = tuple(a for a in parent.attachments if id(a) not in dropped)
            if remaining:
                problems.append(problem)
            parents.append(
                dataclasses.replace(
                    parent, attachments=remaining, problem=None if remaining else problem
                )
            )
        result.append(dataclasses.replace(item, parents=tuple(parents)))
    return result, problems


@dataclass(slots=True)
class _Domains:
    """Domains kept on one listener for one route kind, each with the route that has it,
    indexed for overlap tests."""

    exact: dict[str, ObjectKey] = field(default_factory=dict)
    # Every wildcard (and "*") that covers a kept domain.
    covering: dict[str, ObjectKey] = field(default_factory=dict)

    def overlapping(self, domains: Iterable[str]) -> ObjectKey | None:
        """A route some request host could reach through one of `domains` and a kept domain."""
        for domain in domains:
            # The same domain, or a wildcard covering a kept one.
            owner = self.exact.get(domain) or self.covering.get(domain)
            if owner is not None:
                return owner
            for wider in covering_domains(domain):
                if wider in self.exact:
                    return self.exact[wider]  # a kept wildcard covers this domain
        return None

    def add(self, domains: Iterable[str], route: ObjectKey) -> None:
        for domain in domains:
            self.exact.setdefault(domain, route)
            for wider in covering_domains(domain):
                self.covering.setdefault(wider, route)


def _listener(attachment: Attachment) -> _Listener:
    return attachment.gateway, attachment.listener


def _precedence(item: AttachedRoute) -> tuple[str, str, str]:
    meta = item.route.meta
    return meta.creation_timestamp, meta.namespace, meta.name


def _conflict(
    route: Attachable, parent: ParentOutcome, losses: list[tuple[Attachment, ObjectKey]]
) -> Problem:
    described = "; ".join(
        f"listener {attachment.listener!r} of Gateway {attachment.gateway.namespace}/"
        f"{attachment.gateway.name} already serves {winner.kind} {winner.namespace}/"
        f"{winner.name} for an intersecting hostname"
        for attachment, winner in losses
    )
    return Problem(
        route.key,
        f"spec.parentRefs[{parent.index}]",
        KIND_CONFLICT,
        f"{described}: of an HTTPRoute and a GRPCRoute sharing hostnames on one listener only "
        "the older (then the first by namespace/name) is accepted; give this route other "
        "hostnames or attach it elsewhere",
    )
