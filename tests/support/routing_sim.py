"""Which DAG route Envoy would pick for a request, following Envoy's documented matching:
one virtual host (exact domain, then the longest `*.suffix`, then `*`), then the first
route whose path, headers, query parameters and gRPC flag all match. Lets the Gateway API
conformance scenarios run as unit tests; tests/e2e checks the real Envoy agrees."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

import re2

from dragoman.dag.model import ALL_GATEWAYS, Dag, Route, RouteMatch, RouteTable, VirtualHost


@dataclass(frozen=True)
class Request:
    host: str
    path: str = "/"
    headers: Mapping[str, str] = field(default_factory=dict)
    method: str = "GET"
    grpc: bool = False


def pick_virtual_host(table: RouteTable, host: str) -> VirtualHost | None:
    host = host.rsplit(":", 1)[0].lower() if host.count(":") == 1 else host.lower()
    for virtual_host in table.virtual_hosts:
        if host in virtual_host.domains:
            return virtual_host
    best: tuple[int, VirtualHost] | None = None
    for virtual_host in table.virtual_hosts:
        for domain in virtual_host.domains:
            suffix = domain[1:]
            wildcard = domain.startswith("*.") and host.endswith(suffix)
            if wildcard and len(host) > len(suffix) and (best is None or len(domain) > best[0]):
                best = (len(domain), virtual_host)
    if best is not None:
        return best[1]
    return next((v for v in table.virtual_hosts if "*" in v.domains), None)


def matches(match: RouteMatch, request: Request) -> bool:
    path, _, query = request.path.partition("?")
    if not _path_matches(match, path):
        return False
    headers = {name.lower(): value for name, value in request.headers.items()}
    for header in match.headers:
        value = headers.get(header.name.lower())
        if value is None or not _value_matches(header.value, header.regex, value):
            return False
    if match.method is not None and match.method != request.method:
        return False
    params: dict[str, str] = {}
    for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, value)  # the first value of a repeated parameter
    for param in match.query_params:
        value = params.get(param.name)
        if value is None or not _value_matches(param.value, param.regex, value):
            return False
    return not match.grpc or request.grpc


def route_for(
    dag: Dag, request: Request, port: int = 80, group: str = ALL_GATEWAYS
) -> Route | None:
    table = next(t for t in dag.groups[group].route_tables if t.name == f"http-{port}")
    virtual_host = pick_virtual_host(table, request.host)
    if virtual_host is None:
        return None
    return next((r for r in virtual_host.routes if matches(r.match, request)), None)


def _path_matches(match: RouteMatch, path: str) -> bool:
    if match.path_type == "Exact":
        return path == match.path
    if match.path_type == "RegularExpression":
        return re2.fullmatch(match.path, path) is not None
    prefix = match.path.rstrip("/")
    return not prefix or path == prefix or path.startswith(prefix + "/")


def _value_matches(expected: str, regex: bool, value: str) -> bool:
    if regex:
        return re2.fullmatch(expected, value) is not None
    return value == expected
