"""Status of dragoman's GatewayClasses and Gateways, listener by listener."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dragoman.dag.conditions import GATEWAY_API_VERSION, Condition, condition, joined
from dragoman.dag.frontends.client_validation import (
    CONFIGURATION_CHANGED,
    INSECURE_FRONTEND_VALIDATION_MODE,
    insecure_fields,
)
from dragoman.dag.frontends.gateway_classes import ClassVerdict
from dragoman.dag.frontends.listeners import GatewayVerdict, ListenerVerdict
from dragoman.dag.model import ObjectStatus, Problem
from dragoman.dag.status.route_tables import route_tables_condition
from dragoman.dag.status.supported_features import supported_features
from dragoman.objects import Gateway


def gateway_class_status(verdict: ClassVerdict) -> ObjectStatus:
    gateway_class = verdict.gateway_class
    generation = gateway_class.meta.generation
    if verdict.problem is not None:
        accepted = condition(
            "Accepted", False, verdict.problem.reason, verdict.problem.message, generation
        )
        # None supported: a class refused after being accepted must not keep its old list.
        return ObjectStatus(
            key=gateway_class.key,
            api_version=GATEWAY_API_VERSION,
            status={"conditions": [accepted], "supportedFeatures": []},
        )
    accepted = condition(
        "Accepted", True, "Accepted", "dragoman serves Gateways of this class", generation
    )
    return ObjectStatus(
        key=gateway_class.key,
        api_version=GATEWAY_API_VERSION,
        status={"conditions": [accepted], "supportedFeatures": supported_features()},
    )


def gateway_status(
    verdict: GatewayVerdict,
    attached: Mapping[str, int],
    notes: Mapping[int, str] | None = None,
    listener_sets: int | None = None,
    unscoped: Sequence[Problem] = (),
) -> ObjectStatus:
    """`attached`: how many routes each listener (by name) accepted; `notes`: a remark for
    the Programmed message of listeners (by index), such as being left out of a shared port;
    `listener_sets`: how many ListenerSets the Gateway took (None: it allows none);
    `unscoped`: why some of its listeners keep one route table though it asks for one per
    hostname.

    A ListenerSet's status has the same shape (conditions and listeners), and is made here
    from its verdict too."""
    gateway = verdict.gateway
    generation = gateway.meta.generation
    notes = notes or {}
    # A Gateway that is not accepted serves none of its listeners, valid or not.
    refusal = (
        f"the Gateway is not accepted: {verdict.rejection.message}"
        if verdict.rejection is not None
        else None
    )
    listeners = [
        _listener_status(v, attached.get(v.name, 0), generation, notes.get(v.index), refusal)
        for v in verdict.listeners
    ]
    conditions = _gateway_conditions(verdict, generation)
    if isinstance(gateway, Gateway) and (insecure := insecure_fields(gateway)):
        # GEP-91: said on the Gateway for as long as clients may get through unchecked.
        conditions.append(
            condition(
                INSECURE_FRONTEND_VALIDATION_MODE,
                True,
                CONFIGURATION_CHANGED,
                f"{joined(list(insecure))}: mode AllowInsecureFallback lets clients without "
                "a valid certificate through",
                generation,
            )
        )
    if (route_tables := route_tables_condition(verdict, unscoped, generation)) is not None:
        conditions.append(route_tables)
    status: dict[str, Any] = {"conditions": conditions, "listeners": listeners}
    if listener_sets is not None:
        status["attachedListenerSets"] = listener_sets
    return ObjectStatus(key=gateway.key, api_version=GATEWAY_API_VERSION, status=status)


def _gateway_conditions(verdict: GatewayVerdict, generation: int) -> list[Condition]:
    note = f" ({verdict.note})" if verdict.note else ""
    if verdict.rejection is not None:
        message = verdict.rejection.message
        return [
            condition("Accepted", False, verdict.rejection.reason, message, generation),
            condition("Programmed", False, "Invalid", f"not accepted: {message}", generation),
        ]
    invalid = [v for v in verdict.listeners if not _valid(v)]
    served = verdict.served()
    if not verdict.accepted:
        accepted = condition(
            "Accepted",
            False,
            "ListenersNotValid",
            f"no listener is accepted: {_listing(invalid)}{note}",
            generation,
        )
    elif invalid:
        accepted = condition(
            "Accepted",
            True,
            "ListenersNotValid",
            f"accepted, but some listeners are not valid: {_listing(invalid)}{note}",
            generation,
        )
    else:
        accepted = condition(
            "Accepted", True, "Accepted", f"accepted by dragoman{note}", generation
        )
    if served:
        names = ", ".join(repr(v.name) for v in served)
        programmed = condition(
            "Programmed", True, "Programmed", f"serving listeners {names}", generation
        )
    else:
        programmed = condition(
            "Programmed", False, "Invalid", "no listener can be served", generation
        )
    if getattr(verdict.gateway, "backend_client_certificate", None) is None:
        return [accepted, programmed]
    # Only a Gateway naming a client certificate has references of its own to report.
    problem = verdict.client_certificate_problem
    if problem is not None:
        resolved = condition(
            "ResolvedRefs",
            False,
            problem.reason,
            f"{problem.message}; backends that ask for a client certificate get none",
            generation,
        )
    else:
        resolved = condition(
            "ResolvedRefs",
            True,
            "ResolvedRefs",
            "the client certificate is presented to backends reached over TLS",
            generation,
        )
    return [accepted, programmed, resolved]


def _valid(verdict: ListenerVerdict) -> bool:
    return verdict.not_accepted is None and verdict.conflict is None and not verdict.unresolved


def _listing(verdicts: list[ListenerVerdict]) -> str:
    return joined([f"{v.name!r}: {_first_problem(v)}" for v in verdicts])


def _first_problem(verdict: ListenerVerdict) -> str:
    for problem in (verdict.not_accepted, verdict.conflict, *verdict.unresolved):
        if problem is not None:
            return problem.message
    return "valid"


def _listener_status(
    verdict: ListenerVerdict,
    attached: int,
    generation: int,
    note: str | None,
    gateway_refusal: str | None,
) -> dict[str, Any]:
    conditions: list[Condition] = []
    if verdict.not_accepted is not None:
        problem = verdict.not_accepted
        conditions.append(condition("Accepted", False, problem.reason, problem.message, generation))
    else:
        conditions.append(condition("Accepted", True, "Accepted", "listener is valid", generation))
    reason = verdict.not_programmed_reason or gateway_refusal
    if reason is None:
        served = f"served; {note}" if note else "served"
        conditions.append(condition("Programmed", True, "Programmed", served, generation))
    else:
        conditions.append(condition("Programmed", False, "Invalid", reason, generation))
    if verdict.unresolved:
        conditions.append(
            condition(
                "ResolvedRefs",
                False,
                verdict.unresolved[0].reason,
                joined([p.message for p in verdict.unresolved]),
                generation,
            )
        )
    else:
        conditions.append(
            condition("ResolvedRefs", True, "ResolvedRefs", "all references resolved", generation)
        )
    if verdict.conflict is not None:
        problem = verdict.conflict
        conditions.append(
            condition("Conflicted", True, problem.reason, problem.message, generation)
        )
    else:
        conditions.append(condition("Conflicted", False, "NoConflicts", "no conflicts", generation))
    return {
        "name": verdict.name,
        "supportedKinds": [{"group": k.group, "kind": k.kind} for k in verdict.supported_kinds],
        "attachedRoutes": attached,
        "conditions": conditions,
    }
