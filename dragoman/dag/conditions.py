"""metav1.Condition values as the API server stores them, minus lastTransitionTime.

The core has no clock: whoever writes status stamps the time (see status_stamp.py).
"""

from __future__ import annotations

from typing import Any

from dragoman.objects.gateway import GATEWAY_GROUP

# The API server refuses a condition message longer than this.
MAX_MESSAGE_LENGTH = 32768
GATEWAY_API_VERSION = f"{GATEWAY_GROUP}/v1"

Condition = dict[str, Any]


def condition(
    type: str, status: bool | None, reason: str, message: str, generation: int
) -> Condition:
    """`status` None is "Unknown"."""
    if len(message) > MAX_MESSAGE_LENGTH:
        message = message[: MAX_MESSAGE_LENGTH - 3] + "..."
    return {
        "type": type,
        "status": "Unknown" if status is None else ("True" if status else "False"),
        "observedGeneration": generation,
        "reason": reason,
        "message": message,
    }


def with_condition(conditions: list[Condition], added: Condition) -> list[Condition]:
    """`conditions` with `added` replacing any condition of the same type (or appended)."""
    kept = [c for c in conditions if c["type"] != added["type"]]
    return [*kept, added]


def policy_ancestor(
    ref: tuple[str, str, str, str], controller_name: str, accepted: Condition
) -> dict[str, Any]:
    """One entry of a policy's `status.ancestors` (GEP-713): what it attached to, `ref` as
    (group, kind, namespace, name), and its Accepted condition."""
    group, kind, namespace, name = ref
    return {
        "ancestorRef": {"group": group, "kind": kind, "namespace": namespace, "name": name},
        "controllerName": controller_name,
        "conditions": [accepted],
    }


def joined(messages: list[str]) -> str:
    """Several problems as one message, each once, in order."""
    return "; ".join(dict.fromkeys(messages))
