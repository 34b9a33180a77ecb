"""A BackendPolicy (dag.model.ClusterPolicy) written into the Envoy Cluster that carries it:
health checks, outlier detection, circuit breakers, timeouts, keep-alives, load balancing.

Every value was bounded where it was read (dragoman.sources.parsers.backend_policy), so
nothing here can make Envoy reject the Cluster."""

from __future__ import annotations

from typing import TypeAlias

from envoy.config.cluster.v3 import circuit_breaker_pb2, cluster_pb2, outlier_detection_pb2
from envoy.config.core.v3 import base_pb2, health_check_pb2, protocol_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_options_pb2
from envoy.type.v3 import http_pb2, range_pb2

from dragoman.dag.model import H2, H2C, HTTP1, L4_PROTOCOLS, ClusterPolicy
from dragoman.envoy.resources.common_messages import seconds
from dragoman.objects.backend_policy import ActiveHealthCheck, LoadBalancer, PassiveHealthCheck

_Cluster: TypeAlias = cluster_pb2.Cluster
HTTP2_PROTOCOLS = (H2C, H2)
_LB_POLICIES = {
    "RoundRobin": cluster_pb2.Cluster.ROUND_ROBIN,
    "LeastRequest": cluster_pb2.Cluster.LEAST_REQUEST,
    "Random": cluster_pb2.Cluster.RANDOM,
    # A ring (not Maglev): proxyless gRPC clients implement ring hash (gRFC A42) alone.
    "ConsistentHash": cluster_pb2.Cluster.RING_HASH,
}


def apply_cluster_policy(message: _Cluster, policy: ClusterPolicy, protocol: str) -> None:
    """Write `policy` into `message`, a Cluster speaking `protocol`."""
    if policy.connect_timeout_s is not None:
        message.connect_timeout.CopyFrom(seconds(policy.connect_timeout_s))
    if policy.circuit_breaker is not None:
        _circuit_breakers(message.circuit_breakers, policy)
    keepalive = policy.tcp_keepalive
    if keepalive is not None:
        tcp = message.upstream_connection_options.tcp_keepalive
        if keepalive.probes is not None:
            tcp.keepalive_probes.value = keepalive.probes
        if keepalive.idle_time_s is not None:
            tcp.keepalive_time.value = int(keepalive.idle_time_s)
        if keepalive.interval_s is not None:
            tcp.keepalive_interval.value = int(keepalive.interval_s)
    if policy.load_balancer is not None:
        _load_balancer(message, policy.load_balancer)
    if policy.panic_threshold is not None:
        message.common_lb_config.healthy_panic_threshold.value = policy.panic_threshold
    if policy.passive_health_check is not None:
        message.outlier_detection.CopyFrom(outlier_detection(policy.passive_health_check))
    active = policy.active_health_check
    if active is not None and (active.type != "GRPC" or protocol in HTTP2_PROTOCOLS):
        # gRPC health checks need HTTP/2: the policy's status says which ports get none.
        message.health_checks.append(health_check(active, policy.health_check_host, protocol))


def with_policy_protocol_options(
    options: http_options_pb2.HttpProtocolOptions | None, policy: ClusterPolicy, protocol: str
) -> http_options_pb2.HttpProtocolOptions | None:
    """The cluster's HTTP protocol options with the policy's connection settings: idle
    timeout, connection lifetime, requests per connection, HTTP/2 keep-alive."""
    if protocol in L4_PROTOCOLS:
        return options  # whole connections: Envoy speaks no HTTP to the cluster
    breaker = policy.circuit_breaker
    per_connection = breaker.max_requests_per_connection if breaker is not None else None
    if (
        policy.connection_idle_timeout_s is None
        and policy.max_connection_duration_s is None
        and per_connection is None
        and (policy.http2_keepalive is None or (protocol == HTTP1 and options is None))
    ):
        return options
    made = http_options_pb2.HttpProtocolOptions()
    if options is not None:
        made.CopyFrom(options)
    else:  # HTTP/1.1 over cleartext, said explicitly so the common options can be set
        made.explicit_http_config.http_protocol_options.SetInParent()
    common = made.common_http_protocol_options
    if policy.connection_idle_timeout_s is not None:
        common.idle_timeout.CopyFrom(seconds(policy.connection_idle_timeout_s))
    if policy.max_connection_duration_s is not None:
        common.max_connection_duration.CopyFrom(seconds(policy.max_connection_duration_s))
    if per_connection is not None:
        common.max_requests_per_connection.value = per_connection
    keepalive = policy.http2_keepalive
    if keepalive is not None:
        http2: protocol_pb2.Http2ProtocolOptions | None = None
        if made.HasField("auto_config"):
            http2 = made.auto_config.http2_protocol_options
        elif made.explicit_http_config.HasField("http2_protocol_options"):
            http2 = made.explicit_http_config.http2_protocol_options
        if http2 is not None:
            http2.connection_keepalive.interval.CopyFrom(seconds(keepalive.interval_s))
            http2.connection_keepalive.timeout.CopyFrom(seconds(keepalive.timeout_s))
    return made


