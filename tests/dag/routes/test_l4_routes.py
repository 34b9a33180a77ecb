"""TCPRoute, TLSRoute and UDPRoute: the status the Gateway API v1.6 conformance scenarios
(tcproute-*, tlsroute-*, udproute-*) expect, written afresh in their style, and what each
listener is served as."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import ALL_GATEWAYS, Dag, TcpListener, UdpListener
from dragoman.dag.options import BuildOptions
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    external_service,
    gateway,
    gateway_class,
    http_route,
    listener,
    parent_ref,
    reference_grant,
    rule,
    service,
    service_port,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text, condition, listener_condition, status
from tests.support.status_builds import listener as listener_status

CERT = certificate_authority().issue("terminate.example.com", "tls.example.com")


# This file's world: Gateways in namespace infra and routes there, at generation 1, created
# at one time unless told otherwise, attached to the Gateway `gw`.
infra_gateway = partial(gateway, namespace="infra", generation=1)
route = partial(
    http_route,
    namespace="infra",
    parents=[parent_ref("gw")],
    created="2024-01-01T00:00:00Z",
    generation=1,
)
tcp_backend = partial(service, namespace="infra", ports=[service_port(3000, protocol="TCP")])
udp_backend = partial(service, namespace="infra", ports=[service_port(3000, protocol="UDP")])
BACKENDS = [tcp_backend("echo"), tcp_backend("echo-2"), udp_backend("udp-echo")]
TCP = listener("tcp", 9310, "TCP")
UDP = listener("udp", 5300, "UDP")
PASSTHROUGH = listener("tls", 443, "TLS", tls={"mode": "Passthrough"})


def build(*documents: Object) -> Dag:
    return build_text(
        gateway_class(),
        *BACKENDS,
        tls_secret("cert", CERT.certificate, CERT.private_key, namespace="infra"),
        *documents,
    )


def parent_conditions(
    dag: Dag, kind: str, name: str, parent: int = 0, ns: str = "infra"
) -> dict[str, tuple[str, str]]:
    entries = status(dag, kind, name, ns)["parents"]
    return {c["type"]: (c["status"], c["reason"]) for c in entries[parent]["conditions"]}


def listeners_of(dag: Dag, group: str = ALL_GATEWAYS) -> dict[str, Any]:
    return {item.name: item for item in dag.groups[group].listeners}


@pytest.mark.parametrize(
    ("kind", "listening", "backend", "cluster"),
    [
        ("TCPRoute", TCP, "echo", "infra/echo/3000/tcp"),
        ("UDPRoute", UDP, "udp-echo", "infra/udp-echo/3000/udp"),
    ],
)
def test_simple_route_is_accepted_and_served(
    kind: str, listening: Object, backend: str, cluster: str
) -> None:
    dag = build(infra_gateway("gw", listeners=[listening]), route("r", backend, 3000, kind=kind))

    assert parent_conditions(dag, kind, "r") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    [served] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(served, TcpListener if kind == "TCPRoute" else UdpListener)
    assert dag.groups[ALL_GATEWAYS].clusters == (cluster,)
    assert listener_status(dag, "gw", listening["name"], "infra")["attachedRoutes"] == 1


def test_each_protocol_advertises_the_route_kinds_it_serves() -> None:
    dag = build(
        infra_gateway(
            "gw",
            listeners=[
                TCP,
                UDP,
                PASSTHROUGH,
                listener(
                    "tls-end",
                    8443,
                    "TLS",
                    hostname="terminate.example.com",
                    tls={"mode": "Terminate", "certificateRefs": [{"name": "cert"}]},
                ),
                listener(),
            ],
        )
    )
    kinds = {
        entry["name"]: [k["kind"] for k in entry["supportedKinds"]]
        for entry in status(dag, "Gateway", "gw", "infra")["listeners"]
    }
    assert kinds == {
        "tcp": ["TCPRoute"],
        "udp": ["UDPRoute"],
        "tls": ["TLSRoute"],
        "tls-end": ["TLSRoute"],
        "http": ["HTTPRoute", "GRPCRoute"],
    }
    for name in kinds:
        assert listener_condition(dag, "gw", name, "Accepted", "infra") == ("True", "Accepted")
        assert listener_condition(dag, "gw", name, "Programmed", "infra") == (
            "True",
            "Programmed",
        )


def test_passthrough_listener_naming_tcproute_too_reports_invalid_route_kinds() -> None:
    # tlsroute-listener-passthrough-supported-kinds
    dag = build(
        infra_gateway(
            "gw",
            listeners=[
                listener(
                    "tls-passthrough",
                    443,
                    "TLS",
                    tls={"mode": "Passthrough"},
                    allowed_routes=allowed_routes(kinds=["TCPRoute", "TLSRoute"]),
                )
            ],
        )
    )
    entry = listener_status(dag, "gw", "tls-passthrough", "infra")
    assert [k["kind"] for k in entry["supportedKinds"]] == ["TLSRoute"]
    assert condition(entry["conditions"], "ResolvedRefs") == ("False", "InvalidRouteKinds")


def test_terminate_listener_without_a_certificate_is_not_programmed() -> None:
    dag = build(
        infra_gateway(
            "gw",
            listeners=[
                listener(
                    "tls-end",
                    8443,
                    "TLS",
                    hostname="terminate.example.com",
                    tls={"mode": "Terminate", "certificateRefs": [{"name": "missing"}]},
                )
            ],
        )
    )
    assert listener_condition(dag, "gw", "tls-end", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCertificateRef",
    )
    assert listener_condition(dag, "gw", "tls-end", "Programmed", "infra") == ("False", "Invalid")


@pytest.mark.parametrize(
    ("listening", "kind", "hostnames"),
    [
        # tcproute-invalid-non-tcp-listener
        (
            listener(
                "only-allow-http-routes", 5300, allowed_routes=allowed_routes(kinds=["HTTPRoute"])
            ),
            "TCPRoute",
            [],
        ),
        # udproute-not-allowed-by-listeners
        (PASSTHROUGH, "UDPRoute", []),
        # tlsroute-invalid-no-matching-listener: HTTP and HTTPS listeners carry no TLSRoute
        (listener(), "TLSRoute", ["tls.example.com"]),
        (
            listener("https", 443, "HTTPS", tls={"certificateRefs": [{"name": "cert"}]}),
            "TLSRoute",
            ["tls.example.com"],
        ),
        (listener("tcp", 9000, "TCP"), "TLSRoute", ["tls.example.com"]),
        (UDP, "TCPRoute", []),
    ],
)
def test_route_on_a_listener_of_another_protocol_is_not_allowed(
    listening: Object, kind: str, hostnames: list[str]
) -> None:
    dag = build(
        infra_gateway("gw", listeners=[listening]),
        route("r", "echo", 3000, kind=kind, hostnames=hostnames),
    )

    assert parent_conditions(dag, kind, "r")["Accepted"] == ("False", "NotAllowedByListeners")
    assert dag.groups[ALL_GATEWAYS].clusters == ()


def test_no_matching_section_name() -> None:
    dag = build(
        infra_gateway("gw", listeners=[PASSTHROUGH]),
        route(
            "r",
            "echo",
            3000,
            kind="TLSRoute",
            parents=[parent_ref("gw", section="nonexistent-listener")],
            hostnames=["tls.example.com"],
        ),
    )
    assert parent_conditions(dag, "TLSRoute", "r")["Accepted"] == ("False", "NoMatchingParent")


@pytest.mark.parametrize(
    ("listener_hostname", "route_hostnames", "served"),
    [
        # tlsroute-hostname-intersection
        ("abc.example.com", ["*.example.com"], ("abc.example.com",)),
        ("*.example.com", ["abc.example.com"], ("abc.example.com",)),
        ("*.example.com", ["*.com"], ("*.example.com",)),
        ("*.com", ["abc.example.com"], ("abc.example.com",)),
        ("*.com", ["*.example.com"], ("*.example.com",)),
        (None, ["abc.example.com"], ("abc.example.com",)),
        (None, ["*.com"], ("*.com",)),
        # tlsroute-invalid-no-matching-listener-hostname
        ("www.example.com", ["www.nomatch.com", "*.nomatch.com"], None),
        ("*.example.com", ["www.different.com", "*.different.com"], None),
    ],
)
def test_tls_hostname_intersection_decides_the_server_names(
    listener_hostname: str | None, route_hostnames: list[str], served: tuple[str, ...] | None
) -> None:
    tls = listener("tls", 443, "TLS", hostname=listener_hostname, tls={"mode": "Passthrough"})
    dag = build(
        infra_gateway("gw", listeners=[tls]),
        route("r", "echo", 3000, kind="TLSRoute", hostnames=route_hostnames),
    )
    accepted = parent_conditions(dag, "TLSRoute", "r")["Accepted"]
    if served is None:
        assert accepted == ("False", "NoMatchingListenerHostname")
        assert dag.groups[ALL_GATEWAYS].listeners == ()
        return
    assert accepted == ("True", "Accepted")
    [served_listener] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(served_listener, TcpListener) and served_listener.inspect_tls
    [chain] = served_listener.filter_chains
    assert chain.server_names == served
    assert chain.certificates == ()  # Passthrough: Envoy never terminates


def test_mixed_termination_on_one_port() -> None:
    # tlsroute-mixed-termination-same-namespace
    dag = build(
        infra_gateway(
            "gw",
            listeners=[
                listener(
                    "tls-terminate",
                    8883,
                    "TLS",
                    hostname="tls.example.com",
                    tls={"mode": "Terminate", "certificateRefs": [{"name": "cert"}]},
                ),
                listener(
                    "tls-passthrough",
                    8883,
                    "TLS",
                    hostname="abc.example.com",
                    tls={"mode": "Passthrough"},
                ),
            ],
        ),
        route("pass", "echo", 3000, kind="TLSRoute", hostnames=["abc.example.com"]),
        route("end", "echo-2", 3000, kind="TLSRoute", hostnames=["tls.example.com"]),
    )
    for name in ("pass", "end"):
        assert parent_conditions(dag, "TLSRoute", name)["Accepted"] == ("True", "Accepted")
    [tls] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tls, TcpListener)
    chains = {chain.server_names: chain for chain in tls.filter_chains}
    assert set(chains) == {("abc.example.com",), ("tls.example.com",)}
    assert chains[("abc.example.com",)].certificates == ()
    assert chains[("abc.example.com",)].forward.clusters == ("infra/echo/3000/tcp",)
    [certificate] = chains[("tls.example.com",)].certificates
    assert certificate.certificate_chain == CERT.certificate
    assert chains[("tls.example.com",)].forward.clusters == ("infra/echo-2/3000/tcp",)


@pytest.mark.parametrize("kind", ["TCPRoute", "UDPRoute"])
def test_of_several_routes_on_one_listener_the_oldest_is_served(kind: str) -> None:
    # tcproute-multiple-routes-attachment, udproute-multiple-routes-attachment
    listening, backend = (TCP, "echo") if kind == "TCPRoute" else (UDP, "udp-echo")
    dag = build(
        infra_gateway("gw", listeners=[listening]),
        route("newer", "echo-2", 3000, kind=kind, created="2024-02-01T00:00:00Z"),
        route("older", backend, 3000, kind=kind),
    )
    assert parent_conditions(dag, kind, "older")["Accepted"] == ("True", "Accepted")
    assert parent_conditions(dag, kind, "newer")["Accepted"] == ("False", "RouteConflict")
    [served] = dag.groups[ALL_GATEWAYS].listeners
    forward = served.filter_chains[0].forward if isinstance(served, TcpListener) else served.forward
    assert forward.source.name == "older"
    assert listener_status(dag, "gw", listening["name"], "infra")["attachedRoutes"] == 1


def test_tls_routes_share_a_listener_by_hostname_and_the_oldest_keeps_a_shared_one() -> None:
    dag = build(
        infra_gateway("gw", listeners=[PASSTHROUGH]),
        route(
            "a", "echo", 3000, kind="TLSRoute", hostnames=["a.example.com", "shared.example.com"]
        ),
        route(
            "b",
            "echo-2",
            3000,
            kind="TLSRoute",
            hostnames=["b.example.com", "shared.example.com"],
            created="2024-03-01T00:00:00Z",
        ),
        route(
            "c",
            "echo",
            3000,
            kind="TLSRoute",
            hostnames=["shared.example.com"],
            created="2024-04-01T00:00:00Z",
        ),
    )
    assert parent_conditions(dag, "TLSRoute", "a")["Accepted"] == ("True", "Accepted")
    assert parent_conditions(dag, "TLSRoute", "b")["Accepted"] == ("True", "Accepted")
    assert parent_conditions(dag, "TLSRoute", "c")["Accepted"] == ("False", "RouteConflict")
    [tls] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tls, TcpListener)
    names = {chain.forward.source.name: chain.server_names for chain in tls.filter_chains}
    assert names == {"a": ("a.example.com", "shared.example.com"), "b": ("b.example.com",)}
    assert any(p.reason == "RouteConflict" and p.object.name == "b" for p in dag.problems)


def test_attach_to_every_listener_and_by_port_or_section() -> None:
    # tcproute-parentref-attach-all, tcproute-parentref-port-and-section-name
    tcp_route = partial(route, to="echo", port=3000, kind="TCPRoute")
    dag = build(
        infra_gateway("all", listeners=[listener(f"l{i}", 9300 + i, "TCP") for i in range(3)]),
        infra_gateway("some", listeners=[listener(f"l{i}", 9400 + i, "TCP") for i in range(3)]),
        tcp_route("every", parents=[parent_ref("all")]),
        tcp_route("by-port", parents=[parent_ref("some", port=9400)]),
        tcp_route("by-section", parents=[parent_ref("some", section="l1")]),
        tcp_route("both", parents=[parent_ref("some", port=9402, section="l2")]),
        tcp_route("mismatch", parents=[parent_ref("some", port=9400, section="l2")]),
    )
    assert {
        e["name"]: e["attachedRoutes"] for e in status(dag, "Gateway", "all", "infra")["listeners"]
    } == {"l0": 1, "l1": 1, "l2": 1}
    assert sorted(listeners_of(dag, "infra/all")) == ["tcp-9300", "tcp-9301", "tcp-9302"]
    sources = {
        name: item.filter_chains[0].forward.source.name
        for name, item in listeners_of(dag, "infra/some").items()
    }
    assert sources == {"tcp-9400": "by-port", "tcp-9401": "by-section", "tcp-9402": "both"}
    assert parent_conditions(dag, "TCPRoute", "mismatch")["Accepted"] == (
        "False",
        "NoMatchingParent",
    )


@pytest.mark.parametrize("kind", ["TCPRoute", "TLSRoute", "UDPRoute"])
def test_invalid_backend_references(kind: str) -> None:
    # *-invalid-backendref-nonexistent, tlsroute-invalid-backendref-unknown-kind,
    # *-invalid-cross-namespace-backend-ref, *-reference-grant
    listening = {"TCPRoute": TCP, "TLSRoute": PASSTHROUGH, "UDPRoute": UDP}[kind]
    if kind != "TLSRoute":
        listening = {**listening, "allowedRoutes": allowed_routes("All")}
    hostnames = ["tls.example.com"] if kind == "TLSRoute" else []
    backend = "udp-echo" if kind == "UDPRoute" else "echo"
    backend_service = udp_backend if kind == "UDPRoute" else tcp_backend
    to = partial(route, kind=kind, hostnames=hostnames)
    dag = build(
        infra_gateway("gw", listeners=[listening]),
        backend_service(backend, namespace="other"),
        backend_service(backend, namespace="granted"),
        reference_grant("grant", "granted", from_kind=kind, from_namespace="infra"),
        to("missing", "nope", 3000),
        to("kind", rules=[rule(backend_ref("x", group="example.com", kind="Thing"))]),
        to("cross", rules=[rule(backend_ref(backend, 3000, namespace="other"))]),
        to("granted", rules=[rule(backend_ref(backend, 3000, namespace="granted"))]),
    )
    expected = {
        "missing": ("False", "BackendNotFound"),
        "kind": ("False", "InvalidKind"),
        "cross": ("False", "RefNotPermitted"),
        "granted": ("True", "ResolvedRefs"),
    }
    for name, resolved in expected.items():
        assert parent_conditions(dag, kind, name)["ResolvedRefs"] == resolved, name
    # An invalid backend refuses its share of connections; its route stays attached (the
    # oldest of them holds a TCP or UDP listener; TLS routes need their own hostnames).
    accepted = [
        name for name in expected if parent_conditions(dag, kind, name)["Accepted"][0] == "True"
    ]
    assert accepted


def test_udp_route_needs_a_udp_service_port_and_tcp_route_a_tcp_one() -> None:
    dag = build(
        infra_gateway("gw", listeners=[TCP, UDP]),
        route("u", "echo", 3000, kind="UDPRoute"),
        route("t", "udp-echo", 3000, kind="TCPRoute"),
    )
    assert parent_conditions(dag, "UDPRoute", "u")["ResolvedRefs"] == (
        "False",
        "UnsupportedProtocol",
    )
    assert parent_conditions(dag, "TCPRoute", "t")["ResolvedRefs"] == (
        "False",
        "UnsupportedProtocol",
    )


def test_tcp_and_udp_listeners_share_a_port_number() -> None:
    dag = build(
        infra_gateway(
            "gw", listeners=[listener("dns-tcp", 53, "TCP"), listener("dns-udp", 53, "UDP")]
        ),
        route("t", "echo", 3000, kind="TCPRoute", parents=[parent_ref("gw", section="dns-tcp")]),
        route(
            "u", "udp-echo", 3000, kind="UDPRoute", parents=[parent_ref("gw", section="dns-udp")]
        ),
    )
    for name in ("dns-tcp", "dns-udp"):
        assert listener_condition(dag, "gw", name, "Conflicted", "infra") == (
            "False",
            "NoConflicts",
        )
    assert sorted(listeners_of(dag)) == ["tcp-53", "udp-53"]


def test_observed_generation_is_the_route_s() -> None:
    dag = build(
        infra_gateway("gw", listeners=[TCP]),
        route("r", "echo", 3000, kind="TCPRoute", generation=7),
    )
    [parent] = status(dag, "TCPRoute", "r", "infra")["parents"]
    assert {c["observedGeneration"] for c in parent["conditions"]} == {7}
    assert parent["parentRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "name": "gw",
    }
    assert parent["controllerName"] == "dragoman.dev/gateway-controller"


def test_weighted_backends_keep_their_weights_and_an_invalid_one_its_share() -> None:
    # tcproute-weighted-routing, udproute-weighted-routing
    dag = build(
        infra_gateway("gw", listeners=[TCP]),
        route(
            "r",
            kind="TCPRoute",
            rules=[
                rule(
                    backend_ref("echo", 3000, weight=70),
                    backend_ref("echo-2", 3000, weight=30),
                    backend_ref("nope", 3000, weight=10),
                    backend_ref("echo", 3000, weight=0),
                )
            ],
        ),
    )
    [tcp] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tcp, TcpListener)
    backends = [(b.cluster, b.weight) for b in tcp.filter_chains[0].forward.backends]
    assert backends == [("infra/echo/3000/tcp", 70), ("infra/echo-2/3000/tcp", 30), (None, 10)]


def test_udp_weighted_backends_send_everything_to_the_heaviest_and_say_so() -> None:
    # udproute-weighted-routing: Envoy's UDP proxy has one cluster per listener.
    dag = build(
        infra_gateway("gw", listeners=[UDP]),
        udp_backend("udp-2"),
        route(
            "r",
            kind="UDPRoute",
            rules=[
                rule(backend_ref("udp-echo", 3000, weight=1), backend_ref("udp-2", 3000, weight=3))
            ],
        ),
    )
    [udp] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(udp, UdpListener)
    assert udp.forward.clusters == ("infra/udp-2/3000/udp",)
    conditions = parent_conditions(dag, "UDPRoute", "r")
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["PartiallyInvalid"] == ("True", "UnsupportedValue")


def test_the_dns_check_covers_external_names_of_tcp_tls_and_udp_routes() -> None:
    texts = (
        gateway_class(),
        external_service("db", "db.partner.example", 5432, namespace="infra"),
        external_service("logs", "logs.partner.example", 514, namespace="infra", protocol="UDP"),
        infra_gateway("gw", listeners=[TCP, UDP]),
        route("db", "db", 5432, kind="TCPRoute"),
        route("logs", "logs", 514, kind="UDPRoute"),
    )
    pending = build_text(*texts, options=BuildOptions(dns_check=True), dns={})
    assert pending.dns_hostnames == ("db.partner.example", "logs.partner.example")
    assert parent_conditions(pending, "TCPRoute", "db")["ResolvedRefs"] == (
        "False",
        "DNSCheckPending",
    )
    assert pending.groups[ALL_GATEWAYS].clusters == ()  # nothing served before the check
    metadata = {
        "db.partner.example": DnsObservation(("169.254.169.254",)),
        "logs.partner.example": DnsObservation(("203.0.113.7",)),
    }
    checked = build_text(*texts, options=BuildOptions(dns_check=True), dns=metadata)
    assert parent_conditions(checked, "TCPRoute", "db")["ResolvedRefs"] == (
        "False",
        "NotAllowedByPolicy",
    )
    assert parent_conditions(checked, "UDPRoute", "logs")["ResolvedRefs"] == (
        "True",
        "ResolvedRefs",
    )
    assert checked.groups[ALL_GATEWAYS].clusters == ("infra/logs/514/udp",)


def test_tls_listener_isolation_on_one_port() -> None:
    # A name a more specific listener matches is that listener's: the wildcard listener's
    # route does not take it, and without a route of its own it is refused, not passed on.
    dag = build(
        infra_gateway(
            "gw",
            listeners=[
                listener("wild", 443, "TLS", hostname="*.example.com", tls={"mode": "Passthrough"}),
                listener(
                    "exact", 443, "TLS", hostname="abc.example.com", tls={"mode": "Passthrough"}
                ),
            ],
        ),
        route(
            "wide",
            "echo",
            3000,
            kind="TLSRoute",
            parents=[parent_ref("gw", section="wild")],
            hostnames=["*.example.com", "abc.example.com"],
        ),
    )
    [tls] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tls, TcpListener)
    chains = {chain.server_names: chain.forward for chain in tls.filter_chains}
    assert set(chains) == {("*.example.com",), ("abc.example.com",)}
    assert chains[("*.example.com",)].source.name == "wide"
    refused = chains[("abc.example.com",)]
    assert [b.cluster for b in refused.backends] == [None]  # Envoy closes the connection
