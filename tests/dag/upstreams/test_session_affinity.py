"""sessionAffinity ClientIP: parsed as the API server does, built into ring-hash clusters
and a source-IP hash on the routes to them, its timeout reported once per Service."""

from __future__ import annotations

import pytest
import yaml
from envoy.config.cluster.v3 import cluster_pb2

from dragoman.dag.model import EdsCluster, Forward
from dragoman.envoy.resources.cluster_messages import cluster
from dragoman.envoy.resources.route_messages import route_action
from dragoman.envoy.translate_options import DEFAULT_OPTIONS
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from tests.support.builders import Object, gateway, http_route, service
from tests.support.status_builds import build_text


def web_service(spec_fields: str) -> Object:
    """The Service web (port 80) with `spec_fields` (YAML) added to its spec."""
    found = service("web", 80)
    found["spec"].update(yaml.safe_load(spec_fields) or {})
    return found


def parse(document: Object):  # type: ignore[no-untyped-def]
    return parse_object(document)


def test_client_ip_affinity_and_its_timeout_are_read() -> None:
    parsed = parse(
        web_service(
            "sessionAffinity: ClientIP\nsessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}"
        )
    )
    assert parsed.client_ip_affinity and parsed.session_affinity_timeout_s == 60
    plain = parse(web_service(""))
    assert not plain.client_ip_affinity and plain.session_affinity_timeout_s is None


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("sessionAffinity: Sticky", "spec.sessionAffinity"),
        (
            "sessionAffinity: ClientIP\nsessionAffinityConfig: {clientIP: {timeoutSeconds: 0}}",
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
        ),
        (
            "sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}",
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
        ),
    ],
)
def test_values_the_api_server_refuses_are_refused(extra: str, field: str) -> None:
    with pytest.raises(ObjectError) as raised:
        parse(web_service(extra))
    assert field in str(raised.value)


ROUTES = (
    gateway(port=8080),
    http_route("a", "web", 80, hostnames=["a.example"]),
    http_route("b", "web", 80, hostnames=["b.example"]),
)


def test_affinity_makes_a_ring_hash_cluster_and_a_source_ip_hash() -> None:
    dag = build_text(
        *ROUTES,
        web_service(
            "sessionAffinity: ClientIP\nsessionAffinityConfig: {clientIP: {timeoutSeconds: 10800}}"
        ),
    )

    value = dag.clusters["default/web/80"]
    assert isinstance(value, EdsCluster) and value.client_ip_affinity
    assert cluster(value, DEFAULT_OPTIONS).lb_policy == cluster_pb2.Cluster.RING_HASH
    forwards = [
        route.action
        for table in dag.groups[""].route_tables
        for host in table.virtual_hosts
        for route in host.routes
        if isinstance(route.action, Forward)
    ]
    assert forwards and all(action.hash_client_ip for action in forwards)
    message = route_action(
        forwards[0],
        [("default/web/80", 1)],
        dag.groups[""].route_tables[0].virtual_hosts[0].routes[0].match,
    )
    assert [p.connection_properties.source_ip for p in message.hash_policy] == [True]
    # Two routes reach the Service: its timeout is reported once, on the Service.
    reported = [p for p in dag.problems if p.object.kind == "Service"]
    assert [(p.object.name, p.field, p.reason) for p in reported] == [
        ("web", "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "UnsupportedValue")
    ]


def test_without_affinity_nothing_changes() -> None:
    dag = build_text(*ROUTES, web_service(""))

    value = dag.clusters["default/web/80"]
    assert cluster(value, DEFAULT_OPTIONS).lb_policy == cluster_pb2.Cluster.ROUND_ROBIN
    assert not any(p.object.kind == "Service" for p in dag.problems)