def _circuit_breakers(message: circuit_breaker_pb2.CircuitBreakers, policy: ClusterPolicy) -> None:
    breaker = policy.circuit_breaker
    assert breaker is not None
    thresholds = message.thresholds.add(priority=base_pb2.DEFAULT)
    if breaker.max_connections is not None:
        thresholds.max_connections.value = breaker.max_connections
    if breaker.max_pending_requests is not None:
        thresholds.max_pending_requests.value = breaker.max_pending_requests
    if breaker.max_parallel_requests is not None:
        thresholds.max_requests.value = breaker.max_parallel_requests
    if breaker.max_parallel_retries is not None:
        thresholds.max_retries.value = breaker.max_parallel_retries


def _load_balancer(message: _Cluster, balancer: LoadBalancer) -> None:
    message.lb_policy = _LB_POLICIES[balancer.type]
    window = balancer.slow_start_window_s
    if window is None:
        return
    if balancer.type == "RoundRobin":
        message.round_robin_lb_config.slow_start_config.slow_start_window.CopyFrom(seconds(window))
    elif balancer.type == "LeastRequest":
        message.least_request_lb_config.slow_start_config.slow_start_window.CopyFrom(
            seconds(window)
        )


def outlier_detection(passive: PassiveHealthCheck) -> outlier_detection_pb2.OutlierDetection:
    """healthCheck.passive: a count of 0 turns its ejection off (Envoy's enforcing_* 0)."""
    message = outlier_detection_pb2.OutlierDetection(
        interval=seconds(passive.interval_s),
        base_ejection_time=seconds(passive.base_ejection_time_s),
        split_external_local_origin_errors=passive.split_external_local_origin_errors,
    )
    message.max_ejection_percent.value = passive.max_ejection_percent
    message.consecutive_5xx.value = passive.consecutive_5xx_errors or 5
    message.enforcing_consecutive_5xx.value = 100 if passive.consecutive_5xx_errors else 0
    message.consecutive_gateway_failure.value = passive.consecutive_gateway_errors or 5
    message.enforcing_consecutive_gateway_failure.value = (
        100 if passive.consecutive_gateway_errors else 0
    )
    local = passive.consecutive_local_origin_failures
    message.consecutive_local_origin_failure.value = local or 5
    message.enforcing_consecutive_local_origin_failure.value = 100 if local else 0
    threshold = passive.failure_percentage_threshold
    if threshold is not None:
        message.failure_percentage_threshold.value = threshold
        message.enforcing_failure_percentage.value = 100
        if passive.split_external_local_origin_errors:
            message.enforcing_failure_percentage_local_origin.value = 100
    return message


def health_check(
    active: ActiveHealthCheck, host: str, protocol: str
) -> health_check_pb2.HealthCheck:
    """healthCheck.active. A host without traffic is checked at the same interval
    (no_traffic_interval), so a failover target nobody used yet is known healthy or not
    when it is needed (Envoy's default checks it once a minute)."""
    message = health_check_pb2.HealthCheck(
        timeout=seconds(active.timeout_s),
        interval=seconds(active.interval_s),
        no_traffic_interval=seconds(active.interval_s),
    )
    message.unhealthy_threshold.value = active.unhealthy_threshold
    message.healthy_threshold.value = active.healthy_threshold
    if active.type == "HTTP":
        http = message.http_health_check
        http.host = host
        http.path = active.http_path
        if active.http_method:
            http.method = base_pb2.RequestMethod.Value(active.http_method)
        for status in active.http_expected_statuses or (200,):
            http.expected_statuses.append(range_pb2.Int64Range(start=status, end=status + 1))
        if protocol in HTTP2_PROTOCOLS:
            http.codec_client_type = http_pb2.HTTP2
    elif active.type == "GRPC":
        grpc = message.grpc_health_check
        grpc.service_name = active.grpc_service
        grpc.authority = host
    else:
        tcp = message.tcp_health_check
        if active.tcp_send:
            tcp.send.binary = active.tcp_send
        if active.tcp_receive:
            tcp.receive.add(binary=active.tcp_receive)
    return message
