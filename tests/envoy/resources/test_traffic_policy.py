"""An XBackendTrafficPolicy in Envoy's terms: the retry budget on the cluster's default
circuit breakers (beside a BackendPolicy's thresholds, in the same entry), the session as an
optional per-route stateful_session config, and the filter in the connection managers of
those route tables alone; the real Envoy accepts all of it at the extremes of every field the
policy allows (`envoy --mode validate`), for pods, ExternalNames and XBackends, HTTP and
HTTPS listeners."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.stateful_session.v3 import stateful_session_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.stateful_session.cookie.v3 import cookie_pb2
from envoy.extensions.http.stateful_session.header.v3 import header_pb2

from dragoman.dag.model import Dag
from dragoman.envoy import translate
from dragoman.envoy.resources.traffic_policy_messages import STATEFUL_SESSION_FILTER
from dragoman.snapshots.resources import CLUSTER, LISTENER, ROUTE
from tests.support.builders import (
    allowed_routes,
    backend_policy,
    external_service,
    gateway,
    http_route,
    listener,
    listener_tls,
    rule,
    service,
    tls_secret,
    xbackend,
    xbackend_ref,
    xbackend_traffic_policy,
)
from tests.support.certificates import certificate_authority
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import DRAGOMAN_CLASS, GATEWAY, build_text

TARGETS = ("api", "partner", "xbackend/remote")
LARGEST: dict[str, Any] = {
    "retryConstraint": {
        "budget": {"percent": 100, "interval": "1h"},
        "minRetryRate": {"count": 1000000, "interval": "1h"},
    },
    "sessionPersistence": {
        "sessionName": "s" * 128,
        "absoluteTimeout": "8760h",
        "cookieConfig": {"lifetimeType": "Permanent"},
    },
}
SMALLEST: dict[str, Any] = {
    "retryConstraint": {
        "budget": {"percent": 0, "interval": "1s"},
        "minRetryRate": {"count": 1, "interval": "1ms"},
    },
    "sessionPersistence": {"type": "Header", "sessionName": "x"},
}
TYPICAL: dict[str, Any] = {
    "retryConstraint": {"budget": {"percent": 20}, "minRetryRate": {"count": 1}},
    "sessionPersistence": {"sessionName": "pin"},
}


CERT = certificate_authority("xbtp").issue("api.example")
# Plain HTTP and HTTPS (a filter chain per hostname): both connection managers keep sessions.
BOTH = gateway(
    listeners=[
        listener(allowed_routes=allowed_routes("All")),
        listener(
            "https",
            443,
            "HTTPS",
            hostname="api.example",
            tls=listener_tls("cert"),
            allowed_routes=allowed_routes("All"),
        ),
    ]
)


def world(spec: dict[str, Any], *extra: dict[str, Any]) -> Dag:
    return build_text(
        DRAGOMAN_CLASS,
        BOTH,
        tls_secret("cert", CERT.certificate, CERT.private_key),
        service("api"),
        external_service("partner", "api.partner.example"),
        xbackend("remote", "remote.example"),
        http_route("to-api", "api", 80, hostnames=["api.example"]),
        http_route("to-partner", "partner", 443, hostnames=["partner.example"]),
        http_route("to-remote", rules=[rule(xbackend_ref("remote"))], hostnames=["r.example"]),
        xbackend_traffic_policy("t", *TARGETS, spec=spec),
        *extra,
    )


def served(dag: Dag, type_url: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for snapshot in translate(dag).values():
        found.update((m.name, m) for m in messages(snapshot, type_url))
    return found


def managers(dag: Dag) -> list[hcm_pb2.HttpConnectionManager]:
    found = []
    for served_listener in served(dag, LISTENER).values():
        assert isinstance(served_listener, listener_pb2.Listener)
        for chain in served_listener.filter_chains:
            manager = hcm_pb2.HttpConnectionManager()
            if chain.filters[0].typed_config.Unpack(manager):
                found.append(manager)
    return found


def route_sessions(dag: Dag) -> dict[str, stateful_session_pb2.StatefulSessionPerRoute]:
    """Per route name, its stateful_session per-route config (checked to be optional)."""
    found = {}
    for table in served(dag, ROUTE).values():
        assert isinstance(table, route_pb2.RouteConfiguration)
        for host in table.virtual_hosts:
            for route in host.routes:
                packed = route.typed_per_filter_config.get(STATEFUL_SESSION_FILTER)
                if packed is None:
                    continue
                wrapper = rc_pb2.FilterConfig()
                assert packed.Unpack(wrapper) and wrapper.is_optional
                per_route = stateful_session_pb2.StatefulSessionPerRoute()
                assert wrapper.config.Unpack(per_route)
                found[route.name] = per_route
    return found


def test_the_retry_budget_lands_on_the_default_thresholds() -> None:
    clusters = served(world(TYPICAL), CLUSTER)
    for name in ("default/api/80", "default/partner/443", "xbackend/default/remote/443"):
        cluster = clusters[name]
        assert isinstance(cluster, cluster_pb2.Cluster)
        [thresholds] = cluster.circuit_breakers.thresholds
        assert thresholds.priority == base_pb2.DEFAULT
        assert thresholds.retry_budget.budget_percent.value == 20.0
        assert thresholds.retry_budget.min_retry_concurrency.value == 1


def test_a_backend_policys_breakers_and_the_budget_share_one_entry() -> None:
    breaker = {"circuitBreaker": {"maxConnections": 7, "maxParallelRetries": 3}}
    dag = world(TYPICAL, backend_policy("bp", "api", spec=breaker))
    [thresholds] = served(dag, CLUSTER)["default/api/80"].circuit_breakers.thresholds
    assert thresholds.max_connections.value == 7
    # Kept as written; Envoy applies the budget instead (the policy's status says so).
    assert thresholds.max_retries.value == 3
    assert thresholds.retry_budget.budget_percent.value == 20.0


def test_each_route_carries_its_backends_session() -> None:
    sessions = route_sessions(world(TYPICAL))
    assert set(sessions) == {f"default/{r}/rule/0" for r in ("to-api", "to-partner", "to-remote")}
    for per_route in sessions.values():
        state = per_route.stateful_session.session_state
        assert state.name == "envoy.http.stateful_session.cookie"
        cookie = cookie_pb2.CookieBasedSessionState()
        assert state.typed_config.Unpack(cookie)
        assert (cookie.cookie.name, cookie.cookie.path) == ("pin", "/")
        assert not cookie.cookie.HasField("ttl")  # a session cookie


def test_a_permanent_cookie_has_a_max_age_and_a_header_session_its_name() -> None:
    [permanent, *_] = route_sessions(world(LARGEST)).values()
    cookie = cookie_pb2.CookieBasedSessionState()
    assert permanent.stateful_session.session_state.typed_config.Unpack(cookie)
    assert cookie.cookie.ttl.seconds == 8760 * 3600
    [header_route, *_] = route_sessions(world(SMALLEST)).values()
    state = header_route.stateful_session.session_state
    assert state.name == "envoy.http.stateful_session.header"
    header = header_pb2.HeaderBasedSessionState()
    assert state.typed_config.Unpack(header) and header.name == "x"


def test_only_managers_of_tables_keeping_sessions_run_the_filter() -> None:
    kept = managers(world(TYPICAL))
    assert len(kept) >= 2  # port 80's, and the TLS chain's of port 443
    for manager in kept:
        names = [f.name for f in manager.http_filters]
        assert names[-2:] == [STATEFUL_SESSION_FILTER, "envoy.filters.http.router"]
    budget_only = {"retryConstraint": TYPICAL["retryConstraint"]}
    for manager in managers(world(budget_only)):
        assert STATEFUL_SESSION_FILTER not in [f.name for f in manager.http_filters]
    assert not route_sessions(world(budget_only))


def test_without_a_policy_every_resource_is_what_it_was() -> None:
    def plain() -> Dag:
        return build_text(DRAGOMAN_CLASS, GATEWAY, service("api"), http_route("to-api", "api", 80))

    # A policy on a Service no route reaches changes no listener, route or cluster served.
    aside = build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service("api"),
        http_route("to-api", "api", 80),
        xbackend_traffic_policy("t", "elsewhere", spec=TYPICAL),
    )
    for type_url in (LISTENER, ROUTE, CLUSTER):
        before = {n: m.SerializeToString() for n, m in served(plain(), type_url).items()}
        after = {n: m.SerializeToString() for n, m in served(aside, type_url).items()}
        assert before == after, type_url


@pytest.mark.parametrize(
    "spec", [TYPICAL, LARGEST, SMALLEST], ids=["typical", "largest", "smallest"]
)
def test_envoy_accepts_every_cluster_listener_and_route_a_policy_shapes(
    spec: dict[str, Any], tmp_path: Path
) -> None:
    breaker = {"circuitBreaker": {"maxParallelRetries": 3}, "loadBalancer": {"type": "Random"}}
    dag = world(spec, backend_policy("bp", "api", spec=breaker))
    shaped = [c for c in dag.clusters.values() if getattr(c, "traffic", None) is not None]
    assert len(shaped) == 3
    assert route_sessions(dag)
    for index, snapshot in enumerate(translate(dag).values()):
        path = tmp_path / f"envoy-{index}.yaml"
        path.write_text(yaml.safe_dump(translated_bootstrap(snapshot, tmp_path / "admin.sock")))
        validate(envoy_binary(), path)


def test_a_failover_aggregate_carries_its_own_services_budget_and_session(tmp_path: Path) -> None:
    failover = {"failover": [{"name": "spare"}]}
    dag = build_text(
        DRAGOMAN_CLASS,
        GATEWAY,
        service("api"),
        service("spare"),
        http_route("to-api", "api", 80),
        backend_policy("bp", "api", spec=failover),
        xbackend_traffic_policy("t", "api", spec=TYPICAL),
        xbackend_traffic_policy("other", "spare", spec={"retryConstraint": {}}),
    )
    clusters = served(dag, CLUSTER)
    # Routes name the aggregate: its breakers carry the target's budget, not the spare's.
    [thresholds] = clusters["default/api/80"].circuit_breakers.thresholds
    assert thresholds.retry_budget.budget_percent.value == 20.0
    assert thresholds.retry_budget.min_retry_concurrency.value == 1
    [spare] = clusters["default/spare/80"].circuit_breakers.thresholds
    assert spare.retry_budget.min_retry_concurrency.value == 10
    sessions = route_sessions(dag)
    assert list(sessions) == ["default/to-api/rule/0"]
    for index, snapshot in enumerate(translate(dag).values()):
        path = tmp_path / f"envoy-{index}.yaml"
        path.write_text(yaml.safe_dump(translated_bootstrap(snapshot, tmp_path / "admin.sock")))
        validate(envoy_binary(), path)


# Values each field may take in the seeded worlds below, good and bad alike.
PICKS: dict[str, list[Any]] = {
    "percent": [0, 1, 20, 100, -1, 101, "20"],
    "interval": ["1s", "10s", "1h", "500ms", "2h", "soon", 5],
    "count": [1, 10, 1000000, 0, 1000001, None],
    "rate_interval": ["1ms", "1s", "1h", "0s", "61m", None],
    "type": ["Cookie", "Header", "Url", None],
    "name": ["pin", "X-Pin", "s" * 128, "s" * 129, "a b", "", None],
    "absolute": ["1s", "2h", "8760h", "0s", "soon", None],
    "idle": ["30m", "0s", None],
    "lifetime": ["Session", "Permanent", "Forever", None],
}


def seeded_spec(pick: Any) -> dict[str, Any]:
    """A random spec: each field present or not, each value from PICKS."""
    spec: dict[str, Any] = {}
    if pick([True, False]):
        budget = {k: v for k in ("percent", "interval") if (v := pick(PICKS[k])) is not None}
        rate = {
            "count": pick(PICKS["count"]),
            "interval": pick(PICKS["rate_interval"]),
        }
        spec["retryConstraint"] = {
            "budget": budget,
            "minRetryRate": {k: v for k, v in rate.items() if v is not None},
        }
    if pick([True, False]):
        session = {
            "type": pick(PICKS["type"]),
            "sessionName": pick(PICKS["name"]),
            "absoluteTimeout": pick(PICKS["absolute"]),
            "idleTimeout": pick(PICKS["idle"]),
        }
        lifetime = pick(PICKS["lifetime"])
        if lifetime is not None:
            session["cookieConfig"] = {"lifetimeType": lifetime}
        spec["sessionPersistence"] = {k: v for k, v in session.items() if v is not None}
    return spec


@pytest.mark.parametrize("seed", range(3))
def test_envoy_accepts_whatever_seeded_policies_make_of_many_services(
    seed: int, tmp_path: Path
) -> None:
    pick = random.Random(seed).choice
    count = 24
    documents: list[dict[str, Any]] = []
    for index in range(count):
        documents += [
            service(f"s{index}"),
            http_route(f"to-s{index}", f"s{index}", 80, hostnames=[f"s{index}.example"]),
            xbackend_traffic_policy(f"p{index}", f"s{index}", spec=seeded_spec(pick)),
        ]
    dag = build_text(DRAGOMAN_CLASS, GATEWAY, *documents)
    invalid = {p.object.name for p in dag.problems if p.reason == "Invalid"}
    assert 0 < len(invalid) < count  # some of each
    for index in range(count):
        traffic = getattr(dag.clusters[f"default/s{index}/80"], "traffic", None)
        # A policy with a bad field shapes nothing; a good one shapes its Service.
        assert (traffic is None) == (f"p{index}" in invalid)
    for number, snapshot in enumerate(translate(dag).values()):
        path = tmp_path / f"envoy-{number}.yaml"
        path.write_text(yaml.safe_dump(translated_bootstrap(snapshot, tmp_path / "admin.sock")))
        validate(envoy_binary(), path)
