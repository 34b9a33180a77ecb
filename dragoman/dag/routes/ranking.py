"""HTTPRoute and GRPCRoute rules to Envoy routes, each with its Gateway API precedence.

Precedence sorts ascending into the order Envoy must try routes in, and is unique per
(route, rule, match). Its first element ranks the route kind; hostname precedence comes next
but depends on the virtual host a route lands in, so node_groups/virtual_hosts.py inserts it there.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.model import PathMatchType, Problem, Route, RouteMatch, ValueMatch
from dragoman.dag.routes.actions import RuleAction
from dragoman.dag.routes.regex import regex_problem
from dragoman.objects import (
    GRPCRoute,
    GRPCRouteMatch,
    HeaderMatch,
    HTTPRoute,
    HTTPRouteMatch,
    ObjectKey,
)

# An absent or empty match list matches every request.
MATCH_ALL = (HTTPRouteMatch(),)

# gRPC routes go first: they only match gRPC requests (content type application/grpc), and a
# gRPC request must not fall to an HTTPRoute's catch-all before them.
GRPC_RANK = 0
HTTP_RANK = 1

# Gateway API leaves the rank of RegularExpression paths to the implementation: dragoman
# tries them after Exact paths and before prefixes, longer patterns first.
PATH_RANKS = {"Exact": 0, "RegularExpression": 1, "PathPrefix": 2}

# gRPC service and method names in a path; a missing one matches any single path segment.
ANY_SEGMENT = "[^/]+"

Precedence = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class RankedRoute:
    precedence: Precedence
    route: Route


def ranked_routes(
    http_route: HTTPRoute, actions: Sequence[RuleAction]
) -> tuple[list[RankedRoute], list[Problem]]:
    """One route per (rule, match); `actions[i]` is what rule i does."""
    ranked: list[RankedRoute] = []
    problems: list[Problem] = []
    key = http_route.key  # built once: a route has many rules and matches
    age_and_name = _age_and_name(key, http_route.meta.creation_timestamp)
    for rule_index, (rule, action) in enumerate(zip(http_route.rules, actions, strict=True)):
        for match_index, match in enumerate(rule.matches or MATCH_ALL):
            route_match = _http_match(key, rule_index, match_index, match, problems)
            if route_match is None:
                continue
            route = _route(key, rule_index, route_match, action)
            precedence = (
                HTTP_RANK,
                PATH_RANKS[route_match.path_type],
                -len(route_match.path),
                0 if route_match.method else 1,
                -len(route_match.headers),
                -len(route_match.query_params),
                *age_and_name,
                rule_index,
                match_index,
            )
            ranked.append(RankedRoute(precedence, route))
    return ranked, problems


def ranked_grpc_routes(
    grpc_route: GRPCRoute, actions: Sequence[RuleAction]
) -> tuple[list[RankedRoute], list[Problem]]:
    """One route per (rule, match) of a GRPCRoute; a rule without matches matches every call."""
    ranked: list[RankedRoute] = []
    problems: list[Problem] = []
    key = grpc_route.key
    age_and_name = _age_and_name(key, grpc_route.meta.creation_timestamp)
    for rule_index, (rule, action) in enumerate(zip(grpc_route.rules, actions, strict=True)):
        for match_index, match in enumerate(rule.matches or (GRPCRouteMatch(),)):
            field = f"spec.rules[{rule_index}].matches[{match_index}]"
            route_match = _grpc_match(key, field, match, problems)
            if route_match is None:
                continue
            method = match.method
            precedence = (
                GRPC_RANK,
                -len(method.service or "") if method else 0,
                -len(method.method or "") if method else 0,
                -len(route_match.headers),
                *age_and_name,
                rule_index,
                match_index,
            )
            route = _route(key, rule_index, route_match, action)
            ranked.append(RankedRoute(precedence, route))
    return ranked, problems


def _route(source: ObjectKey, rule_index: int, match: RouteMatch, action: RuleAction) -> Route:
    return Route(
        match=match,
        action=action.action,
        source=source,
        rule_index=rule_index,
        request_headers=action.request_headers,
        response_headers=action.response_headers,
        cors=action.cors,
        credentials=action.credentials,
    )


def _age_and_name(key: ObjectKey, created: str) -> tuple[str, str, str]:
    # Across routes: the oldest first, then by namespace/name.
    return created, key.namespace, key.name


def _http_match(
    key: ObjectKey,
    rule_index: int,
    match_index: int,
    match: HTTPRouteMatch,
    problems: list[Problem],
) -> RouteMatch | None:
    """The match, or None (and a Problem) when Envoy could not evaluate one of its regexes."""
    path = match.path
    path_type = path.type
    if not (match.headers or match.query_params or path_type == "RegularExpression"):
        # No regex to check (most matches): no field path to make for a Problem.
        return RouteMatch(path_type=path_type, path=path.value, method=match.method)
    field = f"spec.rules[{rule_index}].matches[{match_index}]"
    if path.type == "RegularExpression" and not _regex_ok(
        key, f"{field}.path.value", path.value, problems
    ):
        return None
    headers = _value_matches(key, field, "headers", match.headers, problems, fold_case=True)
    queries = _value_matches(key, field, "queryParams", match.query_params, problems)
    if headers is None or queries is None:
        return None
    return RouteMatch(
        path_type=path_type,
        path=path.value,
        headers=headers,
        query_params=queries,
        method=match.method,
    )


def _grpc_match(
    key: ObjectKey, field: str, match: GRPCRouteMatch, problems: list[Problem]
) -> RouteMatch | None:
    headers = _value_matches(key, field, "headers", match.headers, problems, fold_case=True)
    if headers is None:
        return None
    method = match.method
    path_type: PathMatchType
    if method is None or (method.service is None and method.method is None):
        path_type, path = "PathPrefix", "/"
    elif method.type == "Exact":
        if method.service is not None and method.method is not None:
            path_type, path = "Exact", f"/{method.service}/{method.method}"
        elif method.service is not None:
            path_type, path = "PathPrefix", f"/{method.service}"
        else:
            path_type, path = (
                "RegularExpression",
                f"/{ANY_SEGMENT}/{re.escape(method.method or '')}",
            )
    else:
        for part, value in (("service", method.service), ("method", method.method)):
            if value is not None and not _regex_ok(key, f"{field}.method.{part}", value, problems):
                return None
        service = f"(?:{method.service})" if method.service is not None else ANY_SEGMENT
        name = f"(?:{method.method})" if method.method is not None else ANY_SEGMENT
        path_type, path = "RegularExpression", f"/{service}/{name}"
        if not _regex_ok(key, f"{field}.method", path, problems):
            return None
    return RouteMatch(path_type=path_type, path=path, headers=headers, grpc=True)


def _value_matches(
    key: ObjectKey,
    field: str,
    list_name: str,
    matches: Sequence[HeaderMatch],
    problems: list[Problem],
    *,
    fold_case: bool = False,
) -> tuple[ValueMatch, ...] | None:
    """Header (names fold case) or query parameter matches (`field`.`list_name`); of
    equivalent names the first."""
    if not matches:
        return ()
    seen: set[str] = set()
    result: list[ValueMatch] = []
    for index, match in enumerate(matches):
        name = match.name.lower() if fold_case else match.name
        if name in seen:
            continue
        seen.add(name)
        regex = match.type == "RegularExpression"
        at = f"{field}.{list_name}[{index}].value" if regex else ""
        if regex and not _regex_ok(key, at, match.value, problems):
            return None
        result.append(ValueMatch(name=name, value=match.value, regex=regex))
    return tuple(result)


def _regex_ok(key: ObjectKey, field: str, pattern: str, problems: list[Problem]) -> bool:
    problem = regex_problem(pattern)
    if problem is None:
        return True
    problems.append(
        Problem(
            object=key,
            field=field,
            reason="UnsupportedValue",
            message=f"{problem}; this match is skipped",
        )
    )
    return False
