"""Statuses for what the build cannot speak for: objects the parser cannot read (their
entries of ours say Accepted=False, naming the field) and Gateways dragoman served and
serves no more (remembered, forgotten once deleted)."""

from __future__ import annotations

from typing import Any

from dragoman.dag.model import ObjectStatus
from dragoman.kubernetes.cache import CachedObject, ObjectCache
from dragoman.kubernetes.status_fallback import ServedGateways, unreadable_statuses
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME
from dragoman.objects import ObjectKey

OURS = "dragoman.dev/gateway-controller"
THEIRS = "example.com/other-controller"
GATEWAY_V1 = "gateway.networking.k8s.io/v1"
GATEWAY = ObjectKey("Gateway", "default", "gw")
CLASS = ObjectKey("GatewayClass", "", "dragoman")
# What the build computed: our GatewayClass and Gateway.
DESIRED = {
    CLASS: ObjectStatus(CLASS, GATEWAY_V1, {"conditions": []}),
    GATEWAY: ObjectStatus(GATEWAY, GATEWAY_V1, {"conditions": [], "listeners": []}),
}


def entries(kind: str, *objects: dict[str, Any]) -> list[CachedObject]:
    cache = ObjectCache()
    cache.replace((kind, ""), KINDS_BY_NAME[kind], list(objects))
    return list(cache.entries())


def entry_for(
    parent_name: str, controller: str, ref: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "parentRef": ref
        or {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": parent_name},
        "controllerName": controller,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}],
    }


def bad_route(parent_refs: list[Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    route: dict[str, Any] = {
        "apiVersion": GATEWAY_V1,
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "default", "generation": 4},
        "spec": {
            "parentRefs": parent_refs,
            "rules": [{"backendRefs": [{"name": "web", "port": "eighty"}]}],
        },
    }
    if status is not None:
        route["status"] = status
    return route


def test_an_unreadable_route_says_not_accepted_to_each_of_our_parents() -> None:
    held = {"parents": [entry_for("gw", OURS), entry_for("elsewhere", THEIRS)]}
    route = bad_route([{"name": "gw"}, {"name": "elsewhere"}], held)
    statuses = unreadable_statuses(entries("HTTPRoute", route), DESIRED, OURS)
    key = ObjectKey("HTTPRoute", "default", "web")
    assert list(statuses) == [key]
    [parent] = statuses[key].status["parents"]
    assert parent["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
    }
    assert parent["controllerName"] == OURS
    [accepted] = parent["conditions"]
    assert (accepted["type"], accepted["status"], accepted["reason"]) == (
        "Accepted",
        "False",
        "UnsupportedValue",
    )
    assert accepted["observedGeneration"] == 4
    assert "spec.rules[0].backendRefs[0].port" in accepted["message"]
    assert "eighty" in accepted["message"]


def test_parent_refs_to_our_gateways_count_even_before_we_wrote_any_status() -> None:
    refs: list[Any] = [
        {"name": "gw", "sectionName": "http"},  # ours
        {"name": "gw", "namespace": "other"},  # no such Gateway of ours
        {"name": "elsewhere"},  # not ours
        {"name": "gw", "kind": "Service", "group": ""},  # not a Gateway
        {"name": 7},  # malformed: skipped
        "nonsense",
    ]
    statuses = unreadable_statuses(entries("HTTPRoute", bad_route(refs)), DESIRED, OURS)
    [parent] = statuses[ObjectKey("HTTPRoute", "default", "web")].status["parents"]
    assert parent["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
        "sectionName": "http",
    }


def test_a_parent_named_both_ways_gets_one_entry() -> None:
    route = bad_route([{"name": "gw"}], {"parents": [entry_for("gw", OURS, {"name": "gw"})]})
    statuses = unreadable_statuses(entries("HTTPRoute", route), DESIRED, OURS)
    parents = statuses[ObjectKey("HTTPRoute", "default", "web")].status["parents"]
    assert [p["parentRef"] for p in parents] == [{"name": "gw"}]


def test_an_unreadable_route_of_no_gateway_of_ours_gets_nothing() -> None:
    route = bad_route([{"name": "elsewhere"}], {"parents": [entry_for("elsewhere", THEIRS)]})
    assert unreadable_statuses(entries("HTTPRoute", route), DESIRED, OURS) == {}


def test_readable_objects_and_kinds_without_status_get_nothing() -> None:
    good = bad_route([{"name": "gw"}])
    good["spec"]["rules"][0]["backendRefs"][0]["port"] = 80
    grant = {
        "apiVersion": GATEWAY_V1,
        "kind": "ReferenceGrant",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"from": "nonsense"},
    }
    assert unreadable_statuses(entries("HTTPRoute", good), DESIRED, OURS) == {}
    assert unreadable_statuses(entries("ReferenceGrant", grant), DESIRED, OURS) == {}


