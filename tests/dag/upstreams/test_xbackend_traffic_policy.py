"""XBackendTrafficPolicy (gateway.networking.x-k8s.io/v1alpha1, GEP-3388): read at the edge
with bad values kept as problems, judged per GEP-713 (Accepted, Invalid naming the field,
TargetNotFound, Conflicted: older wins, then by name), carried by the clusters of the
Services and XBackends it targets, kept as sessions by the routes to them; what Envoy cannot
do named UnsupportedValue, what it approximates said; a BackendPolicy on the same Service
applies alongside."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.model import ClusterTraffic, Dag, EdsCluster, Forward, StatefulSession
from dragoman.objects.xbackend_traffic_policy import (
    RetryBudget,
    SessionPersistence,
    XBackendTrafficPolicy,
)
from dragoman.sources.parse import parse_object
from tests.support.builders import (
    backend_policy,
    external_service,
    http_route,
    rule,
    service,
    xbackend,
    xbackend_ref,
    xbackend_traffic_policy,
)
from tests.support.status_builds import DRAGOMAN_CLASS, GATEWAY, build_text, status

KIND = "XBackendTrafficPolicy"
BUDGET: dict[str, Any] = {
    "retryConstraint": {
        "budget": {"percent": 25, "interval": "30s"},
        "minRetryRate": {"count": 2, "interval": "1s"},
    }
}
COOKIE: dict[str, Any] = {"sessionPersistence": {"sessionName": "pin"}}


def world(*policies: dict[str, Any]) -> Dag:
    return build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service("api"),
        external_service("partner", "api.partner.example"),
        xbackend("remote", "remote.example"),
        http_route("to-api", "api", 80),
        http_route("to-partner", "partner", 443),
        http_route("to-remote", rules=[rule(xbackend_ref("remote"))]),
        *policies,
    )


def accepted(dag: Dag, name: str) -> dict[str, tuple[str, str, str]]:
    """Per target name: (status, reason, message) of the policy's Accepted condition."""
    found = {}
    for ancestor in status(dag, KIND, name)["ancestors"]:
        [condition] = ancestor["conditions"]
        assert condition["type"] == "Accepted"
        found[ancestor["ancestorRef"]["name"]] = (
            condition["status"],
            condition["reason"],
            condition["message"],
        )
    return found


def forwards(dag: Dag, route: str) -> list[Forward]:
    """What `route` forwards to, in every node group."""
    found = []
    for group in dag.groups.values():
        for table in group.route_tables:
            for host in table.virtual_hosts:
                for value in host.routes:
                    if value.source.name == route and isinstance(value.action, Forward):
                        found.append(value.action)
    return found


def test_the_crd_defaults_fill_what_is_not_given() -> None:
    policy = parse_object(
        xbackend_traffic_policy("p", "api", spec={"retryConstraint": {}, "sessionPersistence": {}})
    )
    assert isinstance(policy, XBackendTrafficPolicy) and not policy.problems
    assert policy.retry_budget == RetryBudget(20, 10.0, 10, 1.0)
    assert policy.session_persistence == SessionPersistence(
        type="Cookie", session_name="dragoman-session", lifetime_type="Session"
    )


