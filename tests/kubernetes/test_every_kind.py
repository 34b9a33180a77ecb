"""Every watched kind, added, updated and deleted in the API server, changes what a running
replica builds: one table, one row per kind, each step checked against the DAG (and checked
not to hold before the step, so every step is seen to change something)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest

from dragoman.dag.model import Dag, DnsCluster, EdsCluster, HttpsListener, TcpListener, UdpListener
from dragoman.kubernetes.watched_kinds import WATCHED_KINDS, served_kinds
from dragoman.objects import ObjectKey
from tests.support.builders import (
    allowed_routes,
    backend_policy,
    backend_ref,
    backend_tls_policy,
    config_map,
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    grpc_match,
    grpc_route,
    http_route,
    listener,
    listener_set,
    local_ref,
    match,
    namespace_object,
    reference_grant,
    rule,
    secret,
    service,
    service_port,
    tls_secret,
    xbackend,
    xbackend_ref,
    xbackend_traffic_policy,
)
from tests.support.certificates import certificate_authority
from tests.support.credentials import credential_injector, injects
from tests.support.kube_replica import (
    Replica,
    eventually,
    replica_config,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(90)

CA_ONE, CA_TWO = certificate_authority("one"), certificate_authority("two")
CERT_ONE, CERT_TWO = CA_ONE.issue("tls.example.com"), CA_TWO.issue("tls.example.com")


# ------------------------------------------------------------------ objects


def web() -> list[dict[str, Any]]:
    """A Service with one endpoint."""
    return [service("web", 80, 8080), endpoint_slice("web", 8080, "10.0.0.1")]


WEB_TLS = partial(backend_tls_policy, "web-tls", "web")
L4_GATEWAY = gateway(
    "l4",
    listeners=[
        listener("tcp", 9000, "TCP"),
        listener("tls", 9443, "TLS", tls={"mode": "Passthrough"}),
        listener("udp", 9053, "UDP"),
    ],
    allowed_listeners="Same",
)
# A route in namespace shop, attached to Gateway default/open, to Service default/web.
SHOP_ROUTE = http_route(
    "shop",
    rules=[rule(backend_ref("web", 80, namespace="default"), matches=[match("/shop")])],
    parents=["open"],
    namespace="shop",
)
routes_from = partial(reference_grant, "routes-from-shop", "default", from_kind="HTTPRoute")


def say_grpc(method: str) -> dict[str, Any]:
    """The GRPCRoute `rpc` sending pkg.Echo/<method> to the Service web."""
    return grpc_route(
        "rpc", rules=[rule(backend_ref("web", 80), matches=[grpc_match("pkg.Echo", method)])]
    )


# ------------------------------------------------------------ what the DAG says


def paths(dag: Dag, group: str = "default/gw") -> set[str]:
    found = dag.groups.get(group)
    if found is None:
        return set()
    return {
        route.match.path
        for table in found.route_tables
        for host in table.virtual_hosts
        for route in host.routes
    }


def l4_sources(dag: Dag) -> dict[str, tuple[str, ...]]:
    """Envoy served name -> the clusters its connections go to, in Gateway l4's group."""
    found = dag.groups.get("default/l4")
    result: dict[str, tuple[str, ...]] = {}
    for served in found.listeners if found else ():
        if isinstance(served, TcpListener):
            result[served.name] = tuple(
                c for chain in served.filter_chains for c in chain.forward.clusters
            )
        elif isinstance(served, UdpListener):
            result[served.name] = served.forward.clusters
    return result


def ports(dag: Dag, group: str) -> list[int]:
    found = dag.groups.get(group)
    return [listener.port for listener in found.listeners] if found else []


def certificate(dag: Dag) -> bytes | None:
    found = dag.groups.get("default/tls")
    for served in found.listeners if found else ():
        if isinstance(served, HttpsListener):
            return served.filter_chains[0].certificates[0].certificate_chain
    return None


def service_clusters(dag: Dag, name: str) -> list[Any]:
    key = ObjectKey("Service", "default", name)
    return [c for c in dag.clusters.values() if getattr(c, "service", None) == key]


