"""A BackendPolicy in the Envoy Cluster: each field where Envoy reads it, for pods and
ExternalNames (also with the DNS check's pinned addresses), the routes' hash for a
consistent hash; and the real Envoy accepts every cluster, at the extremes of every field
the policy allows (`envoy --mode validate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_pb2

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.envoy import translate
from dragoman.envoy.resources.cluster_messages import HTTP_PROTOCOL_OPTIONS
from dragoman.snapshots.resources import CLUSTER, ROUTE
from tests.support.builders import (
    backend_policy,
    external_service,
    http_route,
    service,
    service_port,
)
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import DRAGOMAN_CLASS, GATEWAY, build_text

PARTNER = "api.partner.example"
MAX = 2**32 - 1

SPEC: dict[str, Any] = {
    "healthCheck": {
        "active": {
            "type": "HTTP",
            "interval": "2s",
            "timeout": "250ms",
            "unhealthyThreshold": 2,
            "healthyThreshold": 3,
            "http": {"path": "/healthz?deep=1", "method": "HEAD", "expectedStatuses": [200, 204]},
        },
        "passive": {
            "consecutive5XxErrors": 4,
            "consecutiveGatewayErrors": 2,
            "interval": "1s",
            "baseEjectionTime": "5s",
            "maxEjectionPercent": 50,
            "failurePercentageThreshold": 80,
        },
        "panicThreshold": 25,
    },
    "circuitBreaker": {
        "maxConnections": 11,
        "maxPendingRequests": 12,
        "maxParallelRequests": 13,
        "maxParallelRetries": 14,
        "maxRequestsPerConnection": 15,
    },
    "timeout": {
        "tcp": {"connectTimeout": "1500ms"},
        "http": {"connectionIdleTimeout": "7s", "maxConnectionDuration": "1m"},
    },
    "tcpKeepalive": {"probes": 4, "idleTime": "30s", "interval": "5s"},
    "http2": {"connectionKeepalive": {"interval": "20s", "timeout": "2s"}},
    "loadBalancer": {"type": "RoundRobin", "slowStart": {"window": "10s"}},
}

# Every bound of every field at once: the largest values, then the smallest.
LARGEST: dict[str, Any] = {
    "healthCheck": {
        "active": {
            "type": "TCP",
            "interval": "24h",
            "timeout": "24h",
            "unhealthyThreshold": MAX,
            "healthyThreshold": MAX,
            "tcp": {"send": {"type": "Binary", "binary": "AAEC/w=="}},
        },
        "passive": {
            "consecutive5XxErrors": MAX,
            "consecutiveGatewayErrors": MAX,
            "consecutiveLocalOriginFailures": MAX,
            "splitExternalLocalOriginErrors": True,
            "interval": "24h",
            "baseEjectionTime": "24h",
            "maxEjectionPercent": 100,
            "failurePercentageThreshold": 100,
        },
        "panicThreshold": 100,
    },
    "circuitBreaker": {
        key: MAX
        for key in (
            "maxConnections",
            "maxPendingRequests",
            "maxParallelRequests",
            "maxParallelRetries",
            "maxRequestsPerConnection",
        )
    },
    "timeout": {
        "tcp": {"connectTimeout": "24h"},
        "http": {"connectionIdleTimeout": "24h", "maxConnectionDuration": "24h"},
    },
    "tcpKeepalive": {"probes": MAX, "idleTime": "24h", "interval": "24h"},
    "http2": {"connectionKeepalive": {"interval": "24h", "timeout": "24h"}},
    "loadBalancer": {"type": "LeastRequest", "slowStart": {"window": "24h"}},
}
SMALLEST: dict[str, Any] = {
    "healthCheck": {
        "active": {
            "type": "GRPC",
            "interval": "1ms",
            "timeout": "1ms",
            "unhealthyThreshold": 1,
            "healthyThreshold": 1,
            "grpc": {"service": ""},
        },
        "passive": {
            "consecutive5XxErrors": 0,
            "consecutiveGatewayErrors": 0,
            "consecutiveLocalOriginFailures": 0,
            "interval": "1ms",
            "baseEjectionTime": "1ms",
            "maxEjectionPercent": 0,
            "failurePercentageThreshold": 0,
        },
        "panicThreshold": 0,
    },
    "circuitBreaker": {
        "maxConnections": 0,
        "maxPendingRequests": 0,
        "maxParallelRequests": 0,
        "maxParallelRetries": 0,
        "maxRequestsPerConnection": 1,
    },
    "timeout": {
        "tcp": {"connectTimeout": "1ms"},
        "http": {"connectionIdleTimeout": "1ms", "maxConnectionDuration": "1ms"},
    },
    "tcpKeepalive": {"probes": 1, "idleTime": "1s", "interval": "1s"},
    "http2": {"connectionKeepalive": {"interval": "1ms", "timeout": "1ms"}},
    "loadBalancer": {
        "type": "ConsistentHash",
        "consistentHash": {"type": "Cookie", "cookie": {"name": "a", "ttl": "1ms"}},
    },
}


def world(spec: dict[str, Any], *, dns_check: bool = False) -> Dag:
    options = BuildOptions(dns_check=dns_check)
    dns = {PARTNER: DnsObservation(("203.0.113.7", "203.0.113.8"))} if dns_check else None
    return build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service(
            "api",
            ports=[
                service_port(80, 8080, name="http"),
                service_port(9090, name="grpc", app_protocol="kubernetes.io/h2c"),
            ],
        ),
        external_service("partner", PARTNER),
        http_route("to-api", "api", 80),
        http_route("to-grpc", "api", 9090),
        http_route("to-partner", "partner", 443),
        backend_policy("resilience", "api", "partner", spec=spec),
        options=options,
        dns=dns,
    )


def protocol_options(cluster: cluster_pb2.Cluster) -> http_pb2.HttpProtocolOptions:
    options = http_pb2.HttpProtocolOptions()
    assert cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].Unpack(options)
    return options


def clusters(dag: Dag) -> dict[str, cluster_pb2.Cluster]:
    found = {}
    for snapshot in translate(dag).values():
        found.update((c.name, c) for c in messages(snapshot, CLUSTER))
    return found


def test_every_field_lands_where_envoy_reads_it() -> None:
    served = clusters(world(SPEC))
    pods = served["default/api/80"]

    assert pods.connect_timeout.ToMilliseconds() == 1500
    [thresholds] = pods.circuit_breakers.thresholds
    assert (
        thresholds.max_connections.value,
        thresholds.max_pending_requests.value,
        thresholds.max_requests.value,
        thresholds.max_retries.value,
    ) == (11, 12, 13, 14)
    common = protocol_options(pods).common_http_protocol_options
    assert common.max_requests_per_connection.value == 15
    assert common.idle_timeout.seconds == 7 and common.max_connection_duration.seconds == 60
    keepalive = pods.upstream_connection_options.tcp_keepalive
    assert (keepalive.keepalive_probes.value, keepalive.keepalive_time.value) == (4, 30)
    assert keepalive.keepalive_interval.value == 5
    assert pods.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    assert pods.round_robin_lb_config.slow_start_config.slow_start_window.seconds == 10
    assert pods.common_lb_config.healthy_panic_threshold.value == 25
    outlier = pods.outlier_detection
    assert outlier.consecutive_5xx.value == 4 and outlier.enforcing_consecutive_5xx.value == 100
    assert outlier.consecutive_gateway_failure.value == 2
    assert outlier.enforcing_consecutive_gateway_failure.value == 100
    assert outlier.failure_percentage_threshold.value == 80
    assert outlier.enforcing_failure_percentage.value == 100
    assert outlier.interval.seconds == 1 and outlier.base_ejection_time.seconds == 5
    assert outlier.max_ejection_percent.value == 50
    [check] = pods.health_checks
    assert check.interval.seconds == 2 and check.timeout.ToMilliseconds() == 250
    # A host without traffic (a failover target) is checked as often as one with.
    assert check.no_traffic_interval == check.interval
    assert (check.unhealthy_threshold.value, check.healthy_threshold.value) == (2, 3)
    http = check.http_health_check
    assert http.host == "api.default.svc.cluster.local" and http.path == "/healthz?deep=1"
    assert [(r.start, r.end) for r in http.expected_statuses] == [(200, 201), (204, 205)]
    # HTTP/2 keep-alive where the cluster speaks HTTP/2 only.
    h2 = protocol_options(served["default/api/9090/h2c"]).explicit_http_config
    assert h2.http2_protocol_options.connection_keepalive.interval.seconds == 20
    assert not protocol_options(pods).explicit_http_config.HasField("http2_protocol_options")


@pytest.mark.parametrize("dns_check", [False, True])
def test_an_external_names_health_checks_send_the_external_name(dns_check: bool) -> None:
    partner = clusters(world(SPEC, dns_check=dns_check))["default/partner/443"]

    # Resolved by Envoy, or the DNS check's addresses served over EDS: the Host is the name.
    assert partner.type == (cluster_pb2.Cluster.EDS if dns_check else partner.type)
    [check] = partner.health_checks
    assert check.http_health_check.host == PARTNER
    assert partner.outlier_detection.consecutive_5xx.value == 4


def test_routes_hash_what_a_consistent_hash_names() -> None:
    for hashed, expected in (
        ({"type": "SourceIP"}, "connection_properties"),
        ({"type": "Header", "header": {"name": "X-Tenant"}}, "header"),
        ({"type": "Cookie", "cookie": {"name": "pin", "ttl": "1h"}}, "cookie"),
    ):
        dag = world({"loadBalancer": {"type": "ConsistentHash", "consistentHash": hashed}})
        assert clusters(dag)["default/api/80"].lb_policy == cluster_pb2.Cluster.RING_HASH
        tables: list[route_pb2.RouteConfiguration] = [
            table for snapshot in translate(dag).values() for table in messages(snapshot, ROUTE)
        ]
        actions = [
            route.route for table in tables for host in table.virtual_hosts for route in host.routes
        ]
        assert actions
        for action in actions:
            [policy] = action.hash_policy
            assert policy.WhichOneof("policy_specifier") == expected
        if expected == "header":
            assert actions[0].hash_policy[0].header.header_name == "x-tenant"
        if expected == "cookie":
            assert actions[0].hash_policy[0].cookie.ttl.seconds == 3600


@pytest.mark.parametrize("spec", [SPEC, LARGEST, SMALLEST], ids=["typical", "largest", "smallest"])
@pytest.mark.parametrize("dns_check", [False, True])
def test_envoy_accepts_every_cluster_a_policy_shapes(
    spec: dict[str, Any], dns_check: bool, tmp_path: Path
) -> None:
    dag = world(spec, dns_check=dns_check)
    shaped = [c for c in dag.clusters.values() if getattr(c, "policy", None) is not None]
    assert len(shaped) == 3
    for index, snapshot in enumerate(translate(dag).values()):
        path = tmp_path / f"envoy-{index}.yaml"
        config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
        path.write_text(yaml.safe_dump(config))
        validate(envoy_binary(), path)


def test_a_grpc_health_check_is_made_only_where_the_cluster_speaks_http2() -> None:
    served = clusters(world(SMALLEST))
    assert served["default/api/9090/h2c"].health_checks[0].HasField("grpc_health_check")
    assert not served["default/api/80"].health_checks


def test_a_policys_load_balancer_replaces_client_ip_affinity() -> None:
    affine = service("api", 80, 8080)
    affine["spec"]["sessionAffinity"] = "ClientIP"
    hashed = {"type": "Header", "header": {"name": "x-tenant"}}
    dag = build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        affine,
        http_route("to-api", "api", 80),
        backend_policy(
            "p", "api", spec={"loadBalancer": {"type": "ConsistentHash", "consistentHash": hashed}}
        ),
    )
    tables = [t for snapshot in translate(dag).values() for t in messages(snapshot, ROUTE)]
    routes = [route for table in tables for host in table.virtual_hosts for route in host.routes]
    assert routes
    for route in routes:
        # The header alone: Envoy would combine it with the client's address otherwise.
        assert [p.WhichOneof("policy_specifier") for p in route.route.hash_policy] == ["header"]
    assert clusters(dag)["default/api/80"].lb_policy == cluster_pb2.Cluster.RING_HASH
