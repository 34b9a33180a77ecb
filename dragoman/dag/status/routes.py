"""Status of route objects (HTTPRoute, GRPCRoute): one `parents` entry per parentRef that
names one of dragoman's Gateways, each with Accepted and ResolvedRefs (and PartiallyInvalid
when some rules could not be served)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dragoman.dag.conditions import (
    GATEWAY_API_VERSION,
    Condition,
    condition,
    joined,
    with_condition,
)
from dragoman.dag.frontends.attachment import Attachable, ParentOutcome
from dragoman.dag.model import ObjectStatus, Problem
from dragoman.objects import ParentRef

# Problem reasons that mean a reference could not be resolved (ResolvedRefs=False): the
# Gateway API's, and dragoman's own (an ExternalName it refuses to resolve: unsafe, outside
# the platform policy, not or not yet resolved by the DNS check; a BackendTLSPolicy that
# cannot be used).
REFERENCE_REASONS = frozenset(
    {
        "BackendNotFound",
        "InvalidKind",
        "RefNotPermitted",
        "UnsupportedProtocol",
        "UnsafeExternalName",
        "NotAllowedByPolicy",
        "DNSCheckPending",
        "DNSCheckFailed",
        "InvalidBackendTLSPolicy",
        "InvalidCredentialInjector",
    }
)
# Fields whose problems are about attaching, reported through the parentRef outcomes.
_ATTACH_FIELDS = ("spec.parentRefs", "spec.hostnames")


@dataclass(frozen=True, slots=True)
class RouteOutcome:
    """A route and what became of each of its parentRefs."""

    route: Attachable
    generation: int
    parents: tuple[ParentOutcome, ...]


def route_status(
    outcome: RouteOutcome, problems: Sequence[Problem], controller_name: str
) -> ObjectStatus:
    """`problems`: every problem of this route; those about attaching are ignored here."""
    generation = outcome.generation
    resolved = _all_resolved(generation)
    partial = None
    if problems:  # most routes have none
        own = [p for p in problems if not p.field.startswith(_ATTACH_FIELDS)]
        references = [p for p in own if p.reason in REFERENCE_REASONS]
        others = [p for p in own if p.reason not in REFERENCE_REASONS]
        if references:
            resolved = condition(
                "ResolvedRefs",
                False,
                references[0].reason,
                joined([f"{p.field}: {p.message}" for p in references]),
                generation,
            )
        if others:
            partial = condition(
                "PartiallyInvalid",
                True,
                others[0].reason,
                "some rules are not served as written: "
                + joined([f"{p.field}: {p.message}" for p in others]),
                generation,
            )
    parents: list[dict[str, Any]] = []
    for parent in outcome.parents:
        if not parent.ours:
            continue
        accepted = _accepted(parent, generation)
        parents.append(
            {
                "parentRef": parent_ref_status(parent.parent_ref),
                "controllerName": controller_name,
                "conditions": [accepted, resolved]
                if partial is None
                else [accepted, resolved, partial],
            }
        )
    route = outcome.route
    return ObjectStatus(key=route.key, api_version=GATEWAY_API_VERSION, status={"parents": parents})


# Statuses are values: nothing changes a computed status in place (writers stamp copies), so
# routes of one generation share one ResolvedRefs condition, and routes naming the same
# parent one echo of it. At 10,000 routes that is two dicts instead of 20,000.
@lru_cache(maxsize=64)
def _all_resolved(generation: int) -> Condition:
    return condition("ResolvedRefs", True, "ResolvedRefs", "all references resolved", generation)


def parent_ref_status(ref: ParentRef) -> dict[str, Any]:
    """The parentRef as status echoes it: defaults filled in, unset optional fields left out.
    Shared by every route naming `ref`: never change it in place."""
    # Cached by its fields: a tuple of strings hashes and compares in C, a ParentRef (a
    # dataclass, one per route) in Python.
    return _echoed_parent_ref(
        ref.group, ref.kind, ref.namespace, ref.name, ref.section_name, ref.port
    )


@lru_cache(maxsize=1024)
def _echoed_parent_ref(
    group: str,
    kind: str,
    namespace: str | None,
    name: str,
    section_name: str | None,
    port: int | None,
) -> dict[str, Any]:
    echoed: dict[str, Any] = {"group": group, "kind": kind}
    if namespace is not None:
        echoed["namespace"] = namespace
    echoed["name"] = name
    if section_name is not None:
        echoed["sectionName"] = section_name
    if port is not None:
        echoed["port"] = port
    return echoed


def add_route_condition(status: ObjectStatus, added: Condition) -> ObjectStatus:
    """The same route status with `added` in every parent entry, replacing one of its type.

    How checks made outside the build (a DNS check's `DNSResolved`) extend a route's status.
    """
    parents = [
        {**parent, "conditions": with_condition(list(parent["conditions"]), added)}
        for parent in status.status.get("parents", ())
    ]
    return ObjectStatus(status.key, status.api_version, {**status.status, "parents": parents})


def _accepted(parent: ParentOutcome, generation: int) -> Condition:
    if parent.problem is not None:
        return condition(
            "Accepted", False, parent.problem.reason, parent.problem.message, generation
        )
    attachments = parent.attachments
    gateway = attachments[0].gateway
    if len(attachments) == 1:  # most often: one listener
        only = attachments[0]
        listeners = repr(only.listener)
        domains = ", ".join(sorted(set(only.domains)))
        idle = [] if only.programmed else [listeners]
    else:
        listeners = ", ".join(sorted({repr(a.listener) for a in attachments}))
        domains = ", ".join(sorted({d for a in attachments for d in a.domains}))
        idle = sorted({repr(a.listener) for a in attachments if not a.programmed})
    unserved = (
        f"; listener(s) {', '.join(idle)} cannot be served yet (see the Gateway)" if idle else ""
    )
    return condition(
        "Accepted",
        True,
        "Accepted",
        f"accepted by listener(s) {listeners} of Gateway {gateway.namespace}/{gateway.name} "
        f"for {domains}{unserved}",
        generation,
    )