def upstream_tls(dag: Dag) -> Any:
    cluster = dag.clusters.get("default/web/80")
    return getattr(cluster, "tls", None)


def xbackend_hosts(dag: Dag) -> list[str]:
    key = ObjectKey("XBackend", "default", "partner")
    return [c.hostname for c in dag.clusters.values() if getattr(c, "service", None) == key]


def max_connections(dag: Dag) -> int | None:
    """What web's cluster carries of a BackendPolicy's circuitBreaker.maxConnections."""
    policy = getattr(dag.clusters.get("default/web/80"), "policy", None)
    breaker = policy.circuit_breaker if policy is not None else None
    return breaker.max_connections if breaker is not None else None


def web_limit(limit: int) -> dict[str, Any]:
    return backend_policy("web", "web", spec={"circuitBreaker": {"maxConnections": limit}})


def retry_percent(dag: Dag) -> int | None:
    """What web's cluster carries of an XBackendTrafficPolicy's retry budget percent."""
    traffic = getattr(dag.clusters.get("default/web/80"), "traffic", None)
    budget = traffic.retry_budget if traffic is not None else None
    return budget.percent if budget is not None else None


def web_budget(percent: int) -> dict[str, Any]:
    spec = {"retryConstraint": {"budget": {"percent": percent}}}
    return xbackend_traffic_policy("web", "web", spec=spec)


def injected_headers(dag: Dag) -> list[str]:
    """The headers the routes of Gateway gw inject."""
    found = dag.groups.get("default/gw")
    return sorted(
        credential.header
        for table in (found.route_tables if found else ())
        for host in table.virtual_hosts
        for route in host.routes
        for credential in route.credentials
    )


def endpoints(dag: Dag) -> list[str]:
    assignment = dag.load_assignments.get("default/web/80")
    if assignment is None:
        return []
    return sorted(e.address for locality in assignment.localities for e in locality.endpoints)


# ----------------------------------------------------------------- the table


@dataclass(frozen=True)
class Step:
    what: str
    apply: dict[str, Any] | None  # None: delete the object of this row
    holds: Callable[[Dag], bool]


@dataclass(frozen=True)
class Row:
    kind: str
    name: str  # of the object the steps change
    namespace: str
    world: Callable[[], list[dict[str, Any]]]
    steps: tuple[Step, ...]


def deleted(holds: Callable[[Dag], bool], what: str = "deleted") -> Step:
    return Step(what, None, holds)


