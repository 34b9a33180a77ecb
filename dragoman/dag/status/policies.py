"""Status of policy kinds (BackendTLSPolicy): `ancestors`, one entry per object the policy
affects through dragoman (a Gateway, or a route's parent Gateway), each with its conditions.

A policy's build step decides the ancestors and their conditions (Accepted, ResolvedRefs,
...) and calls `policy_status`; build() adds the result to Dag.statuses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dragoman.dag.conditions import GATEWAY_API_VERSION, Condition
from dragoman.dag.model import ObjectStatus
from dragoman.objects import ObjectKey


@dataclass(frozen=True, slots=True)
class PolicyAncestor:
    # A ParentReference as the API writes it: group, kind, namespace, name[, sectionName].
    ancestor_ref: Mapping[str, Any]
    conditions: Sequence[Condition]


def policy_status(
    key: ObjectKey, ancestors: Sequence[PolicyAncestor], controller_name: str
) -> ObjectStatus:
    return ObjectStatus(
        key=key,
        api_version=GATEWAY_API_VERSION,
        status={
            "ancestors": [
                {
                    "ancestorRef": dict(ancestor.ancestor_ref),
                    "controllerName": controller_name,
                    "conditions": list(ancestor.conditions),
                }
                for ancestor in ancestors
            ]
        },
    )


def gateway_ancestor_ref(gateway: ObjectKey, section_name: str | None = None) -> dict[str, Any]:
    ref: dict[str, Any] = {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": gateway.namespace,
        "name": gateway.name,
    }
    if section_name is not None:
        ref["sectionName"] = section_name
    return ref
