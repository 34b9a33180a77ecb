"""What proxyless gRPC clients get of a BackendPolicy: outlier detection and ring hash on a
header as Envoy does; Random and LeastRequest as round robin (grpcio refuses a cluster
asking for either); the rest is said on the policy (tests/dag/upstreams/test_backend_policy.py)."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2

from dragoman.dag.model import Backend, ClusterPolicy, EdsCluster, Forward, Route, RouteMatch
from dragoman.envoy.grpc.grpc_messages import grpc_clusters, grpc_route
from dragoman.envoy.translate_options import DEFAULT_OPTIONS
from dragoman.objects import ObjectKey
from dragoman.objects.backend_policy import LoadBalancer, PassiveHealthCheck

SERVICE = ObjectKey("Service", "default", "api")
POLICY = ObjectKey("BackendPolicy", "default", "p")


def pods(balancer: LoadBalancer) -> EdsCluster:
    policy = ClusterPolicy(
        POLICY, passive_health_check=PassiveHealthCheck(), load_balancer=balancer
    )
    return EdsCluster("default/api/80", SERVICE, 80, 80, "http", policy=policy)


def test_random_is_served_as_round_robin_with_outlier_detection_kept() -> None:
    [message] = grpc_clusters(pods(LoadBalancer("Random")), DEFAULT_OPTIONS)
    assert message.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    assert message.outlier_detection.consecutive_5xx.value == 5


def test_least_request_is_served_as_round_robin_and_ring_hash_as_to_envoy() -> None:
    [least] = grpc_clusters(pods(LoadBalancer("LeastRequest")), DEFAULT_OPTIONS)
    assert least.lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    header = LoadBalancer("ConsistentHash", hash_type="Header", hash_header="x-tenant")
    [ring] = grpc_clusters(pods(header), DEFAULT_OPTIONS)
    assert ring.lb_policy == cluster_pb2.Cluster.RING_HASH


def test_grpc_routes_hash_a_header_and_no_other_key() -> None:
    def action(balancer: LoadBalancer):  # type: ignore[no-untyped-def]
        forward = Forward(backends=(Backend("default/api/80", 1),), hash_policy=balancer)
        message = grpc_route(Route(RouteMatch("PathPrefix", "/"), forward, SERVICE))
        assert message is not None
        return message.route

    header = action(LoadBalancer("ConsistentHash", hash_type="Header", hash_header="x-tenant"))
    assert [h.header.header_name for h in header.hash_policy] == ["x-tenant"]
    cookie = action(LoadBalancer("ConsistentHash", hash_type="Cookie", hash_cookie="pin"))
    assert not cookie.hash_policy