ROWS = (
    Row(
        "Namespace",
        "shop",
        "",
        lambda: [
            gateway_class(),
            gateway(
                "open",
                listeners=[
                    listener(
                        port=8081,
                        allowed_routes=allowed_routes(
                            "Selector", selector={"matchLabels": {"team": "blue"}}
                        ),
                    )
                ],
            ),
            *web(),
            SHOP_ROUTE,
            routes_from(from_namespace="shop"),
        ],
        (
            Step(
                "labels match",
                namespace_object("shop", {"team": "blue"}),
                lambda d: "/shop" in paths(d, "default/open"),
            ),
            Step(
                "labels changed",
                namespace_object("shop", {"team": "red"}),
                lambda d: "/shop" not in paths(d, "default/open") and "default/open" in d.groups,
            ),
            Step(
                "labels back",
                namespace_object("shop", {"team": "blue"}),
                lambda d: "/shop" in paths(d, "default/open"),
            ),
            deleted(
                lambda d: "/shop" not in paths(d, "default/open") and "default/open" in d.groups
            ),
        ),
    ),
    Row(
        "Service",
        "api",
        "default",
        lambda: [
            gateway_class(),
            gateway(),
            endpoint_slice("api", 9090, "10.0.0.9"),
            http_route("api", [("/api", "api", 81)]),
        ],
        (
            Step(
                "pod-backed",
                service("api", 81, 9090),
                lambda d: [type(c) for c in service_clusters(d, "api")] == [EdsCluster],
            ),
            Step(
                "turned ExternalName",
                external_service("api", "api.example.com", 81),
                lambda d: (
                    [(type(c), getattr(c, "hostname", "")) for c in service_clusters(d, "api")]
                    == [(DnsCluster, "api.example.com")]
                ),
            ),
            deleted(lambda d: service_clusters(d, "api") == [] and "/api" in paths(d)),
        ),
    ),
    Row(
        "EndpointSlice",
        "web-1",
        "default",
        lambda: [
            gateway_class(),
            gateway(),
            service("web", 80, 8080),
            http_route("web", [("/", "web", 80)]),
        ],
        (
            Step(
                "one endpoint",
                endpoint_slice("web", 8080, "10.0.0.1"),
                lambda d: endpoints(d) == ["10.0.0.1"],
            ),
            Step(
                "two",
                endpoint_slice("web", 8080, "10.0.0.1", "10.0.0.2"),
                lambda d: endpoints(d) == ["10.0.0.1", "10.0.0.2"],
            ),
            deleted(lambda d: endpoints(d) == [] and "default/web/80" in d.clusters),
        ),
    ),
    Row(
        "Secret",
        "cert",
        "default",
        lambda: [
            gateway_class(),
            gateway(
                "tls",
                listeners=[
                    listener("https", 8443, "HTTPS", tls={"certificateRefs": [{"name": "cert"}]})
                ],
            ),
            *web(),
            http_route("web", [("/", "web", 80)], parents=("tls",)),
        ],
        (
            Step(
                "certificate one",
                tls_secret("cert", CERT_ONE.certificate, CERT_ONE.private_key),
                lambda d: certificate(d) == CERT_ONE.certificate,
            ),
            Step(
                "certificate two",
                tls_secret("cert", CERT_TWO.certificate, CERT_TWO.private_key),
                lambda d: certificate(d) == CERT_TWO.certificate,
            ),
            deleted(lambda d: certificate(d) is None),
        ),
    ),
    Row(
        "ConfigMap",
        "ca",
        "default",
        lambda: [
            gateway_class(),
            gateway(),
            *web(),
            http_route("web", [("/", "web", 80)]),
            WEB_TLS("web.example.com", ca_refs=[local_ref("ConfigMap", "ca")]),
        ],
        (
            Step(
                "CA one",
                config_map("ca", {"ca.crt": CA_ONE.pem.decode()}),
                lambda d: getattr(upstream_tls(d), "trusted_ca", None) == CA_ONE.pem,
            ),
            Step(
                "CA two",
                config_map("ca", {"ca.crt": CA_TWO.pem.decode()}),
                lambda d: getattr(upstream_tls(d), "trusted_ca", None) == CA_TWO.pem,
            ),
            deleted(lambda d: upstream_tls(d) is None),
        ),
    ),
    Row(
        "GatewayClass",
        "dragoman",
        "",
        lambda: [gateway(), *web(), http_route("web", [("/", "web", 80)])],
        (
            Step("ours", gateway_class(), lambda d: "/" in paths(d)),
            Step(
                "given parameters dragoman refuses",
                gateway_class(
                    parameters_ref={
                        "group": "",
                        "kind": "ConfigMap",
                        "name": "x",
                        "namespace": "default",
                    }
                ),
                lambda d: ports(d, "default/gw") == [],
            ),
            Step("parameters removed", gateway_class(), lambda d: "/" in paths(d)),
            deleted(lambda d: ports(d, "default/gw") == []),
        ),
    ),
    Row(
        "Gateway",
        "edge",
        "default",
        lambda: [gateway_class(), *web(), http_route("web", [("/", "web", 80)], parents=("edge",))],
        (
            Step(
                "port 9090",
                gateway("edge", 9090),
                lambda d: ports(d, "default/edge") == [9090] and "/" in paths(d, "default/edge"),
            ),
            Step("port 9091", gateway("edge", 9091), lambda d: ports(d, "default/edge") == [9091]),
            deleted(lambda d: "default/edge" not in d.groups),
        ),
    ),
    Row(
        "HTTPRoute",
        "r",
        "default",
        lambda: [gateway_class(), gateway(), *web()],
        (
            Step("/r", http_route("r", [("/r", "web", 80)]), lambda d: "/r" in paths(d)),
            Step(
                "/s",
                http_route("r", [("/s", "web", 80)]),
                lambda d: "/s" in paths(d) and "/r" not in paths(d),
            ),
            deleted(lambda d: not paths(d) & {"/r", "/s"} and "default/gw" in d.groups),
        ),
    ),
    Row(
        "GRPCRoute",
        "rpc",
        "default",
        lambda: [gateway_class(), gateway(), *web()],
        (
            Step("Say", say_grpc("Say"), lambda d: "/pkg.Echo/Say" in paths(d)),
            Step(
                "Shout",
                say_grpc("Shout"),
                lambda d: "/pkg.Echo/Shout" in paths(d) and "/pkg.Echo/Say" not in paths(d),
            ),
            deleted(
                lambda d: (
                    not any(p.startswith("/pkg.Echo/") for p in paths(d))
                    and "default/gw" in d.groups
                )
            ),
        ),
    ),
    Row(
        "ReferenceGrant",
        "routes-from-shop",
        "default",
        lambda: [
            gateway_class(),
            gateway("open", listeners=[listener(port=8082, allowed_routes=allowed_routes("All"))]),
            namespace_object("shop"),
            *web(),
            SHOP_ROUTE,
        ],
        (
            Step(
                "granted",
                routes_from(from_namespace="shop"),
                lambda d: "default/web/80" in d.clusters,
            ),
            Step(
                "granted to another namespace",
                routes_from(from_namespace="other"),
                lambda d: (
                    "default/web/80" not in d.clusters and "/shop" in paths(d, "default/open")
                ),
            ),
            Step(
                "granted again",
                routes_from(from_namespace="shop"),
                lambda d: "default/web/80" in d.clusters,
            ),
            deleted(
                lambda d: "default/web/80" not in d.clusters and "/shop" in paths(d, "default/open")
            ),
        ),
    ),
    Row(
        "BackendTLSPolicy",
        "web-tls",
        "default",
        lambda: [gateway_class(), gateway(), *web(), http_route("web", [("/", "web", 80)])],
        (
            Step(
                "TLS to web.example.com",
                WEB_TLS("web.example.com", well_known="System"),
                lambda d: getattr(upstream_tls(d), "sni", None) == "web.example.com",
            ),
            Step(
                "TLS to other.example.com",
                WEB_TLS("other.example.com", well_known="System"),
                lambda d: getattr(upstream_tls(d), "sni", None) == "other.example.com",
            ),
            deleted(lambda d: upstream_tls(d) is None and "default/web/80" in d.clusters),
        ),
    ),
    Row(
        "BackendPolicy",
        "web",
        "default",
        lambda: [gateway_class(), gateway(), *web(), http_route("web", [("/", "web", 80)])],
        (
            Step("at most 5 connections", web_limit(5), lambda d: max_connections(d) == 5),
            Step("at most 6 connections", web_limit(6), lambda d: max_connections(d) == 6),
            deleted(lambda d: max_connections(d) is None and "default/web/80" in d.clusters),
        ),
    ),
    Row(
        "XBackendTrafficPolicy",
        "web",
        "default",
        lambda: [gateway_class(), gateway(), *web(), http_route("web", [("/", "web", 80)])],
        (
            Step("a 30% retry budget", web_budget(30), lambda d: retry_percent(d) == 30),
            Step("a 40% retry budget", web_budget(40), lambda d: retry_percent(d) == 40),
            deleted(lambda d: retry_percent(d) is None and "default/web/80" in d.clusters),
        ),
    ),
    Row(
        "TCPRoute",
        "db",
        "default",
        lambda: [gateway_class(), L4_GATEWAY, *web(), service("web2", 81, 8081)],
        (
            Step(
                "to web",
                http_route("db", "web", 80, kind="TCPRoute", parents=["l4"]),
                lambda d: l4_sources(d).get("tcp-9000") == ("default/web/80/tcp",),
            ),
            Step(
                "to web2",
                http_route("db", "web2", 81, kind="TCPRoute", parents=["l4"]),
                lambda d: l4_sources(d).get("tcp-9000") == ("default/web2/81/tcp",),
            ),
            deleted(lambda d: "tcp-9000" not in l4_sources(d) and "default/l4" in d.groups),
        ),
    ),
    Row(
        "TLSRoute",
        "partner",
        "default",
        lambda: [gateway_class(), L4_GATEWAY, *web()],
        (
            Step(
                "a.example.com",
                http_route(
                    "partner",
                    "web",
                    80,
                    kind="TLSRoute",
                    parents=["l4"],
                    hostnames=["a.example.com"],
                ),
                lambda d: l4_sources(d).get("tls-9443") == ("default/web/80/tcp",),
            ),
            deleted(lambda d: "tls-9443" not in l4_sources(d) and "default/l4" in d.groups),
        ),
    ),
    Row(
        "UDPRoute",
        "dns",
        "default",
        lambda: [
            gateway_class(),
            L4_GATEWAY,
            service("dns", ports=[service_port(53, 5353, name="http", protocol="UDP")]),
        ],
        (
            Step(
                "to dns",
                http_route("dns", "dns", 53, kind="UDPRoute", parents=["l4"]),
                lambda d: l4_sources(d).get("udp-9053") == ("default/dns/53/udp",),
            ),
            deleted(lambda d: "udp-9053" not in l4_sources(d) and "default/l4" in d.groups),
        ),
    ),
    Row(
        "XBackend",
        "partner",
        "default",
        lambda: [
            gateway_class(),
            gateway(),
            http_route("r", rules=[rule(xbackend_ref("partner"))]),
        ],
        (
            Step(
                "api.one.example",
                xbackend("partner", "api.one.example"),
                lambda d: xbackend_hosts(d) == ["api.one.example"],
            ),
            Step(
                "api.two.example",
                xbackend("partner", "api.two.example"),
                lambda d: xbackend_hosts(d) == ["api.two.example"],
            ),
            deleted(lambda d: xbackend_hosts(d) == [] and "default/gw" in d.groups),
        ),
    ),
    Row(
        "ListenerSet",
        "extra",
        "default",
        lambda: [gateway_class(), L4_GATEWAY],
        (
            Step(
                "port 9100",
                listener_set("extra", [listener("extra", 9100)], parent="l4"),
                lambda d: 9100 in ports(d, "default/l4"),
            ),
            Step(
                "port 9101",
                listener_set("extra", [listener("extra", 9101)], parent="l4"),
                lambda d: 9101 in ports(d, "default/l4") and 9100 not in ports(d, "default/l4"),
            ),
            deleted(lambda d: 9101 not in ports(d, "default/l4") and "default/l4" in d.groups),
        ),
    ),
    Row(
        "CredentialInjector",
        "api-key",
        "default",
        lambda: [
            gateway_class(),
            gateway(),
            *web(),
            secret("api-key", {"token": b"Bearer one"}),
            http_route("web", rules=[rule(backend_ref("web", 80), filters=[injects("api-key")])]),
        ],
        (
            Step(
                "Authorization",
                credential_injector("api-key", "api-key", "token"),
                lambda d: injected_headers(d) == ["Authorization"],
            ),
            Step(
                "X-Api-Key",
                credential_injector("api-key", "api-key", "token", header="X-Api-Key"),
                lambda d: injected_headers(d) == ["X-Api-Key"],
            ),
            deleted(lambda d: injected_headers(d) == [] and "default/gw" in d.groups),
        ),
    ),
)


def test_the_table_covers_every_watched_kind() -> None:
    assert sorted(row.kind for row in ROWS) == sorted(kind.kind for kind in served_kinds())
    assert {kind.kind for kind in served_kinds()} == {kind.kind for kind in WATCHED_KINDS}


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.mark.parametrize("row", ROWS, ids=[row.kind for row in ROWS])
def test_add_update_and_delete_reach_the_build(api: KubeApiServer, row: Row) -> None:
    for obj in row.world():
        api.apply(obj)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving, what="serving")
            for step in row.steps:
                assert not step.holds(replica.dag), f"{row.kind}: {step.what} holds already"
                if step.apply is None:
                    assert api.delete(row.kind, row.name, row.namespace or "default")
                else:
                    api.apply(step.apply)
                await eventually(
                    lambda step=step: step.holds(replica.dag), what=f"{row.kind}: {step.what}"
                )
        finally:
            await replica.stop()

    asyncio.run(scenario())
