"""Merging computed statuses into stored ones: transition times, other controllers'
entries, and no-op detection. Pure functions, no server."""

from __future__ import annotations

from typing import Any

from dragoman.dag.status.stamp import stamp
from dragoman.kubernetes.status_merge import merge_status, same_status, without_our_entries

OURS = "dragoman.dev/gateway-controller"
THEIRS = "example.com/other"
T0 = "2030-01-01T00:00:00Z"
T1 = "2030-01-01T00:05:00Z"


def condition(type_: str, status: str, reason: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "", **extra}


def parent(controller: str, gateway: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "parentRef": {"name": gateway},
        "controllerName": controller,
        "conditions": list(conditions),
    }


def test_new_conditions_are_stamped_now() -> None:
    merged = merge_status(None, {"conditions": [condition("Accepted", "True")]}, OURS, T0)
    assert merged == {"conditions": [condition("Accepted", "True", lastTransitionTime=T0)]}


def test_unchanged_status_keeps_its_time_and_a_flip_gets_a_new_one() -> None:
    stored = {
        "conditions": [
            condition("Accepted", "True", lastTransitionTime=T0),
            condition("Programmed", "False", lastTransitionTime=T0),
        ]
    }
    desired = {
        "conditions": [
            condition("Accepted", "True", reason="Changed"),
            condition("Programmed", "True"),
        ]
    }
    merged = merge_status(stored, desired, OURS, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in merged["conditions"]}
    assert times == {"Accepted": T0, "Programmed": T1}
    assert merged["conditions"][0]["reason"] == "Changed"


def test_same_status_ignores_transition_times_only() -> None:
    a = {"conditions": [condition("Accepted", "True", lastTransitionTime=T0)]}
    b = {"conditions": [condition("Accepted", "True", lastTransitionTime=T1)]}
    assert same_status(a, b)
    assert not same_status(a, {"conditions": [condition("Accepted", "False")]})
    assert same_status(
        merge_status(a, {"conditions": [condition("Accepted", "True")]}, OURS, T1), a
    )


def test_other_controllers_parents_stay_where_they_are() -> None:
    theirs = parent(THEIRS, "their-gw", condition("Accepted", "True", lastTransitionTime=T0))
    stored = {
        "parents": [
            parent(OURS, "gw", condition("Accepted", "False", lastTransitionTime=T0)),
            theirs,
        ]
    }
    desired = {"parents": [parent(OURS, "gw", condition("Accepted", "True"))]}
    merged = merge_status(stored, desired, OURS, T1)
    assert merged["parents"][1] == theirs
    assert merged["parents"][0]["conditions"] == [
        condition("Accepted", "True", lastTransitionTime=T1)
    ]
    # Merging the same again is a no-op: our entry stays in place, theirs untouched.
    assert same_status(merge_status(merged, desired, OURS, T1), merged)


def test_our_entries_are_added_replaced_and_removed_but_never_theirs() -> None:
    theirs = parent(THEIRS, "gw")  # another controller may report on the same Gateway name
    stored = {"parents": [parent(OURS, "old"), theirs]}
    desired = {"parents": [parent(OURS, "new", condition("Accepted", "True"))]}
    merged = merge_status(stored, desired, OURS, T0)
    assert [(p["controllerName"], p["parentRef"]["name"]) for p in merged["parents"]] == [
        (THEIRS, "gw"),
        (OURS, "new"),
    ]


def test_parent_refs_match_with_the_defaults_the_server_fills_in() -> None:
    stored = {
        "parents": [
            {
                "parentRef": {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": "gw",
                },
                "controllerName": OURS,
                "conditions": [condition("Accepted", "True", lastTransitionTime=T0)],
            }
        ]
    }
    desired = {"parents": [parent(OURS, "gw", condition("Accepted", "True"))]}
    merged = merge_status(stored, desired, OURS, T1)
    assert merged["parents"][0]["conditions"][0]["lastTransitionTime"] == T0
    assert same_status(merged, stored)


def test_listeners_keep_their_times_by_name_and_unknown_fields_are_kept() -> None:
    stored = {
        "addresses": [{"type": "IPAddress", "value": "192.0.2.1"}],
        "listeners": [
            {"name": "b", "conditions": [condition("Programmed", "True", lastTransitionTime=T0)]},
            {"name": "a", "conditions": [condition("Programmed", "True", lastTransitionTime=T0)]},
        ],
    }
    desired = {
        "listeners": [
            {"name": "a", "conditions": [condition("Programmed", "True")]},
            {"name": "b", "conditions": [condition("Programmed", "False")]},
        ]
    }
    merged = merge_status(stored, desired, OURS, T1)
    assert merged["addresses"] == stored["addresses"]
    times = {
        listener["name"]: listener["conditions"][0]["lastTransitionTime"]
        for listener in merged["listeners"]
    }
    assert times == {"a": T0, "b": T1}


def test_withdrawing_only_touches_objects_holding_our_entries() -> None:
    assert without_our_entries({"parents": [parent(THEIRS, "gw")]}, OURS) is None
    withdrawn = without_our_entries({"parents": [parent(OURS, "gw"), parent(THEIRS, "x")]}, OURS)
    assert withdrawn == {"parents": []}
    stored = {"parents": [parent(OURS, "gw"), parent(THEIRS, "x")]}
    assert merge_status(stored, withdrawn, OURS, T0) == {"parents": [parent(THEIRS, "x")]}


def test_the_status_writer_and_the_status_command_stamp_by_the_same_rule() -> None:
    """One stamper: what the writer sends equals what `dragoman status` prints, times and key
    order included, for a status that is new, then unchanged, then flipped."""
    first = {
        "conditions": [condition("Accepted", "True"), condition("Programmed", "True")],
        "listeners": [{"name": "http", "conditions": [condition("Programmed", "True")]}],
    }
    flipped = {
        "conditions": [condition("Accepted", "True"), condition("Programmed", "False")],
        "listeners": [{"name": "http", "conditions": [condition("Programmed", "False")]}],
    }
    written = merge_status(None, first, OURS, T0)
    assert written == stamp(first, T0)
    assert list(written["conditions"][0]) == list(stamp(first, T0)["conditions"][0])
    for later, at in ((first, T1), (flipped, T1)):
        assert merge_status(written, later, OURS, at) == stamp(later, at, previous=written)
    times = [
        c["lastTransitionTime"] for c in merge_status(written, flipped, OURS, T1)["conditions"]
    ]
    assert times == [T0, T1]
