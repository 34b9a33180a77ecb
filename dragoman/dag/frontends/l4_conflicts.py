"""TCPRoutes, TLSRoutes and UDPRoutes competing for one listener.

A TCP or UDP listener proxies each connection (or datagram) to one route's backends, so
of several routes attached to it exactly one is served: the oldest by creation timestamp,
then the first by "{namespace}/{name}" (the Gateway API's usual precedence). On a TLS
listener routes share it by SNI: each hostname goes to the first route that claims it,
and a route left with no hostname of its own there loses the listener. A parentRef left
with no listener gets Accepted=False with reason RouteConflict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dragoman.dag.frontends.attachment import Attachment
from dragoman.dag.frontends.kind_conflicts import AttachedRoute
from dragoman.dag.model import Problem
from dragoman.objects import ObjectKey, TLSRoute

ROUTE_CONFLICT = "RouteConflict"

_Listener = tuple[ObjectKey, str]  # (Gateway, listener name)


def without_l4_conflicts(
    routes: Sequence[AttachedRoute],
) -> tuple[list[AttachedRoute], list[Problem]]:
    """`routes` (same order) with every attachment (or TLS hostname) another route won taken
    away, and the problems of parentRefs that kept some listener."""
    claimed: dict[tuple[_Listener, str], ObjectKey] = {}
    # (route, parentRef index) -> attachment id -> (kept domains, winners of the others)
    decided: dict[tuple[ObjectKey, int], dict[int, tuple[tuple[str, ...], list[ObjectKey]]]] = {}
    for item in sorted(routes, key=_precedence):
        route = item.route
        by_sni = isinstance(route, TLSRoute)
        for parent in item.parents:
            for attachment in parent.attachments:
                listener = (attachment.gateway, attachment.listener)
                keys = attachment.domains if by_sni else ("",)
                kept: list[str] = []
                winners: list[ObjectKey] = []
                for key in keys:
                    owner = claimed.setdefault((listener, key), route.key)
                    if owner == route.key:
                        kept.append(key)
                    elif owner not in winners:
                        winners.append(owner)
                if winners:
                    domains = tuple(kept) if by_sni else (attachment.domains if kept else ())
                    outcome = decided.setdefault((route.key, parent.index), {})
                    outcome[id(attachment)] = (domains, winners)

    if not decided:
        return list(routes), []
    result: list[AttachedRoute] = []
    problems: list[Problem] = []
    for item in routes:
        parents = []
        for parent in item.parents:
            changes = decided.get((item.route.key, parent.index))
            if changes is None:
                parents.append(parent)
                continue
            remaining: list[Attachment] = []
            lost: list[tuple[Attachment, list[ObjectKey]]] = []
            for attachment in parent.attachments:
                change = changes.get(id(attachment))
                if change is None:
                    remaining.append(attachment)
                    continue
                domains, winners = change
                lost.append((attachment, winners))
                if domains:
                    remaining.append(dataclasses.replace(attachment, domains=domains))
            problem = _conflict(item.route.key, parent.index, lost)
            if remaining:
                problems.append(problem)
            parents.append(
                dataclasses.replace(
                    parent, attachments=tuple(remaining), problem=None if remaining else problem
                )
            )
        result.append(dataclasses.replace(item, parents=tuple(parents)))
    return result, problems


def _precedence(item: AttachedRoute) -> tuple[str, str, str]:
    meta = item.route.meta
    return meta.creation_timestamp, meta.namespace, meta.name


def _conflict(
    route: ObjectKey, index: int, lost: list[tuple[Attachment, list[ObjectKey]]]
) -> Problem:
    described = "; ".join(
        f"listener {attachment.listener!r} of Gateway {attachment.gateway.namespace}/"
        f"{attachment.gateway.name} already serves "
        + ", ".join(f"{w.kind} {w.namespace}/{w.name}" for w in winners)
        for attachment, winners in lost
    )
    rule = (
        "each TLS hostname is served by the older route (then the first by namespace/name)"
        if route.kind == "TLSRoute"
        else f"a {route.kind.removesuffix('Route')} listener serves one route, the older (then "
        "the first by namespace/name)"
    )
    return Problem(
        route,
        f"spec.parentRefs[{index}]",
        ROUTE_CONFLICT,
        f"{described}: {rule}; attach this route to another listener",
    )
