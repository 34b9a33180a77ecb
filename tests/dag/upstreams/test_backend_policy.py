"""BackendPolicy (dragoman.dev/v1alpha1): read at the edge with bad values kept as problems,
judged per GEP-713 (Accepted, Invalid naming the field, TargetNotFound, Conflicted: older
wins, then by name), carried by the clusters of the Services it targets, pods and
ExternalNames alike, and hashed on by the routes to them."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.model import AggregateCluster, DnsCluster, EdsCluster, Forward
from dragoman.objects import BackendPolicy
from dragoman.sources.parse import parse_object
from tests.support.builders import (
    backend_policy,
    external_service,
    http_route,
    reference_grant,
    service,
)
from tests.support.status_builds import DRAGOMAN_CLASS, GATEWAY, build_text, status

FULL_SPEC: dict[str, Any] = {
    "healthCheck": {
        "active": {"type": "HTTP", "http": {"path": "/healthz"}},
        "passive": {"consecutive5XxErrors": 2},
        "panicThreshold": 0,
    },
    "circuitBreaker": {"maxConnections": 10},
    "timeout": {"tcp": {"connectTimeout": "2s"}, "http": {"connectionIdleTimeout": "10s"}},
    "loadBalancer": {
        "type": "ConsistentHash",
        "consistentHash": {"type": "Header", "header": {"name": "X-User"}},
    },
}


def world(*policies: dict[str, Any]) -> Any:
    return build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service("api"),
        external_service("partner", "api.partner.example"),
        http_route("to-api", "api", 80),
        http_route("to-partner", "partner", 443),
        *policies,
    )


def accepted(dag: Any, name: str) -> dict[str, tuple[str, str, str]]:
    """Per target Service: (status, reason, message) of the policy's Accepted condition."""
    found = {}
    for ancestor in status(dag, "BackendPolicy", name)["ancestors"]:
        [condition] = ancestor["conditions"]
        assert condition["type"] == "Accepted"
        found[ancestor["ancestorRef"]["name"]] = (
            condition["status"],
            condition["reason"],
            condition["message"],
        )
    return found


def test_a_policy_is_read_with_envoy_gateway_defaults() -> None:
    policy = parse_object(backend_policy("p", "api", spec=FULL_SPEC))
    assert isinstance(policy, BackendPolicy) and not policy.problems
    assert policy.active_health_check is not None
    assert policy.active_health_check.interval_s == 3.0
    assert policy.active_health_check.unhealthy_threshold == 3
    assert policy.passive_health_check is not None
    assert policy.passive_health_check.consecutive_5xx_errors == 2
    assert policy.passive_health_check.base_ejection_time_s == 30.0
    assert policy.load_balancer is not None and policy.load_balancer.hash_header == "x-user"
    assert policy.connect_timeout_s == 2.0 and policy.connection_idle_timeout_s == 10.0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"circuitBreaker": {"maxPendingRequests": -1}}, "spec.circuitBreaker.maxPendingRequests"),
        ({"healthCheck": {"passive": {"consecutive5XxErrors": -3}}}, "consecutive5XxErrors"),
        ({"timeout": {"tcp": {"connectTimeout": "0s"}}}, "spec.timeout.tcp.connectTimeout"),
        ({"timeout": {"http": {"connectionIdleTimeout": "25h"}}}, "connectionIdleTimeout"),
        ({"timeout": {"http": {"maxConnectionDuration": "soon"}}}, "maxConnectionDuration"),
        ({"loadBalancer": {"type": "Fastest"}}, "spec.loadBalancer.type"),
        ({"healthCheck": {"active": {"type": "UDP"}}}, "spec.healthCheck.active.type"),
        ({"healthCheck": {"active": {"type": "HTTP"}}}, "spec.healthCheck.active.http"),
        ({"healthCheck": {"panicThreshold": 101}}, "spec.healthCheck.panicThreshold"),
        ({"healthCheck": {"passive": {"maxEjectionPercent": 200}}}, "maxEjectionPercent"),
        (
            {
                "healthCheck": {
                    "active": {"type": "HTTP", "http": {"path": "/", "method": "CONNECT"}}
                }
            },
            "spec.healthCheck.active.http.method",
        ),
        (
            {"loadBalancer": {"type": "ConsistentHash", "consistentHash": {"type": "Header"}}},
            "spec.loadBalancer.consistentHash.header",
        ),
        ({"tcpKeepalive": {"idleTime": "500ms"}}, "spec.tcpKeepalive.idleTime"),
        ({"http2": {"connectionKeepalive": {"interval": "1s"}}}, "connectionKeepalive.timeout"),
    ],
)
def test_a_bad_value_makes_the_policy_invalid_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    dag = world(backend_policy("bad", "api", spec=spec))

    state, reason, message = accepted(dag, "bad")["api"]
    assert (state, reason) == ("False", "Invalid")
    assert field in message
    # Its target is served as if it had no policy; the rest of the world is served.
    assert dag.clusters["default/api/80"] == EdsCluster(
        name="default/api/80",
        service=dag.clusters["default/api/80"].service,
        port=80,
        target_port=80,
        port_name="http",
    )
    assert "default/partner/443" in dag.clusters


