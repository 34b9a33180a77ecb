"""DAG values → the xDS resources proxyless gRPC clients accept (gRFC A27, A28, A37, A39).

- Listener: an API listener named like the dialed target, whose HttpConnectionManager fetches
  its RouteConfiguration (of the same name) over ADS and ends with the Router filter.
- RouteConfiguration: one virtual host whose domains are the target, with routes expressed
  in what gRPC matches on (prefix, exact path, safe_regex, headers). What a gRPC client
  cannot honour is left out rather than sent: a field it rejects (path_separated_prefix, a
  retry policy without retries) would get the whole resource NACKed.
- Clusters: EDS ones as Envoy gets them (gRPC ignores the HTTP protocol options). gRPC
  rejects STRICT_DNS and DNS cluster extensions, so an ExternalName becomes an aggregate
  over one LOGICAL_DNS cluster; an in-cluster-first aggregate keeps its EDS child and gets a
  LOGICAL_DNS fallback. Aggregates balance ROUND_ROBIN: gRPC refuses CLUSTER_PROVIDED.
"""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import api_listener_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import (
    AggregateCluster,
    ApiListener,
    Cluster,
    DnsCluster,
    EdsCluster,
    Forward,
    Retry,
    Route,
    RouteMatch,
    ValueMatch,
)
from dragoman.envoy.resources.cluster_messages import (
    AGGREGATE_CLUSTER_EXTENSION,
    cluster,
)
from dragoman.envoy.resources.common_messages import pack, seconds
from dragoman.envoy.resources.config_sources import config_source
from dragoman.envoy.resources.endpoint_messages import single_host_assignment
from dragoman.envoy.resources.listener_messages import ROUTER
from dragoman.envoy.resources.route_messages import (
    INVALID_BACKEND_CLUSTER,
    hash_policy,
    path_match,
    route_name,
    string_matcher,
)
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.objects import ObjectKey

# Where gRPC clients are sent the calls that must fail (a redirect, a direct response, an
# invalid backend's share): an EDS cluster whose CLA has no endpoint, which they fail at once
# with UNAVAILABLE. Not a route without an action, for which grpc-js refuses the whole
# RouteConfiguration; nor a cluster no CDS resource has, which grpcio waits 15 s for (its
# does-not-exist timer) before it fails the calls.
FAILING_CLUSTER = EdsCluster(
    name=INVALID_BACKEND_CLUSTER, service=ObjectKey("", "", ""), port=0, target_port=0
)

# The LOGICAL_DNS cluster under the aggregate that stands for an ExternalName Service port.
LOGICAL_DNS_SUFFIX = "logical-dns"
# Every gRPC call is an HTTP/2 POST.
GRPC_METHOD = "POST"
# gRPC retries on gRPC status codes only (gRFC A44). A failed connection or a reset reaches
# the client as UNAVAILABLE; an HTTP status without grpc-status becomes a gRPC one by gRPC's
# HTTP-to-gRPC table, which maps these to codes gRPC can retry on, and no other.
GRPC_CONNECTION_ERRORS = "unavailable"
GRPC_STATUS_OF_HTTP = {400: "internal", 429: "unavailable", 502: "unavailable"}
GRPC_STATUS_OF_HTTP |= {503: "unavailable", 504: "unavailable"}


def api_listener(value: ApiListener, options: TranslateOptions) -> listener_pb2.Listener:
    manager = hcm_pb2.HttpConnectionManager(
        stat_prefix=value.name,
        rds=hcm_pb2.Rds(config_source=config_source(options), route_config_name=value.name),
        # gRPC requires a non-empty filter list whose last filter is the terminal Router.
        http_filters=[hcm_pb2.HttpFilter(name=ROUTER, typed_config=pack(router_pb2.Router()))],
    )
    return listener_pb2.Listener(
        name=value.name,
        api_listener=api_listener_pb2.ApiListener(api_listener=pack(manager)),
    )


def grpc_route_configuration(value: ApiListener) -> route_pb2.RouteConfiguration:
    """The target's routes. Backends with no cluster a gRPC client can use must already be
    invalid (cluster None) in `value`."""
    routes = [message for message in map(grpc_route, value.routes) if message is not None]
    # gRPC matches domains against the authority it dials, `host:port`.
    domains = [value.name] if value.name == value.host else [value.name, value.host]
    return route_pb2.RouteConfiguration(
        name=value.name,
        virtual_hosts=[rc_pb2.VirtualHost(name=value.name, domains=domains, routes=routes)],
    )


