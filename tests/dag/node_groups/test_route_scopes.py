"""Which plain-HTTP ports of a Gateway asking for a route table per hostname are scoped, and
the Gateway told why the others are not."""

from __future__ import annotations

from typing import Any

from dragoman.dag.frontends.route_tables import PER_HOST, ROUTE_TABLES
from dragoman.dag.incremental.builder import IncrementalBuild
from dragoman.dag.model import ALL_GATEWAYS, Dag, HttpListener
from dragoman.dag.node_groups.route_scopes import ROUTE_TABLE_SHARED
from dragoman.dag.status.route_tables import ROUTE_TABLES_PER_HOST
from tests.support.builders import gateway, http_route, listener, listener_tls, service, tls_secret
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    DRAGOMAN_CLASS,
    build_text,
    gateway_condition,
    status,
    store_of,
)

CERT = certificate_authority().issue("a.example.com")
SECRET = tls_secret("cert", CERT.certificate, CERT.private_key)


def annotated(listeners: list[dict[str, Any]], value: str = PER_HOST) -> dict[str, Any]:
    found = gateway(listeners=listeners)
    found["metadata"]["annotations"] = {ROUTE_TABLES: value}
    return found


def built(gw: dict[str, Any], *routes: dict[str, Any]) -> Dag:
    return build_text(DRAGOMAN_CLASS, gw, service("web"), SECRET, *routes)


def scoped_ports(dag: Dag, group: str = "default/gw") -> list[int]:
    return [v.port for v in dag.groups[group].listeners if isinstance(v, HttpListener) and v.scoped]


def condition_message(dag: Dag) -> str:
    [found] = [
        c for c in status(dag, "Gateway", "gw")["conditions"] if c["type"] == ROUTE_TABLES_PER_HOST
    ]
    return str(found["message"])


def test_exact_hostnames_are_scoped_and_the_gateway_says_so() -> None:
    dag = built(
        annotated([listener()]),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
        http_route("b", "web", 80, hostnames=["b.example.com", "c.example.com"]),
    )
    assert scoped_ports(dag) == [80]
    assert scoped_ports(dag, ALL_GATEWAYS) == [80]
    assert gateway_condition(dag, "gw", ROUTE_TABLES_PER_HOST) == ("True", "PerHost")
    assert "case-sensitively" in condition_message(dag)
    assert not [p for p in dag.problems if p.reason == ROUTE_TABLE_SHARED]


def test_a_wildcard_route_keeps_the_port_on_one_table_naming_the_route_and_hostname() -> None:
    dag = built(
        annotated([listener()]),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
        http_route("wild", "web", 80, hostnames=["*.example.com"]),
    )
    assert scoped_ports(dag) == []
    assert gateway_condition(dag, "gw", ROUTE_TABLES_PER_HOST) == ("False", ROUTE_TABLE_SHARED)
    message = condition_message(dag)
    assert "HTTPRoute/default/wild" in message and "'*.example.com'" in message
    assert "spec.listeners[0]" in message
    [problem] = [p for p in dag.problems if p.reason == ROUTE_TABLE_SHARED]
    assert problem.field == "spec.listeners[0]"


def test_a_route_without_hostnames_on_a_listener_without_one_serves_any_host() -> None:
    dag = built(annotated([listener()]), http_route("any", "web", 80))
    assert scoped_ports(dag) == []
    assert "HTTPRoute/default/any" in condition_message(dag)
    assert "'*'" in condition_message(dag)


def test_a_listener_hostname_scopes_routes_without_hostnames_under_it() -> None:
    dag = built(annotated([listener(hostname="api.example.com")]), http_route("any", "web", 80))
    assert scoped_ports(dag) == [80]


def test_an_https_port_keeps_one_table_per_server_name_and_says_so() -> None:
    https = listener("https", 443, "HTTPS", hostname="a.example.com", tls=listener_tls("cert"))
    dag = built(
        annotated([listener(), https]),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
    )
    assert scoped_ports(dag) == [80]
    assert gateway_condition(dag, "gw", ROUTE_TABLES_PER_HOST)[0] == "False"
    assert "port 443 keeps one route table per server name" in condition_message(dag)