def test_a_target_of_another_kind_is_invalid() -> None:
    document = backend_policy("gw", "api")
    document["spec"]["targetRefs"] = [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    ]
    dag = world(document)

    [(state, reason, message)] = accepted(dag, "gw").values()
    assert (state, reason) == ("False", "Invalid")
    assert "spec.targetRefs[0].kind" in message


def test_pods_and_external_names_carry_the_policy_and_routes_hash_on_it() -> None:
    dag = world(backend_policy("resilience", "api", "partner", "absent", spec=FULL_SPEC))

    verdicts = accepted(dag, "resilience")
    assert verdicts["api"][:2] == verdicts["partner"][:2] == ("True", "Accepted")
    assert verdicts["absent"][:2] == ("False", "TargetNotFound")
    pods, partner = dag.clusters["default/api/80"], dag.clusters["default/partner/443"]
    assert isinstance(pods, EdsCluster) and isinstance(partner, DnsCluster)
    assert pods.policy is not None and partner.policy is not None
    assert pods.policy.circuit_breaker == partner.policy.circuit_breaker
    # HTTP health checks send the Service's name: the external name, never an address.
    assert partner.policy.health_check_host == "api.partner.example"
    assert pods.policy.health_check_host == "api.default.svc.cluster.local"
    actions = [
        route.action
        for group in dag.groups.values()
        for table in group.route_tables
        for host in table.virtual_hosts
        for route in host.routes
    ]
    forwards = [action for action in actions if isinstance(action, Forward)]
    assert forwards and all(
        f.hash_policy is not None and f.hash_policy.hash_header == "x-user" for f in forwards
    )


def test_of_two_policies_on_one_service_the_older_wins_then_the_first_by_name() -> None:
    newer = backend_policy(
        "a-newer",
        "api",
        spec={"circuitBreaker": {"maxConnections": 1}},
        created="2026-01-02T00:00:00Z",
    )
    older = backend_policy(
        "z-older",
        "api",
        spec={"circuitBreaker": {"maxConnections": 2}},
        created="2026-01-01T00:00:00Z",
    )
    dag = world(newer, older)

    assert accepted(dag, "z-older")["api"][:2] == ("True", "Accepted")
    state, reason, message = accepted(dag, "a-newer")["api"]
    assert (state, reason) == ("False", "Conflicted") and "z-older" in message
    cluster = dag.clusters["default/api/80"]
    assert cluster.policy is not None and cluster.policy.circuit_breaker is not None
    assert cluster.policy.circuit_breaker.max_connections == 2

    same_age = world(
        backend_policy("b", "api", spec={"circuitBreaker": {"maxConnections": 3}}),
        backend_policy("a", "api", spec={"circuitBreaker": {"maxConnections": 4}}),
    )
    assert accepted(same_age, "a")["api"][:2] == ("True", "Accepted")
    assert accepted(same_age, "b")["api"][1] == "Conflicted"


def test_an_invalid_policy_does_not_take_its_target_from_a_valid_one() -> None:
    dag = world(
        backend_policy("a-bad", "api", spec={"circuitBreaker": {"maxConnections": -1}}),
        backend_policy("b-good", "api", spec={"circuitBreaker": {"maxConnections": 7}}),
    )
    assert accepted(dag, "a-bad")["api"][1] == "Invalid"
    assert accepted(dag, "b-good")["api"][:2] == ("True", "Accepted")


def test_what_proxyless_grpc_clients_cannot_apply_is_said_on_the_policy() -> None:
    dag = world(backend_policy("p", "api", spec=FULL_SPEC))
    message = accepted(dag, "p")["api"][2]
    assert "proxyless gRPC clients" in message
    assert "healthCheck.active" in message and "timeout.tcp.connectTimeout" in message


def test_a_world_without_policies_has_no_policy_status() -> None:
    dag = world()
    assert not [key for key in dag.statuses if key.kind == "BackendPolicy"]
    assert all(getattr(c, "policy", None) is None for c in dag.clusters.values())


