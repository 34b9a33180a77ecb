"""RouteTable → envoy.config.route.v3.RouteConfiguration, with Gateway API match semantics."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from google.protobuf.wrappers_pb2 import BoolValue, UInt32Value

from dragoman.dag.model import (
    DirectResponse,
    Forward,
    Route,
    RouteMatch,
    RouteTable,
    VirtualHost,
)

# Weighted share of traffic for backends whose reference is invalid. The `dragoman:` prefix is
# reserved: no cluster ever has this name, so Envoy answers that share with
# cluster_not_found_response_code 500, as the Gateway API requires.
INVALID_BACKEND_CLUSTER = "dragoman:invalid-backend"

# What the Gateway API asks for when a rule has nothing valid to forward to.
NO_BACKEND_STATUS = 500


def route_configuration(table: RouteTable) -> route_pb2.RouteConfiguration:
    return route_pb2.RouteConfiguration(
        name=table.name,
        virtual_hosts=[virtual_host(v) for v in table.virtual_hosts],
        # Routes may name the invalid-backend cluster on purpose; never reject the table for it.
        validate_clusters=BoolValue(value=False),
    )


def virtual_host(value: VirtualHost) -> rc_pb2.VirtualHost:
    return rc_pb2.VirtualHost(
        name=value.name, domains=list(value.domains), routes=[route(r) for r in value.routes]
    )


def route(value: Route) -> rc_pb2.Route:
    message = rc_pb2.Route(name=route_name(value), match=route_match(value.match))
    action = value.action
    if isinstance(action, Forward):
        weights = merged_weights(action)
        if not weights or list(weights) == [INVALID_BACKEND_CLUSTER]:
            message.direct_response.CopyFrom(direct_response(DirectResponse(NO_BACKEND_STATUS)))
        else:
            message.route.CopyFrom(route_action(weights, action.auto_host_rewrite))
    else:
        message.direct_response.CopyFrom(direct_response(action))
    return message


def route_name(value: Route) -> str:
    """Names the HTTPRoute rule in stats and access logs (%ROUTE_NAME%)."""
    return f"{value.source.namespace}/{value.source.name}/rule/{value.rule_index}"


def route_match(value: RouteMatch) -> rc_pb2.RouteMatch:
    if value.path_type == "Exact":
        return rc_pb2.RouteMatch(path=value.path)
    if value.path_type != "PathPrefix":
        raise ValueError(f"unknown path match type {value.path_type!r}")
    prefix = value.path.rstrip("/")
    if not prefix:
        return rc_pb2.RouteMatch(prefix="/")
    # Gateway API prefixes match whole path elements: /foo matches /foo and /foo/bar, not /foobar.
    return rc_pb2.RouteMatch(path_separated_prefix=prefix)


def merged_weights(action: Forward) -> dict[str, int]:
    """Cluster name → total weight, in first-seen order; weight 0 means no traffic at all."""
    weights: dict[str, int] = {}
    for backend in action.backends:
        if backend.weight <= 0:
            continue
        name = backend.cluster if backend.cluster is not None else INVALID_BACKEND_CLUSTER
        weights[name] = weights.get(name, 0) + backend.weight
    return weights


def route_action(weights: dict[str, int], auto_host_rewrite: bool) -> rc_pb2.RouteAction:
    action = rc_pb2.RouteAction()
    if len(weights) == 1:
        action.cluster = next(iter(weights))
    else:
        # No total_weight (deprecated): Envoy sums the weights itself.
        action.weighted_clusters.clusters.extend(
            rc_pb2.WeightedCluster.ClusterWeight(name=name, weight=UInt32Value(value=weight))
            for name, weight in weights.items()
        )
    if INVALID_BACKEND_CLUSTER in weights:
        action.cluster_not_found_response_code = rc_pb2.RouteAction.INTERNAL_SERVER_ERROR
    if auto_host_rewrite:
        action.auto_host_rewrite.value = True
    return action


def direct_response(value: DirectResponse) -> rc_pb2.DirectResponseAction:
    action = rc_pb2.DirectResponseAction(status=value.status)
    if value.body:
        action.body.CopyFrom(base_pb2.DataSource(inline_string=value.body))
    return action
