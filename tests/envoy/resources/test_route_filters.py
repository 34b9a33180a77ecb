"""DAG routes with Gateway API matches, filters, timeouts and gRPC → Envoy route protos, and
h2c clusters → HTTP/2 protocol options."""

from __future__ import annotations

import pytest
from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_pb2

from dragoman.dag.model import (
    H2C,
    Backend,
    DirectResponse,
    DnsCluster,
    EdsCluster,
    Forward,
    HeaderEdits,
    Mirror,
    PathRewrite,
    Redirect,
    Retry,
    Route,
    RouteMatch,
    ValueMatch,
)
from dragoman.envoy.resources.cluster_messages import HTTP_PROTOCOL_OPTIONS, cluster
from dragoman.envoy.resources.route_messages import route
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.objects import ObjectKey

SOURCE = ObjectKey("HTTPRoute", "default", "r")
WEB = Backend("default/web/80", 1)


def envoy_route(
    match: RouteMatch, action: Forward | Redirect | DirectResponse, **extra: HeaderEdits
) -> rc_pb2.Route:
    return route(Route(match, action, SOURCE, 0, **extra))


def prefix(value: str) -> RouteMatch:
    return RouteMatch("PathPrefix", value)


def test_headers_query_params_method_and_regex_path() -> None:
    match = envoy_route(
        RouteMatch(
            "RegularExpression",
            "/v[0-9]+",
            headers=(ValueMatch("version", "one"), ValueMatch("x-id", "[a-f]+", regex=True)),
            query_params=(ValueMatch("animal", "whale"),),
            method="PATCH",
        ),
        DirectResponse(200),
    ).match
    assert match.safe_regex.regex == "/v[0-9]+"
    assert [
        (h.name, h.string_match.exact, h.string_match.safe_regex.regex) for h in match.headers
    ] == [
        ("version", "one", ""),
        ("x-id", "", "[a-f]+"),
        (":method", "PATCH", ""),
    ]
    (query,) = match.query_parameters
    assert (query.name, query.string_match.exact) == ("animal", "whale")
    assert not match.HasField("grpc")


def test_grpc_routes_match_only_grpc_requests_and_follow_the_client_deadline() -> None:
    message = envoy_route(
        RouteMatch("Exact", "/pkg.Echo/Say", grpc=True),
        Forward((Backend("default/echo/50051/h2c", 1), Backend(None, 1)), timeout_ms=0, grpc=True),
    )
    assert message.match.HasField("grpc")
    action = message.route
    assert action.timeout.ToMilliseconds() == 0
    assert action.max_stream_duration.HasField("grpc_timeout_header_max")
    # The invalid share answers 503, which gRPC clients read as UNAVAILABLE.
    assert action.cluster_not_found_response_code == rc_pb2.RouteAction.SERVICE_UNAVAILABLE


def test_grpc_rule_without_backends_answers_503() -> None:
    message = envoy_route(prefix("/"), Forward((Backend(None, 1),), grpc=True))
    assert message.direct_response.status == 503


def test_rule_level_header_modifiers() -> None:
    edits = HeaderEdits(set=(("X-Set", "a"),), add=(("X-Add", "b"),), remove=("X-Gone",))
    message = envoy_route(
        prefix("/"), Forward((WEB,)), request_headers=edits, response_headers=edits
    )
    for added, removed in (
        (message.request_headers_to_add, message.request_headers_to_remove),
        (message.response_headers_to_add, message.response_headers_to_remove),
    ):
        assert [(h.header.key, h.header.value, h.append_action) for h in added] == [
            ("X-Set", "a", base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD),
            ("X-Add", "b", base_pb2.HeaderValueOption.APPEND_IF_EXISTS_OR_ADD),
        ]
        assert list(removed) == ["X-Gone"]


def test_backend_filters_need_weighted_clusters_even_for_one_backend() -> None:
    edits = HeaderEdits(set=(("backend", "v1"),))
    action = envoy_route(
        prefix("/"), Forward((Backend("default/web/80", 1, request_headers=edits),))
    ).route
    assert action.cluster == ""
    (only,) = action.weighted_clusters.clusters
    assert only.name == "default/web/80"
    assert [(h.header.key, h.header.value) for h in only.request_headers_to_add] == [
        ("backend", "v1")
    ]


def test_same_cluster_with_different_backend_filters_stays_apart() -> None:
    one, two = HeaderEdits(set=(("b", "1"),)), HeaderEdits(set=(("b", "2"),))
    action = envoy_route(
        prefix("/"),
        Forward(
            (
                Backend("default/web/80", 1, request_headers=one),
                Backend("default/web/80", 2, request_headers=two),
                Backend("default/web/80", 3, request_headers=one),
            )
        ),
    ).route
    assert [(c.name, c.weight.value) for c in action.weighted_clusters.clusters] == [
        ("default/web/80", 4),
        ("default/web/80", 2),
    ]


@pytest.mark.parametrize(
    ("match_prefix", "replacement", "prefix_rewrite", "regex", "substitution"),
    [
        ("/prefix/one", "/one", "/one", "", ""),
        ("/prefix/one/", "/one/", "/one", "", ""),
        ("/strip-prefix", "/", "", "^/strip\\-prefix/*", "/"),
        ("/strip-prefix", "", "", "^/strip\\-prefix/*", "/"),
        ("/", "/api", "/api/", "", ""),
    ],
)
def test_replace_prefix_match(
    match_prefix: str, replacement: str, prefix_rewrite: str, regex: str, substitution: str
) -> None:
    rewrite = PathRewrite("ReplacePrefixMatch", replacement, prefix=match_prefix)
    action = envoy_route(prefix(match_prefix), Forward((WEB,), path_rewrite=rewrite)).route
    assert action.prefix_rewrite == prefix_rewrite
    assert action.regex_rewrite.pattern.regex == regex
    assert action.regex_rewrite.substitution == substitution


