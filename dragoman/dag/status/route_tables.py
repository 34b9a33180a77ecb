"""The Gateway condition of its `dragoman.dev/route-tables` annotation: present only on a
Gateway that has the annotation, so every other Gateway's status is as it was."""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.dag.conditions import Condition, condition, joined
from dragoman.dag.frontends.listeners import GatewayVerdict
from dragoman.dag.frontends.route_tables import PER_HOST, ROUTE_TABLES
from dragoman.dag.model import Problem

ROUTE_TABLES_PER_HOST = "dragoman.dev/RouteTablesPerHost"


def route_tables_condition(
    verdict: GatewayVerdict, unscoped: Sequence[Problem], generation: int
) -> Condition | None:
    """Whether the Gateway's plain-HTTP ports are served with a route table per hostname;
    `unscoped`: why some of its listeners' ports are not."""
    gateway = verdict.gateway
    if ROUTE_TABLES not in gateway.meta.annotations:
        return None
    problem = verdict.route_tables_problem
    if problem is not None:
        return condition(ROUTE_TABLES_PER_HOST, False, problem.reason, problem.message, generation)
    if gateway.meta.annotations[ROUTE_TABLES] != PER_HOST:
        return condition(
            ROUTE_TABLES_PER_HOST, False, "Shared", "one route table per port", generation
        )
    if unscoped:
        reasons = sorted({f"{p.field}: {p.message}" for p in unscoped})
        return condition(
            ROUTE_TABLES_PER_HOST, False, unscoped[0].reason, joined(reasons), generation
        )
    return condition(
        ROUTE_TABLES_PER_HOST,
        True,
        "PerHost",
        "plain-HTTP ports are served with a route table per hostname (scoped RDS): a Host "
        "is matched exactly and case-sensitively, and a Host no route names gets 404",
        generation,
    )
