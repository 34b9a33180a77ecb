"""One HTTPRoute or GRPCRoute to its ranked Envoy routes, the clusters they use and every
problem found, whether or not the route attaches anywhere (so all its problems show)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.actions import grpc_rule_action, http_rule_action
from dragoman.dag.grants import NO_GRANTS, ReferenceGrants
from dragoman.dag.model import Cluster, Problem
from dragoman.dag.options import BuildOptions
from dragoman.dag.routes import RankedRoute, ranked_grpc_routes, ranked_routes
from dragoman.dag.upstreams import NO_UPSTREAM_INPUTS, UpstreamInputs
from dragoman.objects import GRPCRoute, HTTPRoute, Service
from dragoman.store import NamespacedName


@dataclass(frozen=True, slots=True)
class RouteRules:
    ranked: tuple[RankedRoute, ...]
    clusters: Mapping[str, Cluster]  # by name, every valid cluster a rule sends requests to
    problems: tuple[Problem, ...]


def route_rules(
    route: HTTPRoute | GRPCRoute,
    services: Mapping[NamespacedName, Service],
    options: BuildOptions,
    grants: ReferenceGrants = NO_GRANTS,
    upstream: UpstreamInputs = NO_UPSTREAM_INPUTS,
) -> RouteRules:
    if isinstance(route, HTTPRoute):
        actions = [
            http_rule_action(route, index, rule, services, options, grants, upstream)
            for index, rule in enumerate(route.rules)
        ]
        ranked, match_problems = ranked_routes(route, actions)
    else:
        actions = [
            grpc_rule_action(route, index, rule, services, options, grants, upstream)
            for index, rule in enumerate(route.rules)
        ]
        ranked, match_problems = ranked_grpc_routes(route, actions)
    clusters = {cluster.name: cluster for action in actions for cluster in action.clusters}
    problems = [problem for action in actions for problem in action.problems]
    return RouteRules(tuple(ranked), clusters, (*problems, *match_problems))
