"""The CORS filter as Envoy receives it: in every HTTP connection manager before the router,
and a per-route policy (origins matched case-insensitively, wildcards and default ports as
the Gateway API describes them) only on routes that have a CORS filter."""

from __future__ import annotations

import re

import pytest
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2

from dragoman.dag.model import CorsPolicy, Forward, Route, RouteMatch
from dragoman.envoy.resources.cors import ALL_METHODS, CORS_FILTER, cors_policy, origin_matcher
from dragoman.envoy.resources.route_messages import route
from dragoman.objects import ObjectKey


def matches(pattern: str, origin: str) -> bool:
    matcher = origin_matcher(pattern)
    regex = matcher.safe_regex.regex
    assert regex, matcher
    flags = re.IGNORECASE if regex.startswith("(?i)") else 0
    return re.fullmatch(regex.removeprefix("(?i)"), origin, flags) is not None


@pytest.mark.parametrize(
    ("pattern", "origin", "allowed"),
    [
        ("*", "https://anything.example:8443", True),
        ("https://www.foo.com", "https://www.foo.com", True),
        ("https://www.foo.com", "HTTPS://WWW.FOO.COM", True),
        ("https://www.foo.com", "https://www.foo.com:443", True),
        ("https://www.foo.com:443", "https://www.foo.com", True),
        ("https://www.foo.com", "http://www.foo.com", False),
        ("https://www.foo.com", "https://www.foo.com:8443", False),
        ("https://www.foo.com", "https://www.foo.com.evil.example", False),
        ("https://www.foo.com", "https://wwwxfoo.com", False),  # the dot is literal
        ("https://*.bar.com", "https://a.bar.com", True),
        ("https://*.bar.com", "https://a.b.bar.com", True),
        ("https://*.bar.com", "https://bar.com", False),
        ("https://*.bar.com", "https://a.bar.com.evil.example", False),
        ("http://example.com:8080", "http://example.com:8080", True),
        ("http://example.com:8080", "http://example.com", False),
    ],
)
def test_origins_match_as_the_gateway_api_describes(
    pattern: str, origin: str, allowed: bool
) -> None:
    assert matches(pattern, origin) == allowed


def test_policy_fields() -> None:
    message = cors_policy(
        CorsPolicy(
            allow_origins=("https://www.foo.com",),
            allow_methods=("GET", "OPTIONS"),
            allow_headers=("x-header-1", "x-header-2"),
            expose_headers=("x-header-3",),
            max_age_s=3600,
            allow_credentials=True,
        )
    )
    assert message.allow_methods == "GET, OPTIONS"
    assert message.allow_headers == "x-header-1, x-header-2"
    assert message.expose_headers == "x-header-3"
    assert message.max_age == "3600"
    assert message.allow_credentials.value is True
    assert message.forward_not_matching_preflights.value is False


def test_wildcard_methods_are_listed_when_credentials_are_allowed() -> None:
    policy = CorsPolicy(allow_origins=("*",), allow_methods=("*",))
    assert cors_policy(policy).allow_methods == "*"
    assert not cors_policy(policy).HasField("allow_credentials")
    credentialed = CorsPolicy(allow_origins=("*",), allow_methods=("*",), allow_credentials=True)
    assert cors_policy(credentialed).allow_methods == ", ".join(ALL_METHODS)


def test_only_routes_with_a_policy_carry_one() -> None:
    match = RouteMatch("PathPrefix", "/")
    action = Forward(backends=())
    source = ObjectKey("HTTPRoute", "default", "r")
    plain = route(Route(match, action, source))
    assert CORS_FILTER not in plain.typed_per_filter_config
    with_cors = route(Route(match, action, source, cors=CorsPolicy(allow_origins=("*",))))
    policy = cors_pb2.CorsPolicy()
    assert with_cors.typed_per_filter_config[CORS_FILTER].Unpack(policy)
    assert isinstance(with_cors, rc_pb2.Route)
    assert policy.max_age == "5"
