"""What proxyless gRPC clients get of an XBackendTrafficPolicy: nothing they would act on. A
route keeping a session carries no stateful_session config to them (their listeners run no
such filter), as the policy's Accepted message says
(tests/dag/upstreams/test_xbackend_traffic_policy.py)."""

from __future__ import annotations

from dragoman.dag.model import Backend, Forward, Route, RouteMatch, StatefulSession
from dragoman.envoy.grpc.grpc_messages import grpc_route
from dragoman.envoy.resources.route_messages import route
from dragoman.envoy.resources.traffic_policy_messages import STATEFUL_SESSION_FILTER
from dragoman.objects import ObjectKey

SOURCE = ObjectKey("GRPCRoute", "default", "r")


def test_a_route_keeping_a_session_carries_it_to_envoy_and_not_to_grpc_clients() -> None:
    forward = Forward(
        backends=(Backend("default/api/80", 1),),
        session=StatefulSession(header=False, name="pin"),
        grpc=True,
    )
    value = Route(RouteMatch("PathPrefix", "/"), forward, SOURCE)
    assert STATEFUL_SESSION_FILTER in route(value).typed_per_filter_config
    message = grpc_route(value)
    assert message is not None and message.route.cluster == "default/api/80"
    assert not message.typed_per_filter_config
