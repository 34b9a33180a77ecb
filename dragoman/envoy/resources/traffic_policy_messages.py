"""An XBackendTrafficPolicy (dag.model.ClusterTraffic) written into Envoy: the retry budget
on the cluster's circuit breakers, session persistence as the stateful_session filter.

The filter sits in the connection managers whose routes keep sessions (no other listener
changes), without a session of its own; each route to a Service with sessionPersistence
carries its session as per-route configuration, marked optional so that a client without the
filter (a proxyless gRPC client) ignores it rather than refuse the route table.

Every value was bounded where it was read (dragoman.sources.parsers.xbackend_traffic_policy),
so nothing here can make Envoy reject a Cluster or a Route."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, extension_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2
from envoy.type.http.v3 import cookie_pb2 as http_cookie_pb2

from dragoman.dag.model import AggregateCluster, StatefulSession
from dragoman.envoy.resources.common_messages import pack, seconds
from dragoman.objects.xbackend_traffic_policy import RetryBudget

STATEFUL_SESSION_FILTER = "envoy.filters.http.stateful_session"
COOKIE_SESSION = "envoy.http.stateful_session.cookie"
HEADER_SESSION = "envoy.http.stateful_session.header"


def apply_retry_budget(message: cluster_pb2.Cluster, budget: RetryBudget) -> None:
    """Envoy's retry budget on the cluster's default-priority circuit breakers (those of a
    BackendPolicy, if any, kept): retries allowed up to `percent` of the active requests, and
    at least `min_retry_count` at once. Envoy then ignores the thresholds' max_retries."""
    thresholds = next(
        (t for t in message.circuit_breakers.thresholds if t.priority == base_pb2.DEFAULT),
        None,
    )
    if thresholds is None:
        thresholds = message.circuit_breakers.thresholds.add(priority=base_pb2.DEFAULT)
    thresholds.retry_budget.budget_percent.value = float(budget.percent)
    thresholds.retry_budget.min_retry_concurrency.value = budget.min_retry_count


def aggregate_retry_budget(value: AggregateCluster) -> RetryBudget | None:
    """The retry budget of the Service a failover aggregate serves (its own child's; not
    that of a Service it fails over to, or of the pods an ExternalName prefers)."""
    own = (child for child in value.children if child.service == value.service)
    traffic = next((child.traffic for child in own if child.traffic is not None), None)
    return traffic.retry_budget if traffic is not None else None


def stateful_session_filter() -> stateful_session_pb2.StatefulSession:
    """The connection manager's filter: no session of its own (routes bring theirs)."""
    return stateful_session_pb2.StatefulSession()


def stateful_session_per_route(session: StatefulSession) -> rc_pb2.FilterConfig:
    """A route's session: a cookie Envoy sets (a session cookie, or with a Max-Age when
    Permanent), or a header the client sends back; an endpoint that is gone is replaced."""
    if session.header:
        state = extension_pb2.TypedExtensionConfig(
            name=HEADER_SESSION,
            typed_config=pack(header_pb2.HeaderBasedSessionState(name=session.name)),
        )
    else:
        cookie = http_cookie_pb2.Cookie(name=session.name, path="/")
        if session.cookie_ttl_s is not None:
            cookie.ttl.CopyFrom(seconds(session.cookie_ttl_s))
        state = extension_pb2.TypedExtensionConfig(
            name=COOKIE_SESSION,
            typed_config=pack(cookie_pb2.CookieBasedSessionState(cookie=cookie)),
        )
    per_route = stateful_session_pb2.StatefulSessionPerRoute(
        stateful_session=stateful_session_pb2.StatefulSession(session_state=state)
    )
    return rc_pb2.FilterConfig(config=pack(per_route), is_optional=True)