def test_only_one_plain_http_port_is_scoped() -> None:
    dag = built(
        annotated([listener(), listener("alt", 8080)]),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
    )
    assert scoped_ports(dag) == [80]
    assert "port 80 is served with a route table per hostname already" in condition_message(dag)


def test_a_bad_annotation_value_is_refused_naming_it() -> None:
    dag = built(
        annotated([listener()], "perhost"),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
    )
    assert scoped_ports(dag) == []
    assert gateway_condition(dag, "gw", ROUTE_TABLES_PER_HOST) == ("False", "InvalidAnnotation")
    [problem] = [p for p in dag.problems if p.reason == "InvalidAnnotation"]
    assert problem.field == f"metadata.annotations[{ROUTE_TABLES}]"
    assert "'perhost'" in problem.message


def test_shared_is_the_default_and_says_so() -> None:
    dag = built(
        annotated([listener()], "shared"),
        http_route("a", "web", 80, hostnames=["a.example.com"]),
    )
    assert scoped_ports(dag) == []
    assert gateway_condition(dag, "gw", ROUTE_TABLES_PER_HOST) == ("False", "Shared")


def test_a_gateway_without_the_annotation_has_no_condition() -> None:
    dag = built(gateway(listeners=[listener()]), http_route("a", "web", 80, hostnames=["a.b"]))
    types = [c["type"] for c in status(dag, "Gateway", "gw")["conditions"]]
    assert ROUTE_TABLES_PER_HOST not in types
    assert scoped_ports(dag) == []


def test_a_wildcard_route_appearing_and_going_switches_the_port_incrementally() -> None:
    """The incremental build decides again as routes come and go, and reports it."""
    builder = IncrementalBuild()
    base = [DRAGOMAN_CLASS, annotated([listener()]), service("web"), SECRET]
    exact = http_route("a", "web", 80, hostnames=["a.example.com"])
    wild = http_route("wild", "web", 80, hostnames=["*.example.com"])
    assert scoped_ports(builder.build(store_of(*base, exact)).dag) == [80]
    added = builder.build(store_of(*base, exact, wild))
    assert added.kind == "incremental"
    assert scoped_ports(added.dag) == []
    assert "HTTPRoute/default/wild" in condition_message(added.dag)
    gone = builder.build(store_of(*base, exact))
    assert gone.kind == "incremental"
    assert scoped_ports(gone.dag) == [80]
    assert gateway_condition(gone.dag, "gw", ROUTE_TABLES_PER_HOST) == ("True", "PerHost")


def test_a_port_shared_with_a_gateway_that_does_not_ask_is_scoped_for_its_own_envoys() -> None:
    other = gateway("plain", listeners=[listener(hostname="plain.example.com")])
    dag = built(
        annotated([listener()]),
        other,
        http_route("a", "web", 80, hostnames=["a.example.com"]),
    )
    assert scoped_ports(dag) == [80]  # the Gateway's own Envoys
    assert scoped_ports(dag, ALL_GATEWAYS) == []  # Envoys given every Gateway
    assert "on Envoys that serve every Gateway" in condition_message(dag)
    assert "Gateway/default/plain" in condition_message(dag)


def test_annotating_a_gateway_switches_its_port_on_the_next_build() -> None:
    builder = IncrementalBuild()
    exact = http_route("a", "web", 80, hostnames=["a.example.com"])
    plain = gateway(listeners=[listener()])
    assert (
        scoped_ports(builder.build(store_of(DRAGOMAN_CLASS, plain, service("web"), exact)).dag)
        == []
    )
    made = builder.build(store_of(DRAGOMAN_CLASS, annotated([listener()]), service("web"), exact))
    assert scoped_ports(made.dag) == [80]
    back = builder.build(store_of(DRAGOMAN_CLASS, plain, service("web"), exact))
    assert scoped_ports(back.dag) == []
    types = [c["type"] for c in status(back.dag, "Gateway", "gw")["conditions"]]
    assert ROUTE_TABLES_PER_HOST not in types
