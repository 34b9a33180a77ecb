"""One HTTPRoute or GRPCRoute to its ranked Envoy routes, the clusters they use and every
problem found, whether or not the route attaches anywhere (so all its problems show)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import Cluster, Problem
from dragoman.dag.routes.actions import grpc_rule_action, http_rule_action
from dragoman.dag.routes.ranking import RankedRoute, ranked_grpc_routes, ranked_routes
from dragoman.objects import GRPCRoute, HTTPRoute


@dataclass(frozen=True, slots=True)
class RouteRules:
    ranked: tuple[RankedRoute, ...]
    clusters: Mapping[str, Cluster]  # by name, every valid cluster a rule sends requests to
    problems: tuple[Problem, ...]


def route_rules(route: HTTPRoute | GRPCRoute, context: BuildContext) -> RouteRules:
    if isinstance(route, HTTPRoute):
        actions = [
            http_rule_action(route, index, rule, context) for index, rule in enumerate(route.rules)
        ]
        ranked, match_problems = ranked_routes(route, actions)
    else:
        actions = [
            grpc_rule_action(route, index, rule, context) for index, rule in enumerate(route.rules)
        ]
        ranked, match_problems = ranked_grpc_routes(route, actions)
    clusters: dict[str, Cluster] = {}
    problems: list[Problem] = []
    for action in actions:
        for cluster in action.clusters:
            clusters[cluster.name] = cluster
        problems.extend(action.problems)
    if isinstance(route, HTTPRoute):
        problems.extend(_experimental_fields(route))
    return RouteRules(tuple(ranked), clusters, (*problems, *match_problems))


# What each experimental rule field dragoman does not serve means for traffic.
_NOT_SERVED = {
    "sessionPersistence": "requests are not kept on one backend",
}


def _experimental_fields(route: HTTPRoute) -> list[Problem]:
    return [
        Problem(
            route.key,
            f"spec.rules[{index}].{name}",
            "UnsupportedValue",
            f"{name} is an experimental Gateway API field dragoman does not implement: the "
            f"rule is served without it ({_NOT_SERVED.get(name, 'it has no effect')}); "
            "remove it to clear this condition",
        )
        for index, rule in enumerate(route.rules)
        for name in rule.experimental_fields
    ]
