"""Statuses the build cannot compute because the objects are not among what it reads. Pure.

- An object the parser cannot read is left out of the build, yet the status dragoman wrote
  for it before would go on saying Accepted. Its parents[]/ancestors[] entries of ours (and,
  for a route, an entry for each parentRef naming a Gateway dragoman serves) say
  Accepted=False instead, naming the field and the problem; a Gateway of one of dragoman's
  GatewayClasses says Accepted=False and Programmed=False.
- A Gateway dragoman served and serves no more (its GatewayClass was deleted, or the class
  it names now is another controller's) is handed back: its status returns to what the CRD
  starts a Gateway with, "Waiting for controller". Only while the Gateway still holds the
  status dragoman last computed for it, so one that another controller wrote since is left
  alone. The memory of what was computed lives in every replica (all of them build), so a
  new leader can hand back a Gateway the old one served.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dragoman.dag.conditions import GATEWAY_API_VERSION, condition
from dragoman.dag.model import ObjectStatus
from dragoman.kubernetes.cache import CachedObject
from dragoman.kubernetes.status_merge import SHARED_LISTS, is_ours, ref_identity
from dragoman.objects import ObjectKey
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.objects.kinds import KINDS

ROUTE_KINDS = frozenset(kind.kind for kind in KINDS if kind.route)
# Gateway API reasons: a route's Accepted=False for a value it does not support; a policy's
# and a Gateway's for an invalid object.
ROUTE_REASON = "UnsupportedValue"
OTHER_REASON = "Invalid"
PENDING = "Pending"
WAITING_MESSAGE = (
    "Waiting for controller: dragoman no longer serves this Gateway (its GatewayClass is "
    "gone, or does not name dragoman's controller)"
)


def unreadable_statuses(
    entries: Iterable[CachedObject],
    desired: Mapping[ObjectKey, ObjectStatus],
    controller_name: str,
) -> dict[ObjectKey, ObjectStatus]:
    """Statuses for the objects in `entries` the parser could not read; `desired`, the
    statuses the build computed, says which Gateways and GatewayClasses are dragoman's."""
    served_gateways = {key for key in desired if key.kind == "Gateway"}
    our_classes = {key.name for key in desired if key.kind == "GatewayClass"}
    statuses = {}
    for entry in entries:
        if entry.parsed is not None or not entry.kind.has_status:
            continue
        if entry.kind.kind == "Gateway":
            status = _unreadable_gateway(entry, our_classes)
        else:
            status = _unreadable_shared(entry, served_gateways, controller_name)
        if status:
            api_version = entry.api_version or GATEWAY_API_VERSION
            statuses[entry.key] = ObjectStatus(entry.key, api_version, status)
    return statuses


def waiting_for_controller(generation: int) -> dict[str, Any]:
    """A Gateway's status once no controller serves it: the CRD's initial conditions."""
    return {
        "conditions": [
            condition("Accepted", None, PENDING, WAITING_MESSAGE, generation),
            condition("Programmed", None, PENDING, WAITING_MESSAGE, generation),
        ],
        "listeners": [],
    }


class ServedGateways:
    """The status last computed for each Gateway this replica has served."""

    def __init__(self) -> None:
        self._last: dict[ObjectKey, Mapping[str, Any]] = {}

    def remember(self, statuses: Mapping[ObjectKey, ObjectStatus]) -> None:
        for key, status in statuses.items():
            if key.kind == "Gateway":
                self._last[key] = status.status

    def released(
        self, desired: Mapping[ObjectKey, Any], present: Mapping[ObjectKey, CachedObject]
    ) -> dict[ObjectKey, Mapping[str, Any]]:
        """Gateways served once and not now, by key, with the status last computed for
        each. Deleted Gateways are forgotten."""
        for key in [key for key in self._last if key not in present]:
            del self._last[key]
        return {key: last for key, last in self._last.items() if key not in desired}


def _problems(entry: CachedObject) -> str:
    problems = "; ".join(
        f"{error.field}: {error.message}" if error.field else error.message
        for error in entry.errors
    )
    return f"dragoman cannot read this {entry.kind.kind}, so none of it is served: {problems}"


def _unreadable_gateway(entry: CachedObject, our_classes: set[str]) -> dict[str, Any] | None:
    spec = entry.unreadable_spec or {}
    if spec.get("gatewayClassName") not in our_classes:
        return None
    message = _problems(entry)
    return {
        "conditions": [
            condition("Accepted", False, OTHER_REASON, message, entry.generation),
            condition("Programmed", False, OTHER_REASON, message, entry.generation),
        ],
        "listeners": [],
    }


def _unreadable_shared(
    entry: CachedObject, served_gateways: set[ObjectKey], controller_name: str
) -> dict[str, Any]:
    """Accepted=False in each parents[]/ancestors[] entry that is ours to write."""
    reason = ROUTE_REASON if entry.kind.kind in ROUTE_KINDS else OTHER_REASON
    accepted = condition("Accepted", False, reason, _problems(entry), entry.generation)
    held = entry.status or {}
    fields: dict[str, Any] = {}
    for field, ref_field in SHARED_LISTS.items():
        refs = [
            item[ref_field]
            for item in held.get(field) or []
            if is_ours(item, controller_name) and isinstance(item.get(ref_field), Mapping)
        ]
        if field == "parents" and entry.kind.kind in ROUTE_KINDS:
            refs += _served_parent_refs(entry, served_gateways)
        unique = _unique(refs)
        if unique:
            fields[field] = [
                {ref_field: ref, "controllerName": controller_name, "conditions": [accepted]}
                for ref in unique
            ]
    return fields


def _unique(refs: list[Any]) -> list[Any]:
    """Each parent once (the first way it is written), in order."""
    seen: set[Any] = set()
    unique = []
    for ref in refs:
        identity = ref_identity(ref)
        if identity not in seen:
            seen.add(identity)
            unique.append(ref)
    return unique


def _served_parent_refs(
    entry: CachedObject, served_gateways: set[ObjectKey]
) -> list[dict[str, Any]]:
    """The route's raw parentRefs that are well-formed and name a Gateway we serve, echoed
    as route status echoes them."""
    refs = (entry.unreadable_spec or {}).get("parentRefs")
    found = []
    for ref in refs if isinstance(refs, list) else []:
        echoed = _echoed_parent_ref(ref)
        if echoed is None or (echoed["group"], echoed["kind"]) != (GATEWAY_GROUP, "Gateway"):
            continue
        namespace = echoed.get("namespace", entry.namespace)
        if ObjectKey("Gateway", namespace, echoed["name"]) in served_gateways:
            found.append(echoed)
    return found


def _echoed_parent_ref(ref: Any) -> dict[str, Any] | None:
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str) or not ref["name"]:
        return None
    echoed: dict[str, Any] = {
        "group": ref.get("group", GATEWAY_GROUP),
        "kind": ref.get("kind", "Gateway"),
    }
    for field, kind in (("namespace", str), ("name", str), ("sectionName", str), ("port", int)):
        value = ref.get(field)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            return None
        echoed[field] = value
    if not all(isinstance(echoed[field], str) for field in ("group", "kind")):
        return None
    return echoed
