"""Merging a computed status into the one the API server holds. Pure: no I/O, no clock.

- Conditions get `lastTransitionTime` by the one stamping rule (`dag.status.stamp`): the
  old time when a condition of that type had the same `status` before, `now` otherwise.
- `parents[]` (routes) and `ancestors[]` (policies) are shared by every controller that
  serves the object: only the entries whose `controllerName` is ours are replaced or
  removed; the others stay as they are, where they are.
- Other fields of the old status that the computed one does not mention are kept.
- Two statuses that differ only in `lastTransitionTime` are the same: no write.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dragoman.dag.status.stamp import TRANSITION_TIME, stamp_conditions
from dragoman.objects.gateway import GATEWAY_GROUP

# Lists of entries that several controllers write into, each entry naming its controller.
SHARED_LISTS = {"parents": "parentRef", "ancestors": "ancestorRef"}
REF_FIELDS = frozenset(SHARED_LISTS.values())
REF_DEFAULTS = {"group": GATEWAY_GROUP, "kind": "Gateway"}


def merge_status(
    current: Mapping[str, Any] | None,
    desired: Mapping[str, Any],
    controller_name: str,
    now: str,
) -> dict[str, Any]:
    """The status to write: `desired` stamped with transition times and merged into
    `current`, keeping what other controllers (and fields we do not compute) hold."""
    current = current or {}
    merged: dict[str, Any] = copy.deepcopy(dict(current))
    for field, value in desired.items():
        old = current.get(field)
        if field in SHARED_LISTS and isinstance(value, list):
            merged[field] = _merge_shared(
                old if isinstance(old, list) else [],
                value,
                SHARED_LISTS[field],
                controller_name,
                now,
            )
        else:
            merged[field] = _stamp(field, value, old, now)
    return merged


def without_our_entries(current: Mapping[str, Any], controller_name: str) -> dict[str, Any] | None:
    """The desired status that withdraws our entries from the shared lists of an object we
    no longer compute a status for; None when it holds none of ours."""
    withdrawn: dict[str, Any] = {
        field: []
        for field in SHARED_LISTS
        if any(_ours(entry, controller_name) for entry in current.get(field) or [])
    }
    return withdrawn or None


def is_ours(entry: Any, controller_name: str) -> bool:
    """Whether an entry of parents[]/ancestors[] is one `controller_name` wrote."""
    return _ours(entry, controller_name)


def ref_identity(ref: Any) -> Any:
    """A parentRef/ancestorRef as a hashable value, with the defaults the API server fills
    in: two refs that name the same parent compare equal."""
    return _frozen(_with_ref_defaults(ref))


def same_status(a: Any, b: Any) -> bool:
    """Equal once every lastTransitionTime is ignored (and references carry the defaults
    the API server fills in)."""
    return _comparable(a) == _comparable(b)


def _merge_shared(
    old: list[Any], desired: list[Any], ref_field: str, controller_name: str, now: str
) -> list[Any]:
    """Ours replaced in place (so an unchanged list compares equal), theirs untouched,
    new ones of ours appended in the order computed."""
    wanted = {_ref_key(entry, ref_field): entry for entry in desired}
    placed: set[Any] = set()
    merged: list[Any] = []
    for entry in old:
        if not _ours(entry, controller_name):
            merged.append(copy.deepcopy(entry))
            continue
        key = _ref_key(entry, ref_field)
        if key in wanted and key not in placed:
            merged.append(_stamp("", wanted[key], entry, now))
            placed.add(key)
    for entry in desired:
        key = _ref_key(entry, ref_field)
        if key not in placed:
            previous = next(
                (e for e in old if _ours(e, controller_name) and _ref_key(e, ref_field) == key),
                None,
            )
            merged.append(_stamp("", entry, previous, now))
            placed.add(key)
    return merged


def _stamp(field: str, value: Any, old: Any, now: str) -> Any:
    if field == "conditions" and isinstance(value, list):
        return stamp_conditions(value, old if isinstance(old, list) else [], now)
    if isinstance(value, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        return {k: _stamp(k, v, old_map.get(k), now) for k, v in value.items()}
    if isinstance(value, list):
        old_list = old if isinstance(old, list) else []
        return [
            _stamp("", item, _counterpart(item, old_list, i), now) for i, item in enumerate(value)
        ]
    return copy.deepcopy(value)


def _counterpart(item: Any, old: list[Any], index: int) -> Any:
    """The old entry an entry of a list continues: same name (listeners), else same place."""
    if isinstance(item, Mapping) and "name" in item:
        return next(
            (o for o in old if isinstance(o, Mapping) and o.get("name") == item["name"]), None
        )
    return old[index] if index < len(old) else None


def _ours(entry: Any, controller_name: str) -> bool:
    return isinstance(entry, Mapping) and entry.get("controllerName") == controller_name


def _ref_key(entry: Any, ref_field: str) -> Any:
    ref = entry.get(ref_field) if isinstance(entry, Mapping) else None
    return _frozen(_with_ref_defaults(ref))


def _with_ref_defaults(ref: Any) -> Any:
    """A parentRef/ancestorRef with the CRD defaults the API server applies on write."""
    if not isinstance(ref, Mapping):
        return ref
    return {**REF_DEFAULTS, **ref}


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _comparable(value: Any, field: str = "") -> Any:
    if isinstance(value, Mapping):
        if field in REF_FIELDS:
            value = _with_ref_defaults(value)
        return {k: _comparable(v, k) for k, v in value.items() if k != TRANSITION_TIME}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value