def test_every_field_is_read() -> None:
    spec = {
        **BUDGET,
        "sessionPersistence": {
            "type": "Cookie",
            "sessionName": "pin",
            "absoluteTimeout": "1h",
            "cookieConfig": {"lifetimeType": "Permanent"},
        },
    }
    policy = parse_object(xbackend_traffic_policy("p", "api", "xbackend/remote", spec=spec))
    assert isinstance(policy, XBackendTrafficPolicy) and not policy.problems
    assert policy.retry_budget == RetryBudget(25, 30.0, 2, 1.0)
    assert policy.session_persistence == SessionPersistence(
        "Cookie", "pin", 3600.0, None, "Permanent"
    )
    assert [(r.kind, r.name) for r in policy.target_refs] == [
        ("Service", "api"),
        ("XBackend", "remote"),
    ]
    header = parse_object(
        xbackend_traffic_policy(
            "h", "api", spec={"sessionPersistence": {"type": "Header", "sessionName": "X-Pin"}}
        )
    )
    assert isinstance(header, XBackendTrafficPolicy)
    assert header.session_persistence == SessionPersistence("Header", "x-pin")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"retryConstraint": {"budget": {"percent": 101}}}, "spec.retryConstraint.budget.percent"),
        ({"retryConstraint": {"budget": {"percent": -1}}}, "spec.retryConstraint.budget.percent"),
        ({"retryConstraint": {"budget": {"interval": "500ms"}}}, "budget.interval"),
        ({"retryConstraint": {"budget": {"interval": "2h"}}}, "budget.interval"),
        ({"retryConstraint": {"budget": {"interval": "often"}}}, "budget.interval"),
        ({"retryConstraint": {"minRetryRate": {"count": 0}}}, "minRetryRate.count"),
        ({"retryConstraint": {"minRetryRate": {"count": 1000001}}}, "minRetryRate.count"),
        ({"retryConstraint": {"minRetryRate": {"interval": "0s"}}}, "minRetryRate.interval"),
        ({"retryConstraint": {"minRetryRate": {"interval": "61m"}}}, "minRetryRate.interval"),
        ({"retryConstraint": {"budgets": {}}}, "spec.retryConstraint.budgets"),
        ({"sessionPersistence": {"type": "Url"}}, "spec.sessionPersistence.type"),
        ({"sessionPersistence": {"sessionName": "a b"}}, "spec.sessionPersistence.sessionName"),
        ({"sessionPersistence": {"sessionName": "x" * 129}}, "sessionName"),
        ({"sessionPersistence": {"absoluteTimeout": "0s"}}, "absoluteTimeout"),
        (
            {"sessionPersistence": {"type": "Header", "cookieConfig": {}}},
            "spec.sessionPersistence.cookieConfig",
        ),
        (
            {"sessionPersistence": {"cookieConfig": {"lifetimeType": "Permanent"}}},
            "spec.sessionPersistence.absoluteTimeout",
        ),
        (
            {"sessionPersistence": {"cookieConfig": {"lifetimeType": "Forever"}}},
            "cookieConfig.lifetimeType",
        ),
    ],
)
def test_a_bad_value_makes_the_policy_invalid_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    dag = world(xbackend_traffic_policy("bad", "api", spec=spec))

    state, reason, message = accepted(dag, "bad")["api"]
    assert (state, reason) == ("False", "Invalid")
    assert field in message
    # Its target is served as if it had no policy; the rest of the world is served.
    cluster = dag.clusters["default/api/80"]
    assert isinstance(cluster, EdsCluster) and cluster.traffic is None
    assert all(f.session is None for f in forwards(dag, "to-api"))
    assert "default/partner/443" in dag.clusters
    assert any(p.field.startswith("spec.") and p.reason == "Invalid" for p in dag.problems)


def test_a_target_of_another_kind_is_invalid() -> None:
    document = xbackend_traffic_policy("gw", "api")
    document["spec"]["targetRefs"] = [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}
    ]
    [(state, reason, message)] = accepted(world(document), "gw").values()
    assert (state, reason) == ("False", "Invalid")
    assert "spec.targetRefs[0].kind" in message


def test_services_and_xbackends_carry_the_policy_and_routes_keep_the_session() -> None:
    spec = {**BUDGET, **COOKIE}
    dag = world(xbackend_traffic_policy("t", "api", "partner", "xbackend/remote", spec=spec))

    api = dag.clusters["default/api/80"]
    assert isinstance(api, EdsCluster) and api.traffic is not None
    expected = ClusterTraffic(
        policy=api.traffic.policy,
        retry_budget=RetryBudget(25, 30.0, 2, 1.0),
        session=StatefulSession(header=False, name="pin"),
    )
    assert api.traffic.policy.name == "t"
    for name in ("default/api/80", "default/partner/443", "xbackend/default/remote/443"):
        assert getattr(dag.clusters[name], "traffic", None) == expected, name
    for route in ("to-api", "to-partner", "to-remote"):
        found = forwards(dag, route)
        assert found and all(f.session == StatefulSession(False, "pin") for f in found)
    verdicts = accepted(dag, "t")
    assert {name: v[:2] for name, v in verdicts.items()} == {
        "api": ("True", "Accepted"),
        "partner": ("True", "Accepted"),
        "remote": ("True", "Accepted"),
    }
    # The approximation of the retry budget is said, exactly.
    message = verdicts["api"][2]
    assert "25% of the requests active at once" in message
    assert "budget.interval, which Envoy does not measure" in message
    assert "at least 2 retries at once" in message
    assert "proxyless gRPC clients apply neither" in message


def test_a_permanent_cookie_lives_for_the_absolute_timeout() -> None:
    spec = {
        "sessionPersistence": {
            "absoluteTimeout": "2h",
            "cookieConfig": {"lifetimeType": "Permanent"},
        }
    }
    dag = world(xbackend_traffic_policy("t", "api", spec=spec))
    found = forwards(dag, "to-api")
    assert found and all(
        f.session == StatefulSession(False, "dragoman-session", 7200.0) for f in found
    )
    assert not [p for p in dag.problems if p.reason == "UnsupportedValue"]


