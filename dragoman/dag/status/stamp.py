"""Stamping lastTransitionTime on a computed status, as a status writer must.

A condition keeps the time it had in the previous status when its status value did not
change; a new or changed condition gets `now`. Pure: the caller passes the clock reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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
        result["conditions"] = _stamped(status["conditions"], previous.get("conditions", ()), now)
    for field, identity in _NESTED:
        if field not in status:
            continue
        before = {_identity(entry, identity): entry for entry in previous.get(field, ())}
        result[field] = [
            {
                **entry,
                "conditions": _stamped(
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


def _stamped(
    conditions: Sequence[Mapping[str, Any]], previous: Sequence[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    before = {c.get("type"): c for c in previous}
    stamped = []
    for c in conditions:
        old = before.get(c["type"])
        unchanged = old is not None and old.get("status") == c["status"]
        time = old.get("lastTransitionTime") if unchanged and old is not None else None
        entry = {key: value for key, value in c.items() if key != "lastTransitionTime"}
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
