"""Stamping lastTransitionTime on a computed status, as a status writer must: the one rule,
used by `dragoman status` and by the Kubernetes status writer (`kubernetes.status_merge`).

A condition keeps the time it had in the previous status when its status value did not
change; a new or changed condition gets `now`. Pure: the caller passes the clock reading.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

TRANSITION_TIME = "lastTransitionTime"

# Lists of entries that carry their own conditions, and the key that identifies an entry.
_NESTED = (
    ("listeners", ("name",)),
    ("parents", ("parentRef", "controllerName")),
    ("ancestors", ("ancestorRef", "controllerName")),
)


def stamp(
    status: Mapping[str, Any], now: str, previous: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A copy of `status` with lastTransitionTime on every condition. `now`: RFC 3339."""
    previous = previous or {}
    result = dict(status)
    if "conditions" in status:
        result["conditions"] = stamp_conditions(
            status["conditions"], previous.get("conditions", ()), now
        )
    for field, identity in _NESTED:
        if field not in status:
            continue
        before = {_identity(entry, identity): entry for entry in previous.get(field, ())}
        result[field] = [
            {
                **entry,
                "conditions": stamp_conditions(
                    entry.get("conditions", ()),
                    before.get(_identity(entry, identity), {}).get("conditions", ()),
                    now,
                ),
            }
            for entry in status[field]
        ]
    return result


def _identity(entry: Mapping[str, Any], keys: Sequence[str]) -> str:
    return repr([_canonical(entry.get(key)) for key in keys])


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return sorted((k, _canonical(v)) for k, v in value.items())
    return value


def stamp_conditions(conditions: Sequence[Any], previous: Sequence[Any], now: str) -> list[Any]:
    """Copies of `conditions`, each with the lastTransitionTime its type had in `previous`
    when its status is unchanged, else `now`. What is not a condition (a status someone else
    wrote by hand) is copied as it is."""
    before = {c.get("type"): c for c in previous if isinstance(c, Mapping)}
    stamped: list[Any] = []
    for c in conditions:
        if not isinstance(c, Mapping):
            stamped.append(copy.deepcopy(c))
            continue
        old = before.get(c.get("type"))
        unchanged = old is not None and old.get("status") == c.get("status")
        time = old.get(TRANSITION_TIME) if unchanged and old is not None else None
        entry = {key: copy.deepcopy(value) for key, value in c.items() if key != TRANSITION_TIME}
        stamped.append(_ordered(entry, time or now))
    return stamped


def _ordered(condition: Mapping[str, Any], time: str) -> dict[str, Any]:
    """The key order `kubectl get -o yaml` shows, with the time after observedGeneration."""
    result: dict[str, Any] = {}
    for key in ("type", "status", "observedGeneration"):
        if key in condition:
            result[key] = condition[key]
    result["lastTransitionTime"] = time
    result.update((k, v) for k, v in condition.items() if k not in result)
    return result