def test_replace_full_path_and_host() -> None:
    action = envoy_route(
        prefix("/full"),
        Forward(
            (WEB,),
            auto_host_rewrite=True,
            host_rewrite="one.example.org",
            path_rewrite=PathRewrite("ReplaceFullPath", "/one"),
        ),
    ).route
    assert (action.regex_rewrite.pattern.regex, action.regex_rewrite.substitution) == (
        "^/.*$",
        "/one",
    )
    # An explicit hostname wins over the automatic rewrite for external backends.
    assert action.host_rewrite_literal == "one.example.org"
    assert not action.HasField("auto_host_rewrite")


@pytest.mark.parametrize(
    ("redirect", "expected"),
    [
        (Redirect(), {"response_code": rc_pb2.RedirectAction.FOUND}),
        (
            Redirect(301, "https", "example.org", location_port=8443),
            {
                "response_code": rc_pb2.RedirectAction.MOVED_PERMANENTLY,
                "scheme_redirect": "https",
                "host_redirect": "example.org",
                "port_redirect": 8443,
            },
        ),
        (
            Redirect(303, path=PathRewrite("ReplaceFullPath", "/full")),
            {"response_code": rc_pb2.RedirectAction.SEE_OTHER, "path_redirect": "/full"},
        ),
        (
            Redirect(307, path=PathRewrite("ReplacePrefixMatch", "/new", prefix="/old")),
            {"response_code": rc_pb2.RedirectAction.TEMPORARY_REDIRECT, "prefix_rewrite": "/new"},
        ),
        (Redirect(308), {"response_code": rc_pb2.RedirectAction.PERMANENT_REDIRECT}),
    ],
)
def test_redirects(redirect: Redirect, expected: dict[str, object]) -> None:
    message = envoy_route(prefix("/old"), redirect).redirect
    assert message == rc_pb2.RedirectAction(**expected)  # type: ignore[arg-type]


def test_mirrors_keep_host_and_take_their_share() -> None:
    action = envoy_route(
        prefix("/"),
        Forward(
            (WEB,),
            mirrors=(
                Mirror("default/shadow/80"),
                Mirror("default/api/443", 25, 50, host_rewrite="api.example.com"),
            ),
        ),
    ).route
    everything, half = action.request_mirror_policies
    assert everything.cluster == "default/shadow/80"
    assert everything.disable_shadow_host_suffix_append
    assert not everything.HasField("runtime_fraction")
    assert half.runtime_fraction.default_value.numerator == 500_000
    # An ExternalName mirror is reached with its own name in Host.
    assert half.host_rewrite_literal == "api.example.com"


def test_timeouts() -> None:
    action = envoy_route(prefix("/"), Forward((WEB,), timeout_ms=10_000, per_try_timeout_ms=500))
    assert action.route.timeout.ToMilliseconds() == 10_000
    assert action.route.retry_policy.per_try_timeout.ToMilliseconds() == 500
    assert action.route.retry_policy.num_retries.value == 0
    unset = envoy_route(prefix("/"), Forward((WEB,))).route
    assert not unset.HasField("timeout")  # Envoy's 15 s default
    assert not unset.HasField("retry_policy")


def test_retries_with_codes_backoff_and_a_per_try_timeout() -> None:
    retry = Retry(attempts=2, codes=(500, 503), backoff_ms=250)
    action = envoy_route(
        prefix("/"), Forward((WEB,), timeout_ms=0, per_try_timeout_ms=200, retry=retry)
    ).route
    expected = rc_pb2.RetryPolicy(
        retry_on="connect-failure,refused-stream,reset,retriable-status-codes",
        retriable_status_codes=[500, 503],
    )
    expected.num_retries.value = 2
    expected.per_try_timeout.FromMilliseconds(200)
    expected.retry_back_off.base_interval.FromMilliseconds(250)
    assert action.retry_policy == expected
    assert action.timeout.ToMilliseconds() == 0


def test_retries_without_codes_retry_connection_errors_only() -> None:
    action = envoy_route(prefix("/"), Forward((WEB,), retry=Retry(attempts=3))).route
    expected = rc_pb2.RetryPolicy(retry_on="connect-failure,refused-stream,reset")
    expected.num_retries.value = 3
    assert action.retry_policy == expected
    assert not action.HasField("timeout")


def test_h2c_clusters_speak_http2_and_http1_clusters_stay_plain() -> None:
    service = ObjectKey("Service", "default", "echo")
    options = TranslateOptions()
    for value in (
        EdsCluster("default/echo/50051/h2c", service, 50051, 50051, protocol=H2C),
        DnsCluster("default/echo/50051/h2c", service, "echo.example.com", 50051, protocol=H2C),
    ):
        message = cluster(value, options)
        protocol = http_options_pb2.HttpProtocolOptions()
        message.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].Unpack(protocol)
        assert protocol.explicit_http_config.HasField("http2_protocol_options")
    plain = cluster(EdsCluster("default/web/80", service, 80, 8080), options)
    assert not plain.typed_extension_protocol_options