def test_an_unreadable_policy_withdraws_acceptance_from_its_ancestors() -> None:
    ancestor = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    policy = {
        "apiVersion": GATEWAY_V1,
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"targetRefs": "nonsense"},
        "status": {
            "ancestors": [
                {"ancestorRef": ancestor, "controllerName": OURS, "conditions": []},
                {"ancestorRef": ancestor, "controllerName": THEIRS, "conditions": []},
            ]
        },
    }
    statuses = unreadable_statuses(entries("BackendTLSPolicy", policy), DESIRED, OURS)
    [entry] = statuses[ObjectKey("BackendTLSPolicy", "default", "p")].status["ancestors"]
    assert (entry["ancestorRef"], entry["controllerName"]) == (ancestor, OURS)
    assert [(c["status"], c["reason"]) for c in entry["conditions"]] == [("False", "Invalid")]
    assert "spec.targetRefs" in entry["conditions"][0]["message"]


def test_an_unreadable_gateway_of_our_class_is_not_accepted_nor_programmed() -> None:
    def gateway(name: str, class_name: str) -> dict[str, Any]:
        return {
            "apiVersion": GATEWAY_V1,
            "kind": "Gateway",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"gatewayClassName": class_name, "listeners": "nonsense"},
        }

    found = entries("Gateway", gateway("bad", "dragoman"), gateway("foreign", "other"))
    statuses = unreadable_statuses(found, DESIRED, OURS)
    assert list(statuses) == [ObjectKey("Gateway", "default", "bad")]
    status = statuses[ObjectKey("Gateway", "default", "bad")].status
    assert status["listeners"] == []
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Accepted", "False", "Invalid"),
        ("Programmed", "False", "Invalid"),
    ]
    assert "spec.listeners" in status["conditions"][0]["message"]


def test_served_gateways_are_remembered_until_deleted() -> None:
    served = ServedGateways()
    other = ObjectKey("Gateway", "default", "other")
    route = ObjectKey("HTTPRoute", "default", "web")
    statuses = {
        GATEWAY: ObjectStatus(GATEWAY, GATEWAY_V1, {"conditions": ["first"]}),
        other: ObjectStatus(other, GATEWAY_V1, {"conditions": ["other"]}),
        route: ObjectStatus(route, GATEWAY_V1, {"parents": []}),
    }
    served.remember(statuses)
    served.remember({GATEWAY: ObjectStatus(GATEWAY, GATEWAY_V1, {"conditions": ["last"]})})
    present: dict[ObjectKey, Any] = {GATEWAY: None, other: None, route: None}
    # Both still served: nothing to hand back.
    assert served.released(statuses, present) == {}
    # `gw` no longer served: handed back with the status last computed for it.
    assert served.released({other: None}, present) == {GATEWAY: {"conditions": ["last"]}}
    # Deleted: forgotten, even once it comes back.
    assert served.released({other: None}, {other: None}) == {}
    assert served.released({other: None}, present) == {}
