"""TCPRoute, TLSRoute and UDPRoute: the status the Gateway API v1.6 conformance scenarios
(tcproute-*, tlsroute-*, udproute-*) expect, written afresh in their style, and what each
listener is served as."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.model import ALL_GATEWAYS, Dag, TcpListener, UdpListener
from dragoman.dag.options import BuildOptions
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    DRAGOMAN_CLASS,
    GW,
    build_text,
    condition,
    listener,
    listener_condition,
    status,
)
from tests.support.upstream_builds import build_yaml

CERT = certificate_authority().issue("terminate.example.com", "tls.example.com")


def gateway(name: str, *listeners: str, ns: str = "infra", generation: int = 1) -> str:
    body = "\n".join(f"  - {item}" for item in listeners)
    return (
        f"apiVersion: {GW}\nkind: Gateway\n"
        f"metadata: {{name: {name}, namespace: {ns}, generation: {generation}}}\n"
        f"spec:\n  gatewayClassName: dragoman\n  listeners:\n{body}\n---\n"
    )


def route(
    kind: str,
    name: str,
    parents: str,
    backends: str = "[{name: echo, port: 3000}]",
    hostnames: str = "",
    ns: str = "infra",
    created: str = "2024-01-01T00:00:00Z",
    generation: int = 1,
) -> str:
    hosts = f"  hostnames: {hostnames}\n" if hostnames else ""
    return (
        f"apiVersion: {GW}\nkind: {kind}\n"
        f"metadata: {{name: {name}, namespace: {ns}, generation: {generation}, "
        f"creationTimestamp: '{created}'}}\n"
        f"spec:\n  parentRefs: {parents}\n{hosts}  rules: [{{backendRefs: {backends}}}]\n---\n"
    )


def service(name: str, ns: str = "infra", port: int = 3000, protocol: str = "TCP") -> str:
    return (
        f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\n"
        f"spec: {{selector: {{app: {name}}}, ports: [{{port: {port}, protocol: {protocol}}}]}}\n"
        "---\n"
    )


BACKENDS = service("echo") + service("echo-2") + service("udp-echo", protocol="UDP")
TCP = "{name: tcp, port: 9310, protocol: TCP}"
UDP = "{name: udp, port: 5300, protocol: UDP}"
PASSTHROUGH = "{name: tls, port: 443, protocol: TLS, tls: {mode: Passthrough}}"


def build(*texts: str) -> Dag:
    return build_text(DRAGOMAN_CLASS, BACKENDS, CERT.secret_yaml("cert", "infra"), *texts)


def parent_conditions(
    dag: Dag, kind: str, name: str, parent: int = 0, ns: str = "infra"
) -> dict[str, tuple[str, str]]:
    entries = status(dag, kind, name, ns)["parents"]
    return {c["type"]: (c["status"], c["reason"]) for c in entries[parent]["conditions"]}


def listeners_of(dag: Dag, group: str = ALL_GATEWAYS) -> dict[str, Any]:
    return {item.name: item for item in dag.groups[group].listeners}


@pytest.mark.parametrize(
    ("kind", "listener_text", "backend", "cluster"),
    [
        ("TCPRoute", TCP, "echo", "infra/echo/3000/tcp"),
        ("UDPRoute", UDP, "udp-echo", "infra/udp-echo/3000/udp"),
    ],
)
def test_simple_route_is_accepted_and_served(
    kind: str, listener_text: str, backend: str, cluster: str
) -> None:
    backends = f"[{{name: {backend}, port: 3000}}]"
    dag = build(gateway("gw", listener_text), route(kind, "r", "[{name: gw}]", backends))

    assert parent_conditions(dag, kind, "r") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    [served] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(served, TcpListener if kind == "TCPRoute" else UdpListener)
    assert dag.groups[ALL_GATEWAYS].clusters == (cluster,)
    assert listener(dag, "gw", listener_text[7:10], "infra")["attachedRoutes"] == 1


def test_each_protocol_advertises_the_route_kinds_it_serves() -> None:
    dag = build(
        gateway(
            "gw",
            TCP,
            UDP,
            PASSTHROUGH,
            "{name: tls-end, port: 8443, protocol: TLS, hostname: terminate.example.com,"
            " tls: {mode: Terminate, certificateRefs: [{name: cert}]}}",
            "{name: http, port: 80, protocol: HTTP}",
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
        gateway(
            "gw",
            "{name: tls-passthrough, port: 443, protocol: TLS, tls: {mode: Passthrough},"
            " allowedRoutes: {kinds: [{kind: TCPRoute}, {kind: TLSRoute}]}}",
        )
    )
    entry = listener(dag, "gw", "tls-passthrough", "infra")
    assert [k["kind"] for k in entry["supportedKinds"]] == ["TLSRoute"]
    assert condition(entry["conditions"], "ResolvedRefs") == ("False", "InvalidRouteKinds")


def test_terminate_listener_without_a_certificate_is_not_programmed() -> None:
    dag = build(
        gateway(
            "gw",
            "{name: tls-end, port: 8443, protocol: TLS, hostname: terminate.example.com,"
            " tls: {mode: Terminate, certificateRefs: [{name: missing}]}}",
        )
    )
    assert listener_condition(dag, "gw", "tls-end", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCertificateRef",
    )
    assert listener_condition(dag, "gw", "tls-end", "Programmed", "infra") == ("False", "Invalid")


@pytest.mark.parametrize(
    ("listener_text", "kind", "hostnames"),
    [
        # tcproute-invalid-non-tcp-listener
        (
            "{name: only-allow-http-routes, port: 5300, protocol: HTTP,"
            " allowedRoutes: {kinds: [{kind: HTTPRoute}]}}",
            "TCPRoute",
            "",
        ),
        # udproute-not-allowed-by-listeners
        (PASSTHROUGH, "UDPRoute", ""),
        # tlsroute-invalid-no-matching-listener: HTTP and HTTPS listeners carry no TLSRoute
        ("{name: http, port: 80, protocol: HTTP}", "TLSRoute", "[tls.example.com]"),
        (
            "{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}",
            "TLSRoute",
            "[tls.example.com]",
        ),
        ("{name: tcp, port: 9000, protocol: TCP}", "TLSRoute", "[tls.example.com]"),
        (UDP, "TCPRoute", ""),
    ],
)
def test_route_on_a_listener_of_another_protocol_is_not_allowed(
    listener_text: str, kind: str, hostnames: str
) -> None:
    dag = build(gateway("gw", listener_text), route(kind, "r", "[{name: gw}]", hostnames=hostnames))

    assert parent_conditions(dag, kind, "r")["Accepted"] == ("False", "NotAllowedByListeners")
    assert dag.groups[ALL_GATEWAYS].clusters == ()


def test_no_matching_section_name() -> None:
    dag = build(
        gateway("gw", PASSTHROUGH),
        route(
            "TLSRoute",
            "r",
            "[{name: gw, sectionName: nonexistent-listener}]",
            hostnames="[tls.example.com]",
        ),
    )
    assert parent_conditions(dag, "TLSRoute", "r")["Accepted"] == ("False", "NoMatchingParent")


@pytest.mark.parametrize(
    ("listener_hostname", "route_hostnames", "served"),
    [
        # tlsroute-hostname-intersection
        ("abc.example.com", "['*.example.com']", ("abc.example.com",)),
        ("'*.example.com'", "[abc.example.com]", ("abc.example.com",)),
        ("'*.example.com'", "['*.com']", ("*.example.com",)),
        ("'*.com'", "[abc.example.com]", ("abc.example.com",)),
        ("'*.com'", "['*.example.com']", ("*.example.com",)),
        (None, "[abc.example.com]", ("abc.example.com",)),
        (None, "['*.com']", ("*.com",)),
        # tlsroute-invalid-no-matching-listener-hostname
        ("www.example.com", "[www.nomatch.com, '*.nomatch.com']", None),
        ("'*.example.com'", "[www.different.com, '*.different.com']", None),
    ],
)
def test_tls_hostname_intersection_decides_the_server_names(
    listener_hostname: str | None, route_hostnames: str, served: tuple[str, ...] | None
) -> None:
    hostname = f", hostname: {listener_hostname}" if listener_hostname else ""
    dag = build(
        gateway(
            "gw", f"{{name: tls, port: 443, protocol: TLS{hostname}, tls: {{mode: Passthrough}}}}"
        ),
        route("TLSRoute", "r", "[{name: gw}]", hostnames=route_hostnames),
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
        gateway(
            "gw",
            "{name: tls-terminate, port: 8883, protocol: TLS, hostname: tls.example.com,"
            " tls: {mode: Terminate, certificateRefs: [{name: cert}]}}",
            "{name: tls-passthrough, port: 8883, protocol: TLS, hostname: abc.example.com,"
            " tls: {mode: Passthrough}}",
        ),
        route(
            "TLSRoute", "pass", "[{name: gw}]", "[{name: echo, port: 3000}]", "[abc.example.com]"
        ),
        route(
            "TLSRoute", "end", "[{name: gw}]", "[{name: echo-2, port: 3000}]", "[tls.example.com]"
        ),
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
    listener_text, backend = (TCP, "echo") if kind == "TCPRoute" else (UDP, "udp-echo")
    dag = build(
        gateway("gw", listener_text),
        route(
            kind,
            "newer",
            "[{name: gw}]",
            "[{name: echo-2, port: 3000}]",
            created="2024-02-01T00:00:00Z",
        ),
        route(kind, "older", "[{name: gw}]", f"[{{name: {backend}, port: 3000}}]"),
    )
    assert parent_conditions(dag, kind, "older")["Accepted"] == ("True", "Accepted")
    assert parent_conditions(dag, kind, "newer")["Accepted"] == ("False", "RouteConflict")
    [served] = dag.groups[ALL_GATEWAYS].listeners
    forward = served.filter_chains[0].forward if isinstance(served, TcpListener) else served.forward
    assert forward.source.name == "older"
    assert listener(dag, "gw", listener_text[7:10], "infra")["attachedRoutes"] == 1


def test_tls_routes_share_a_listener_by_hostname_and_the_oldest_keeps_a_shared_one() -> None:
    dag = build(
        gateway("gw", PASSTHROUGH),
        route("TLSRoute", "a", "[{name: gw}]", hostnames="[a.example.com, shared.example.com]"),
        route(
            "TLSRoute",
            "b",
            "[{name: gw}]",
            "[{name: echo-2, port: 3000}]",
            "[b.example.com, shared.example.com]",
            created="2024-03-01T00:00:00Z",
        ),
        route(
            "TLSRoute",
            "c",
            "[{name: gw}]",
            hostnames="[shared.example.com]",
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
    listeners = [f"{{name: l{i}, port: {9300 + i}, protocol: TCP}}" for i in range(3)]
    dag = build(
        gateway("all", *listeners),
        gateway("some", *(item.replace("93", "94") for item in listeners)),
        route("TCPRoute", "every", "[{name: all}]"),
        route("TCPRoute", "by-port", "[{name: some, port: 9400}]"),
        route("TCPRoute", "by-section", "[{name: some, sectionName: l1}]"),
        route("TCPRoute", "both", "[{name: some, port: 9402, sectionName: l2}]"),
        route("TCPRoute", "mismatch", "[{name: some, port: 9400, sectionName: l2}]"),
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
    listener_text = {"TCPRoute": TCP, "TLSRoute": PASSTHROUGH, "UDPRoute": UDP}[kind]
    hostnames = "[tls.example.com]" if kind == "TLSRoute" else ""
    backend = "udp-echo" if kind == "UDPRoute" else "echo"
    grant = (
        f"apiVersion: {GW}\nkind: ReferenceGrant\n"
        "metadata: {name: grant, namespace: granted}\n"
        f"spec:\n  from: [{{group: gateway.networking.k8s.io, kind: {kind}, namespace: infra}}]\n"
        "  to: [{group: '', kind: Service}]\n---\n"
    )
    dag = build(
        gateway(
            "gw",
            listener_text.replace("}", ", allowedRoutes: {namespaces: {from: All}}}", 1)
            if kind != "TLSRoute"
            else listener_text,
        ),
        service(backend, "other", protocol="UDP" if kind == "UDPRoute" else "TCP"),
        service(backend, "granted", protocol="UDP" if kind == "UDPRoute" else "TCP"),
        grant,
        route(kind, "missing", "[{name: gw}]", "[{name: nope, port: 3000}]", hostnames),
        route(
            kind, "kind", "[{name: gw}]", "[{group: example.com, kind: Thing, name: x}]", hostnames
        ),
        route(
            kind,
            "cross",
            "[{name: gw}]",
            f"[{{name: {backend}, namespace: other, port: 3000}}]",
            hostnames,
        ),
        route(
            kind,
            "granted",
            "[{name: gw}]",
            f"[{{name: {backend}, namespace: granted, port: 3000}}]",
            hostnames,
        ),
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
        gateway("gw", TCP, UDP),
        route("UDPRoute", "u", "[{name: gw}]", "[{name: echo, port: 3000}]"),
        route("TCPRoute", "t", "[{name: gw}]", "[{name: udp-echo, port: 3000}]"),
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
        gateway(
            "gw",
            "{name: dns-tcp, port: 53, protocol: TCP}",
            "{name: dns-udp, port: 53, protocol: UDP}",
        ),
        route("TCPRoute", "t", "[{name: gw, sectionName: dns-tcp}]"),
        route(
            "UDPRoute", "u", "[{name: gw, sectionName: dns-udp}]", "[{name: udp-echo, port: 3000}]"
        ),
    )
    for name in ("dns-tcp", "dns-udp"):
        assert listener_condition(dag, "gw", name, "Conflicted", "infra") == (
            "False",
            "NoConflicts",
        )
    assert sorted(listeners_of(dag)) == ["tcp-53", "udp-53"]


def test_observed_generation_is_the_route_s() -> None:
    dag = build(gateway("gw", TCP), route("TCPRoute", "r", "[{name: gw}]", generation=7))
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
        gateway("gw", TCP),
        route(
            "TCPRoute",
            "r",
            "[{name: gw}]",
            "[{name: echo, port: 3000, weight: 70}, {name: echo-2, port: 3000, weight: 30},"
            " {name: nope, port: 3000, weight: 10}, {name: echo, port: 3000, weight: 0}]",
        ),
    )
    [tcp] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tcp, TcpListener)
    backends = [(b.cluster, b.weight) for b in tcp.filter_chains[0].forward.backends]
    assert backends == [("infra/echo/3000/tcp", 70), ("infra/echo-2/3000/tcp", 30), (None, 10)]


def test_udp_weighted_backends_send_everything_to_the_heaviest_and_say_so() -> None:
    # udproute-weighted-routing: Envoy's UDP proxy has one cluster per listener.
    dag = build(
        gateway("gw", UDP),
        service("udp-2", protocol="UDP"),
        route(
            "UDPRoute",
            "r",
            "[{name: gw}]",
            "[{name: udp-echo, port: 3000, weight: 1}, {name: udp-2, port: 3000, weight: 3}]",
        ),
    )
    [udp] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(udp, UdpListener)
    assert udp.forward.clusters == ("infra/udp-2/3000/udp",)
    conditions = parent_conditions(dag, "UDPRoute", "r")
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["PartiallyInvalid"] == ("True", "UnsupportedValue")


def test_the_dns_check_covers_external_names_of_tcp_tls_and_udp_routes() -> None:
    external = (
        "apiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: infra}\n"
        "spec: {type: ExternalName, externalName: db.partner.example, ports: [{port: 5432}]}\n"
        "---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: logs, namespace: infra}\n"
        "spec: {type: ExternalName, externalName: logs.partner.example,"
        " ports: [{port: 514, protocol: UDP}]}\n---\n"
    )
    texts = (
        DRAGOMAN_CLASS,
        external,
        gateway("gw", TCP, UDP),
        route("TCPRoute", "db", "[{name: gw}]", "[{name: db, port: 5432}]"),
        route("UDPRoute", "logs", "[{name: gw}]", "[{name: logs, port: 514}]"),
    )
    pending = build_yaml(*texts, options=BuildOptions(dns_check=True), dns={})
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
    checked = build_yaml(*texts, options=BuildOptions(dns_check=True), dns=metadata)
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
        gateway(
            "gw",
            "{name: wild, port: 443, protocol: TLS, hostname: '*.example.com',"
            " tls: {mode: Passthrough}}",
            "{name: exact, port: 443, protocol: TLS, hostname: abc.example.com,"
            " tls: {mode: Passthrough}}",
        ),
        route(
            "TLSRoute",
            "wide",
            "[{name: gw, sectionName: wild}]",
            hostnames="['*.example.com', abc.example.com]",
        ),
    )
    [tls] = dag.groups[ALL_GATEWAYS].listeners
    assert isinstance(tls, TcpListener)
    chains = {chain.server_names: chain.forward for chain in tls.filter_chains}
    assert set(chains) == {("*.example.com",), ("abc.example.com",)}
    assert chains[("*.example.com",)].source.name == "wide"
    refused = chains[("abc.example.com",)]
    assert [b.cluster for b in refused.backends] == [None]  # Envoy closes the connection