def test_policies_not_applied_are_the_builds_problems_naming_the_field() -> None:
    dag = world(
        backend_policy("bad", "api", spec={"circuitBreaker": {"maxConnections": -1}}),
        backend_policy("ok", "api", "absent", created="2026-01-01T00:00:00Z"),
        backend_policy("late", "api", created="2026-02-01T00:00:00Z"),
    )
    found = {
        (problem.object.name, problem.field, problem.reason)
        for problem in dag.problems
        if problem.object.kind == "BackendPolicy"
    }
    assert found == {
        ("bad", "spec.circuitBreaker.maxConnections", "Invalid"),
        ("ok", "spec.targetRefs[1]", "TargetNotFound"),
        ("late", "spec.targetRefs[0]", "Conflicted"),
    }


def test_a_misspelled_field_is_invalid_and_the_field_meant_is_named() -> None:
    dag = world(backend_policy("typo", "api", spec={"circuitBreakers": {"maxConnections": 1}}))
    state, reason, message = accepted(dag, "typo")["api"]
    assert (state, reason) == ("False", "Invalid")
    assert "spec.circuitBreakers" in message and "did you mean circuitBreaker?" in message


def failover_world(*objects: dict[str, Any]) -> Any:
    """Pods `api`, ExternalNames `primary` and `secondary`, Service `other/backup`: port 80."""
    return build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service("api"),
        external_service("primary", "primary.example", 80),
        external_service("secondary", "secondary.example", 80),
        service("backup", namespace="other"),
        http_route("to-api", "api", 80),
        http_route("to-primary", "primary", 80),
        *objects,
    )


def children(dag: Any, name: str) -> list[str]:
    cluster = dag.clusters[name]
    assert isinstance(cluster, AggregateCluster), cluster
    return [child.name for child in cluster.children]


def test_failover_serves_the_target_then_its_failover_services_in_order() -> None:
    dag = failover_world(
        backend_policy(
            "api", "api", spec={"failover": [{"name": "primary"}, {"name": "secondary"}]}
        ),
        backend_policy("primary", "primary", spec={"failover": [{"name": "secondary"}]}),
    )
    assert accepted(dag, "api")["api"][:2] == ("True", "Accepted")
    # Routes keep naming the Service's cluster: an aggregate over its own hosts, then the
    # others' (an external primary's own cluster under the name of its own aggregate's child).
    assert children(dag, "default/api/80") == [
        "default/api/80/pods",
        "default/primary/80/external",
        "default/secondary/80",
    ]
    assert children(dag, "default/primary/80") == [
        "default/primary/80/external",
        "default/secondary/80",
    ]
    # Each child is served beside the aggregates, once.
    assert isinstance(dag.clusters["default/secondary/80"], DnsCluster)
    assert isinstance(dag.clusters["default/api/80/pods"], EdsCluster)


def test_a_failover_loop_is_invalid_and_its_targets_served_without_policy() -> None:
    dag = failover_world(
        backend_policy("api", "api", spec={"failover": [{"name": "primary"}]}),
        backend_policy("primary", "primary", spec={"failover": [{"name": "api"}]}),
    )
    for name in ("api", "primary"):
        state, reason, message = accepted(dag, name)[name]
        assert (state, reason) == ("False", "Invalid") and "a loop" in message, message
    assert isinstance(dag.clusters["default/api/80"], EdsCluster)
    assert isinstance(dag.clusters["default/primary/80"], DnsCluster)


def test_failover_to_another_namespace_needs_a_reference_grant() -> None:
    policy = backend_policy(
        "api", "api", spec={"failover": [{"name": "backup", "namespace": "other"}]}
    )
    dag = failover_world(policy)
    state, reason, message = accepted(dag, "api")["api"]
    assert (state, reason) == ("False", "Invalid") and "spec.failover[0]" in message
    assert isinstance(dag.clusters["default/api/80"], EdsCluster)

    grant = reference_grant(
        "from-policies",
        "other",
        from_group="dragoman.dev",
        from_kind="BackendPolicy",
        from_namespace="default",
    )
    granted = failover_world(policy, grant)
    assert accepted(granted, "api")["api"][:2] == ("True", "Accepted")
    assert children(granted, "default/api/80") == ["default/api/80/pods", "other/backup/80"]


def test_in_cluster_first_is_failover_from_the_pods_to_the_external_name() -> None:
    preferring = external_service(
        "migrating", "legacy.example", 80, annotations={"dragoman.dev/prefer-service": "api"}
    )
    dag = failover_world(preferring, http_route("to-migrating", "migrating", 80))
    assert children(dag, "default/migrating/80") == [
        "default/api/80",
        "default/migrating/80/external",
    ]