def grpc_route(value: Route) -> rc_pb2.Route | None:
    """The route as gRPC reads it; None when no gRPC call can ever match it.

    A redirect or direct response, or a rule with no valid backend, routes to
    FAILING_CLUSTER: gRPC fails matching calls with UNAVAILABLE instead of trying later
    routes.
    """
    match = grpc_route_match(value.match)
    if match is None:
        return None
    message = rc_pb2.Route(name=route_name(value), match=match)
    action = _route_action(value.action) if isinstance(value.action, Forward) else None
    message.route.CopyFrom(action or rc_pb2.RouteAction(cluster=FAILING_CLUSTER.name))
    return message


def routes_to_failing_cluster(value: Route) -> bool:
    """Whether grpc_route(value) sends some of its calls to FAILING_CLUSTER."""
    if grpc_route_match(value.match) is None:
        return False
    if not isinstance(value.action, Forward):
        return True
    weights = _weights(value.action)
    return not weights or INVALID_BACKEND_CLUSTER in weights


def grpc_route_match(value: RouteMatch) -> rc_pb2.RouteMatch | None:
    """gRPC paths are always `/<service>/<method>`, calls carry no query string and are
    POSTs. None when the match can never hold for a gRPC call."""
    if value.query_params or (value.method is not None and value.method != GRPC_METHOD):
        return None
    match = _grpc_path_match(value)
    if match is None:
        return None
    # gRPC metadata keys are lower case; Envoy compares header names ignoring case.
    match.headers.extend(_header_matcher(header) for header in value.headers)
    return match


def _grpc_path_match(value: RouteMatch) -> rc_pb2.RouteMatch | None:
    if value.path_type != "PathPrefix":
        return path_match(value)  # Exact and RegularExpression as for Envoy
    # A Gateway API prefix matches whole path elements; gRPC has no path_separated_prefix.
    prefix = value.path.rstrip("/")
    elements = prefix.split("/")[1:]
    if not prefix:
        return rc_pb2.RouteMatch(prefix="/")
    if len(elements) == 1:
        return rc_pb2.RouteMatch(prefix=f"{prefix}/")  # a service: all its methods
    if len(elements) == 2:
        return rc_pb2.RouteMatch(path=prefix)  # one method: nothing goes below it
    return None


def _header_matcher(value: ValueMatch) -> rc_pb2.HeaderMatcher:
    return rc_pb2.HeaderMatcher(name=value.name.lower(), string_match=string_matcher(value))


def _weights(value: Forward) -> dict[str, int]:
    """Each cluster's share of the calls; an invalid backend's under INVALID_BACKEND_CLUSTER."""
    weights: dict[str, int] = {}
    for backend in value.backends:
        if backend.weight > 0:
            name = backend.cluster or INVALID_BACKEND_CLUSTER
            weights[name] = weights.get(name, 0) + backend.weight
    return weights


def _route_action(value: Forward) -> rc_pb2.RouteAction | None:
    """Weighted clusters (backend filters, rewrites and mirrors do not apply to gRPC
    clients). An invalid backend's share goes to FAILING_CLUSTER, so calls given that share
    fail; None when no backend is valid."""
    weights = _weights(value)
    if not weights or set(weights) == {INVALID_BACKEND_CLUSTER}:
        return None
    action = rc_pb2.RouteAction()
    if len(weights) == 1:
        action.cluster = next(iter(weights))
    else:
        for name, weight in weights.items():
            entry = action.weighted_clusters.clusters.add(name=name)
            entry.weight.value = weight
    if value.auto_host_rewrite and value.host_rewrite is None:
        action.auto_host_rewrite.value = True
    if value.timeout_ms:
        # gRPC bounds each call by its own deadline, capped at this (gRFC A31).
        action.max_stream_duration.max_stream_duration.CopyFrom(seconds(value.timeout_ms / 1000))
    if value.retry is not None:
        action.retry_policy.CopyFrom(grpc_retry_policy(value.retry))
    if value.hash_policy is not None and value.hash_policy.hash_type == "Header":
        # gRPC hashes request headers alone (gRFC A42); other hashes are said on the policy.
        action.hash_policy.append(hash_policy(value.hash_policy))
    return action


def grpc_retry_policy(value: Retry) -> rc_pb2.RetryPolicy:
    """What of a rule's retries gRPC can do: retry UNAVAILABLE (and INTERNAL for 400), at
    most 4 times (gRPC caps a call at 5 attempts), with the rule's back-off; gRPC has no
    per-try timeout."""
    names = [GRPC_CONNECTION_ERRORS]
    for code in value.codes:
        name = GRPC_STATUS_OF_HTTP.get(code)
        if name is not None and name not in names:
            names.append(name)
    message = rc_pb2.RetryPolicy(retry_on=",".join(names))
    message.num_retries.value = value.attempts
    if value.backoff_ms is not None:
        message.retry_back_off.base_interval.CopyFrom(seconds(value.backoff_ms / 1000))
    return message


