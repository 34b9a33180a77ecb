"""CorsPolicy → Envoy's CORS filter: the filter sits in every HTTP connection manager, and a
route with a CORS filter carries its policy as per-route configuration (routes without one
are untouched)."""

from __future__ import annotations

import re

from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.type.matcher.v3 import regex_pb2, string_pb2
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.dag.model import CorsPolicy

CORS_FILTER = "envoy.filters.http.cors"
ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<host>[^:]+)(:(?P<port>[0-9]+))?")


def cors_filter() -> cors_pb2.Cors:
    return cors_pb2.Cors()


def cors_policy(value: CorsPolicy) -> cors_pb2.CorsPolicy:
    methods = value.allow_methods
    if methods == ("*",) and value.allow_credentials:
        # `*` must not be answered to a credentialed request: name every method instead.
        methods = ALL_METHODS
    message = cors_pb2.CorsPolicy(
        allow_origin_string_match=[origin_matcher(origin) for origin in value.allow_origins],
        allow_methods=", ".join(methods),
        allow_headers=", ".join(value.allow_headers),
        expose_headers=", ".join(value.expose_headers),
        max_age=str(value.max_age_s),
        # A preflight whose origin is not allowed is answered here, without CORS headers,
        # rather than passed to the backend.
        forward_not_matching_preflights=BoolValue(value=False),
    )
    if value.allow_credentials:
        message.allow_credentials.value = True
    return message


def origin_matcher(origin: str) -> string_pb2.StringMatcher:
    """An allowed origin as Envoy matches the request's Origin (case-insensitively).

    `*` alone matches every origin; a `*` host label matches any number of labels; an origin
    written without its scheme's default port matches with it too, and the other way round."""
    if origin == "*":
        return _regex(".+")
    found = _ORIGIN.fullmatch(origin)
    if found is None:  # the parser only lets valid origins through
        raise ValueError(f"not an origin: {origin!r}")
    scheme, host, port = found["scheme"].lower(), found["host"].lower(), found["port"]
    default = _DEFAULT_PORTS[scheme]
    host_regex = re.escape(host).replace(r"\*", "[a-z0-9.-]+")
    port_regex = f"(:{default})?" if port in (None, default) else f":{port}"
    return _regex(f"(?i){scheme}://{host_regex}{port_regex}")


def _regex(pattern: str) -> string_pb2.StringMatcher:
    return string_pb2.StringMatcher(safe_regex=regex_pb2.RegexMatcher(regex=pattern))
