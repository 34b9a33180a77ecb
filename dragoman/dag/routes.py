"""HTTPRoute rules to Envoy routes, each with its Gateway API match precedence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.model import DirectResponse, Forward, Problem, Route, RouteMatch
from dragoman.objects import HTTPRoute, HTTPRouteMatch

SUPPORTED_PATH_TYPES = ("Exact", "PathPrefix")

# An absent or empty match list matches every request.
MATCH_ALL = (HTTPRouteMatch(),)

# Sorts ascending into the order Envoy must try routes in; unique per (route, rule, match).
Precedence = tuple[int, int, str, str, str, int, int]


@dataclass(frozen=True, slots=True)
class RankedRoute:
    precedence: Precedence
    route: Route


def ranked_routes(
    http_route: HTTPRoute, actions: Sequence[Forward | DirectResponse]
) -> tuple[list[RankedRoute], list[Problem]]:
    """One route per (rule, match); `actions[i]` is what rule i does."""
    ranked: list[RankedRoute] = []
    problems: list[Problem] = []
    for rule_index, (rule, action) in enumerate(zip(http_route.rules, actions, strict=True)):
        for match_index, match in enumerate(rule.matches or MATCH_ALL):
            path = match.path
            if path.type not in SUPPORTED_PATH_TYPES:
                problems.append(
                    Problem(
                        object=http_route.key,
                        field=f"spec.rules[{rule_index}].matches[{match_index}].path.type",
                        reason="UnsupportedValue",
                        message=f"path match type {path.type!r} is not supported; this match "
                        f"is skipped (supported: {', '.join(SUPPORTED_PATH_TYPES)})",
                    )
                )
                continue
            route = Route(
                match=RouteMatch(path_type=path.type, path=path.value),
                action=action,
                source=http_route.key,
                rule_index=rule_index,
            )
            precedence = _precedence(http_route, match, rule_index, match_index)
            ranked.append(RankedRoute(precedence, route))
    return ranked, problems


def _precedence(
    http_route: HTTPRoute, match: HTTPRouteMatch, rule_index: int, match_index: int
) -> Precedence:
    # Gateway API order: Exact paths, then longer prefixes (method, header and query match
    # counts go here once matched on), then the oldest route, then namespace/name, then the
    # first rule and match in list order.
    return (
        0 if match.path.type == "Exact" else 1,
        -len(match.path.value),
        http_route.meta.creation_timestamp,
        http_route.meta.namespace,
        http_route.meta.name,
        rule_index,
        match_index,
    )