@pytest.mark.parametrize(
    ("session", "field"),
    [
        ({"idleTimeout": "5m"}, "spec.sessionPersistence.idleTimeout"),
        ({"absoluteTimeout": "1h"}, "spec.sessionPersistence.absoluteTimeout"),
        ({"type": "Header", "absoluteTimeout": "1h"}, "spec.sessionPersistence.absoluteTimeout"),
    ],
)
def test_what_envoy_cannot_do_is_unsupported_value_naming_the_field(
    session: dict[str, Any], field: str
) -> None:
    dag = world(xbackend_traffic_policy("t", "api", spec={"sessionPersistence": session}))

    state, reason, message = accepted(dag, "t")["api"]
    assert (state, reason) == ("True", "Accepted")  # the rest of it applies
    assert f"UnsupportedValue: {field}" in message
    [problem] = [p for p in dag.problems if p.object.kind == KIND]
    assert (problem.field, problem.reason) == (field, "UnsupportedValue")
    found = forwards(dag, "to-api")
    assert found and all(f.session is not None and f.session.cookie_ttl_s is None for f in found)


def test_a_missing_target_is_target_not_found_and_applies_once_it_exists() -> None:
    policy = xbackend_traffic_policy("t", "api", "later", spec=BUDGET)
    verdicts = accepted(world(policy), "t")
    assert verdicts["later"][:2] == ("False", "TargetNotFound")
    assert verdicts["api"][:2] == ("True", "Accepted")

    dag = build_text(
        DRAGOMAN_CLASS, GATEWAY, service("later"), http_route("to-later", "later", 80), policy
    )
    assert accepted(dag, "t")["later"][:2] == ("True", "Accepted")
    assert getattr(dag.clusters["default/later/80"], "traffic", None) is not None


def test_two_policies_on_one_target_the_older_wins() -> None:
    old = xbackend_traffic_policy("zz-old", "api", spec=BUDGET, created="2024-01-01T00:00:00Z")
    new = xbackend_traffic_policy("aa-new", "api", spec=COOKIE, created="2025-01-01T00:00:00Z")
    dag = world(new, old)

    assert accepted(dag, "zz-old")["api"][:2] == ("True", "Accepted")
    state, reason, message = accepted(dag, "aa-new")["api"]
    assert (state, reason) == ("False", "Conflicted")
    assert "XBackendTrafficPolicy default/zz-old" in message
    cluster = dag.clusters["default/api/80"]
    assert isinstance(cluster, EdsCluster) and cluster.traffic is not None
    assert cluster.traffic.retry_budget is not None and cluster.traffic.session is None
    # Same age: first by name.
    tie = world(xbackend_traffic_policy("b", "api"), xbackend_traffic_policy("a", "api"))
    assert accepted(tie, "a")["api"][1] == "Accepted"
    assert accepted(tie, "b")["api"][1] == "Conflicted"


def test_a_backend_policy_on_the_same_service_applies_alongside() -> None:
    breaker = {"circuitBreaker": {"maxConnections": 7, "maxParallelRetries": 3}}
    balancer = {"loadBalancer": {"type": "LeastRequest"}}
    dag = world(
        backend_policy("bp", "api", spec={**breaker, **balancer}),
        xbackend_traffic_policy("t", "api", spec={**BUDGET, **COOKIE}),
    )
    cluster = dag.clusters["default/api/80"]
    assert isinstance(cluster, EdsCluster)
    assert cluster.policy is not None and cluster.policy.circuit_breaker is not None
    assert cluster.policy.circuit_breaker.max_connections == 7
    assert cluster.traffic is not None and cluster.traffic.retry_budget is not None
    message = accepted(dag, "t")["api"][2]
    assert "replaces circuitBreaker.maxParallelRetries of BackendPolicy default/bp" in message
    assert "before the loadBalancer of BackendPolicy default/bp" in message


def test_without_a_policy_nothing_changes() -> None:
    plain = world()
    cluster = plain.clusters["default/api/80"]
    assert isinstance(cluster, EdsCluster) and cluster.traffic is None
    assert all(f.session is None for f in forwards(plain, "to-api"))
    listeners = [v for g in plain.groups.values() for v in g.listeners]
    assert listeners and not any(getattr(v, "stateful_sessions", False) for v in listeners)


def test_only_listeners_whose_routes_keep_sessions_run_the_filter() -> None:
    dag = world(xbackend_traffic_policy("t", "api", spec=COOKIE))
    listeners = [v for g in dag.groups.values() for v in g.listeners]
    assert listeners and all(getattr(v, "stateful_sessions", False) for v in listeners)
    budget_only = world(xbackend_traffic_policy("t", "api", spec=BUDGET))
    listeners = [v for g in budget_only.groups.values() for v in g.listeners]
    assert not any(getattr(v, "stateful_sessions", False) for v in listeners)