def grpc_servable(value: Cluster) -> bool:
    """Whether gRPC clients can be sent to the cluster as dragoman translates it for them.

    Upstream TLS is not: gRPC takes its certificates from providers named in its own
    bootstrap (gRFC A29), which dragoman cannot know. Such clusters are left out rather
    than served in cleartext.
    """
    if isinstance(value, AggregateCluster):
        return all(child.tls is None for child in value.children)
    return value.tls is None


def logical_dns_name(value: DnsCluster) -> str:
    return f"{value.name}/{LOGICAL_DNS_SUFFIX}"


def logical_dns_cluster(
    name: str, value: DnsCluster, options: TranslateOptions
) -> cluster_pb2.Cluster:
    """gRPC resolves the one hostname itself and connects to the addresses it gets."""
    return cluster_pb2.Cluster(
        name=name,
        type=cluster_pb2.Cluster.LOGICAL_DNS,
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=seconds(options.connect_timeout_s),
        # Absolute, so the client's resolver never tries its search domains first.
        load_assignment=single_host_assignment(name, value.hostname, value.port, absolute=True),
    )


def grpc_aggregate_cluster(
    name: str, children: list[str], options: TranslateOptions
) -> cluster_pb2.Cluster:
    """gRPC tries the children in order, the next when those before have no reachable
    endpoint (gRFC A37, A75)."""
    config = aggregate_pb2.ClusterConfig(clusters=children)
    return cluster_pb2.Cluster(
        name=name,
        cluster_type=cluster_pb2.Cluster.CustomClusterType(
            name=AGGREGATE_CLUSTER_EXTENSION, typed_config=pack(config)
        ),
        lb_policy=cluster_pb2.Cluster.ROUND_ROBIN,
        connect_timeout=seconds(options.connect_timeout_s),
    )


def grpc_clusters(value: Cluster, options: TranslateOptions) -> list[cluster_pb2.Cluster]:
    """The clusters gRPC clients need for `value`: itself under its name, then its children.

    EDS children are translated as for Envoy; their CLAs are served by EDS as usual.
    """
    if isinstance(value, AggregateCluster):
        names = [child.name for child in value.children]
        return [
            grpc_aggregate_cluster(value.name, names, options),
            *(
                logical_dns_cluster(child.name, child, options)
                if isinstance(child, DnsCluster) and not child.served_over_eds
                else _for_grpc(cluster(child, options))
                for child in value.children
            ),
        ]
    if isinstance(value, DnsCluster) and not value.served_over_eds:
        child = logical_dns_name(value)
        return [
            grpc_aggregate_cluster(value.name, [child], options),
            logical_dns_cluster(child, value, options),
        ]
    # Pods, or the DNS check's addresses, over EDS as for Envoy: the client resolves nothing.
    return [_for_grpc(cluster(value, options))]


_GRPC_ROUND_ROBIN_INSTEAD = (cluster_pb2.Cluster.RANDOM, cluster_pb2.Cluster.LEAST_REQUEST)


def _for_grpc(message: cluster_pb2.Cluster) -> cluster_pb2.Cluster:
    """An Envoy cluster as gRPC clients can take it: they balance round robin or by ring hash
    (gRFC A42) and refuse a cluster asking for another (grpcio refuses LEAST_REQUEST too, its
    gRFC A48 support being off by default): a BackendPolicy's Random or LeastRequest is
    served to them as round robin, and its status says so."""
    if message.lb_policy in _GRPC_ROUND_ROBIN_INSTEAD:
        message.lb_policy = cluster_pb2.Cluster.ROUND_ROBIN
    return message


def grpc_cluster_at(source: tuple[Cluster, int], options: TranslateOptions) -> cluster_pb2.Cluster:
    """The `index`th of grpc_clusters(value) for `source` (value, index): one resource's
    message, translated again for a per-type client."""
    value, index = source
    return grpc_clusters(value, options)[index]


def grpc_eds_names(value: Cluster) -> frozenset[str]:
    """The names of the clusters among grpc_clusters(value) that read a CLA over EDS (each
    the CLA's name)."""
    if isinstance(value, AggregateCluster):
        return frozenset(child.name for child in value.children if child.served_over_eds)
    return frozenset((value.name,)) if value.served_over_eds else frozenset()
