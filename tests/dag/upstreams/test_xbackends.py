"""XBackends as backendRefs: judged as an ExternalName's outside host is (unsafe names, the
platform's domains, the DNS check, DNS annotations), a name inside the cluster refused; the
protocol and TLS they ask for; their status; references across namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.dns_check import DnsObservation
from dragoman.dag.external_name_policy import ExternalNamePolicy, domain_rule
from dragoman.dag.model import H1, H2, H2C, HTTP1, TCP, Dag, DnsCluster
from dragoman.dag.options import BuildOptions
from dragoman.objects.xbackend import XBACKEND_GROUP
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object
from tests.support.builders import (
    Object,
    config_map,
    gateway,
    gateway_class,
    http_route,
    listener,
    local_ref,
    reference_grant,
    rule,
    secret,
    tls_secret,
    xbackend,
    xbackend_ref,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text, condition, route_problems, status

CA = certificate_authority()
CLIENT = CA.issue("client.example.com")
OTHER = CA.issue("other.example.com")
ROUTE = http_route("r", rules=[rule(xbackend_ref("partner"))])


def build(*documents: Object, **options: Any) -> Dag:
    return build_text(gateway_class(), gateway("gw", 80), *documents, **options)


def only_cluster(dag: Dag) -> DnsCluster:
    [cluster] = dag.clusters.values()
    assert isinstance(cluster, DnsCluster)
    return cluster


def presented(dag: Dag) -> dict[str, str | None]:
    """Each XBackend host and the Secret whose certificate its cluster presents."""
    found: dict[str, str | None] = {}
    for cluster in dag.clusters.values():
        assert isinstance(cluster, DnsCluster) and cluster.tls is not None
        certificate = cluster.tls.client_certificate
        found[cluster.hostname] = certificate.secret.name if certificate is not None else None
    return found


def xbackend_conditions(dag: Dag, name: str = "partner") -> dict[str, tuple[str, str]]:
    [parent] = status(dag, "XBackend", name)["parents"]
    assert parent["parentRef"]["name"] == "gw"
    return {c["type"]: condition(parent["conditions"], c["type"]) for c in parent["conditions"]}


def test_an_xbackend_is_served_by_a_dns_cluster_with_tls_from_its_hostname() -> None:
    dag = build(xbackend("partner", "api.partner.example", tls={"mode": "ServerOnly"}), ROUTE)
    cluster = only_cluster(dag)
    assert cluster.name == "xbackend/default/partner/443"
    assert (cluster.hostname, cluster.port, cluster.protocol) == ("api.partner.example", 443, HTTP1)
    # SNI and the name verified come from the endpoint's hostname, trusted by the system CAs.
    assert cluster.tls is not None and cluster.tls.sni is None and cluster.tls.trusted_ca is None
    assert cluster.tls.client_certificate is None
    assert route_problems(dag) == []
    assert xbackend_conditions(dag) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }


def test_without_tls_an_xbackend_is_cleartext() -> None:
    dag = build(xbackend("partner", "api.partner.example", 80), ROUTE)
    assert only_cluster(dag).tls is None


@pytest.mark.parametrize(
    ("protocol", "tls", "expected"),
    [
        ("HTTP", None, HTTP1),
        ("HTTP11", None, HTTP1),
        ("HTTP2", None, H2C),
        ("H2C", None, H2C),
        ("HTTP2", {"mode": "ServerOnly"}, H2),
        ("H2C", {"mode": "ServerOnly"}, H2),
        ("HTTP11", {"mode": "ServerOnly"}, H1),
        ("HTTP", {"mode": "ServerOnly"}, HTTP1),
    ],
)
def test_protocol_picks_the_upstream_protocol(
    protocol: str, tls: Object | None, expected: str
) -> None:
    dag = build(xbackend("partner", "api.partner.example", protocol=protocol, tls=tls), ROUTE)
    cluster = only_cluster(dag)
    assert cluster.protocol == expected
    assert cluster.name.endswith("/443" if expected == HTTP1 else f"/443/{expected}")


def test_a_named_port_names_the_cluster_so_a_new_number_keeps_it() -> None:
    names = set()
    for port in (443, 8443):
        backend = xbackend("partner", "api.partner.example", port, port_name="https")
        cluster = only_cluster(build(backend, ROUTE))
        assert cluster.port == port
        names.add(cluster.name)
    assert names == {"xbackend/default/partner/https"}
    # An empty name is no name: the number names the cluster.
    unnamed = build(xbackend("partner", "api.partner.example", port_name=""), ROUTE)
    assert only_cluster(unnamed).name == "xbackend/default/partner/443"


@pytest.mark.parametrize(
    ("port_name", "expected"),
    [("https", "https/h2c"), ("http1", "http1/h2c"), ("h2c", "h2c/h2c")],
)
def test_a_grpc_route_appends_its_protocol_to_the_port_name(port_name: str, expected: str) -> None:
    route = http_route("g", kind="GRPCRoute", rules=[rule(xbackend_ref("partner"))])
    backend = xbackend("partner", "grpc.partner.example", 50051, port_name=port_name)
    assert only_cluster(build(backend, route)).name == f"xbackend/default/partner/{expected}"


def test_a_tcp_route_reaches_an_xbackend_over_tcp() -> None:
    route = http_route("t", kind="TCPRoute", rules=[rule(xbackend_ref("partner"))])
    dag = build_text(
        gateway_class(),
        gateway("gw", listeners=[listener("tcp", 5432, "TCP")]),
        xbackend("partner", "db.partner.example", 5432, protocol="TCP"),
        route,
    )
    assert only_cluster(dag).protocol == TCP


def test_protocol_tcp_cannot_carry_http_requests() -> None:
    dag = build(xbackend("partner", "api.partner.example", protocol="TCP"), ROUTE)
    assert not dag.clusters
    [problem] = route_problems(dag)
    assert problem.reason == "UnsupportedProtocol"
    assert "spec.protocol" in problem.message


def test_mcp_is_reported_unsupported_naming_the_field() -> None:
    dag = build(xbackend("partner", "api.partner.example", protocol="MCP"), ROUTE)
    assert not dag.clusters
    accepted = xbackend_conditions(dag)["Accepted"]
    assert accepted == ("False", "UnsupportedValue")
    [parent] = status(dag, "XBackend", "partner")["parents"]
    assert "spec.protocol" in parent["conditions"][0]["message"]
    [problem] = route_problems(dag)
    assert problem.reason == "UnsupportedValue" and "spec.protocol" in problem.message


@pytest.mark.parametrize(
    ("hostname", "words"),
    [
        ("localhost", "points to localhost"),
        ("10.1.2.3", "is an IP address"),
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "cloud metadata address"),
        ("metadata.google.internal", "instance metadata service"),
        ("partner", "single-label"),
        ("api.default.svc", "inside the cluster domain"),
        ("api.corp.internal", "inside the cluster domain"),
    ],
)
def test_unsafe_and_cluster_internal_hostnames_are_refused(hostname: str, words: str) -> None:
    options = BuildOptions(cluster_domain="corp.internal")
    dag = build(xbackend("partner", hostname), ROUTE, options=options)
    assert not dag.clusters
    accepted = xbackend_conditions(dag)["Accepted"]
    assert accepted == ("False", "UnsafeHostname")
    [problem] = route_problems(dag)
    assert problem.reason == "UnsafeHostname"
    assert words in problem.message and "spec.externalHostname.hostname" in problem.message
    assert "XBackend default/partner" in problem.message


def test_the_crd_refuses_cluster_local_names() -> None:
    document = xbackend("partner", "placeholder.example")
    document["spec"]["externalHostname"]["hostname"] = "api.default.svc.cluster.local"
    with pytest.raises(ObjectError, match=r"end with \.cluster\.local"):
        parse_object(document)


def test_a_service_shaped_name_is_refused_not_followed_to_the_service() -> None:
    dag = build(
        xbackend("partner", "api.default.svc.cluster.example"),
        ROUTE,
        options=BuildOptions(cluster_domain="cluster.example"),
    )
    assert not dag.clusters
    assert xbackend_conditions(dag)["Accepted"] == ("False", "UnsafeHostname")


def test_the_platforms_domains_apply() -> None:
    policy = ExternalNamePolicy(allowed_domains=(domain_rule("*.allowed.example"),))
    options = BuildOptions(external_names=policy)
    dag = build(xbackend("partner", "api.partner.example"), ROUTE, options=options)
    assert not dag.clusters
    assert xbackend_conditions(dag)["Accepted"] == ("False", "NotAllowedByPolicy")
    served = build(xbackend("partner", "api.allowed.example"), ROUTE, options=options)
    assert only_cluster(served).hostname == "api.allowed.example"


def test_the_dns_check_gates_the_name_and_reports_dns_resolved() -> None:
    options = BuildOptions(dns_check=True)
    pending = build(xbackend("partner", "api.partner.example"), ROUTE, options=options)
    assert not pending.clusters
    assert pending.dns_hostnames == ("api.partner.example",)
    conditions = xbackend_conditions(pending)
    assert conditions["Accepted"] == ("True", "Accepted")
    assert conditions["DNSResolved"] == ("Unknown", "Pending")
    [problem] = route_problems(pending)
    assert problem.reason == "DNSCheckPending"

    dns = {"api.partner.example": DnsObservation(addresses=("203.0.113.7",))}
    served = build(xbackend("partner", "api.partner.example"), ROUTE, options=options, dns=dns)
    cluster = only_cluster(served)
    assert cluster.checked
    assert xbackend_conditions(served)["DNSResolved"] == ("True", "Resolved")
    # The checked address, over EDS, with the name kept for SNI and the certificate.
    [locality] = served.load_assignments[cluster.name].localities
    assert [(e.address, e.hostname) for e in locality.endpoints] == [
        ("203.0.113.7", "api.partner.example")
    ]


def test_a_private_answer_is_refused_by_the_dns_check() -> None:
    options = BuildOptions(dns_check=True)
    dns = {"api.partner.example": DnsObservation(addresses=("127.0.0.8",))}
    dag = build(xbackend("partner", "api.partner.example"), ROUTE, options=options, dns=dns)
    assert not dag.clusters
    assert xbackend_conditions(dag)["Accepted"] == ("False", "NotAllowedByPolicy")


def test_dns_annotations_apply_and_bad_ones_are_reported() -> None:
    annotations = {
        "dragoman.dev/dns-refresh-rate": "45s",
        "dragoman.dev/dns-respect-ttl": "sometimes",
    }
    dag = build(xbackend("partner", "api.partner.example", annotations=annotations), ROUTE)
    assert only_cluster(dag).dns.refresh_s == 45.0
    [problem] = route_problems(dag)
    assert problem.reason == "UnsupportedValue"
    assert "XBackend default/partner annotation dragoman.dev/dns-respect-ttl" in problem.message
    [parent] = status(dag, "XBackend", "partner")["parents"]
    assert "dns-respect-ttl" in parent["conditions"][0]["message"]


def test_client_and_server_presents_the_xbackends_own_certificate() -> None:
    tls = {"mode": "ClientAndServer", "clientCertificateRef": {"name": "client"}}
    dag = build(
        xbackend("partner", "api.partner.example", tls=tls),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key),
        ROUTE,
    )
    cluster = only_cluster(dag)
    assert cluster.tls is not None and cluster.tls.client_certificate is not None
    assert cluster.tls.client_certificate.certificate_chain.strip() == CLIENT.certificate.strip()


def test_two_xbackends_present_different_certificates() -> None:
    def presenting(secret_name: str) -> Object:
        return {"mode": "ClientAndServer", "clientCertificateRef": {"name": secret_name}}

    route = http_route("r", rules=[rule(xbackend_ref("one")), rule(xbackend_ref("two"))])
    dag = build(
        xbackend("one", "one.partner.example", tls=presenting("client")),
        xbackend("two", "two.partner.example", tls=presenting("other")),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key),
        tls_secret("other", OTHER.certificate, OTHER.private_key),
        route,
    )
    assert presented(dag) == {"one.partner.example": "client", "two.partner.example": "other"}


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ({"name": "missing"}, "InvalidClientCertificateRef"),
        ({"name": "opaque"}, "InvalidClientCertificateRef"),
        ({"name": "client", "namespace": "vault"}, "RefNotPermitted"),
    ],
)
def test_an_unusable_client_certificate_refuses_the_xbackend(ref: Object, reason: str) -> None:
    tls = {"mode": "ClientAndServer", "clientCertificateRef": ref}
    dag = build(
        xbackend("partner", "api.partner.example", tls=tls),
        secret("opaque", {"x": b"y"}, secret_type="Opaque"),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key, namespace="vault"),
        ROUTE,
    )
    assert not dag.clusters  # never sent without the certificate the backend asks for
    conditions = xbackend_conditions(dag)
    assert conditions["ResolvedRefs"] == ("False", reason)
    assert conditions["Accepted"] == ("False", reason)


def test_a_granted_client_certificate_in_another_namespace_is_used() -> None:
    tls = {
        "mode": "ClientAndServer",
        "clientCertificateRef": {"name": "client", "namespace": "vault"},
    }
    grant = reference_grant(
        "g",
        "vault",
        from_kind="XBackend",
        from_namespace="default",
        to_kind="Secret",
        from_group=XBACKEND_GROUP,
    )
    dag = build(
        xbackend("partner", "api.partner.example", tls=tls),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key, namespace="vault"),
        grant,
        ROUTE,
    )
    assert only_cluster(dag).tls.client_certificate is not None  # type: ignore[union-attr]


def test_validation_is_judged_as_a_backend_tls_policys() -> None:
    tls = {
        "mode": "ServerOnly",
        "validation": {
            "hostname": "sni.partner.example",
            "caCertificateRefs": [local_ref("ConfigMap", "ca"), local_ref("ConfigMap", "keyed")],
        },
    }
    keyed = (CA.pem + CLIENT.private_key).decode()
    dag = build(
        xbackend("partner", "api.partner.example", tls=tls),
        config_map("ca", {"ca.crt": CA.pem.decode()}),
        config_map("keyed", {"ca.crt": keyed}),
        ROUTE,
    )
    tls_made = only_cluster(dag).tls
    assert tls_made is not None and tls_made.sni == "sni.partner.example"
    assert tls_made.trusted_ca is not None and b"PRIVATE KEY" not in tls_made.trusted_ca
    conditions = xbackend_conditions(dag)
    assert conditions["Accepted"] == ("True", "Accepted")
    # The CA bundle holding a private key is refused and said so, naming the field.
    assert conditions["ResolvedRefs"] == ("False", "InvalidCACertificateRef")
    [parent] = status(dag, "XBackend", "partner")["parents"]
    [resolved] = [c for c in parent["conditions"] if c["type"] == "ResolvedRefs"]
    assert "spec.tls.validation.caCertificateRefs[1]" in resolved["message"]
    assert "private key" in resolved["message"]


def test_validation_with_mode_none_is_refused() -> None:
    tls = {
        "mode": "None",
        "validation": {"hostname": "x.example", "wellKnownCACertificates": "System"},
    }
    dag = build(xbackend("partner", "api.partner.example", tls=tls), ROUTE)
    assert not dag.clusters
    assert xbackend_conditions(dag)["Accepted"] == ("False", "UnsupportedValue")


def test_another_namespaces_xbackend_needs_a_reference_grant() -> None:
    route = http_route("r", rules=[rule(xbackend_ref("partner", namespace="egress"))])
    backend = xbackend("partner", "api.partner.example", namespace="egress")
    refused = build(backend, route)
    assert not refused.clusters
    [problem] = route_problems(refused)
    assert problem.reason == "RefNotPermitted"
    grant = reference_grant(
        "g",
        "egress",
        from_kind="HTTPRoute",
        from_namespace="default",
        to_kind="XBackend",
        to_group=XBACKEND_GROUP,
    )
    served = build(backend, route, grant)
    assert only_cluster(served).hostname == "api.partner.example"


def test_a_missing_xbackend_is_backend_not_found() -> None:
    dag = build(ROUTE)
    [problem] = route_problems(dag)
    assert problem.reason == "BackendNotFound"


def test_an_unreferenced_xbackend_has_no_parents() -> None:
    dag = build(xbackend("partner", "localhost"))
    assert status(dag, "XBackend", "partner") == {"parents": []}


def test_the_crd_rules_are_parse_errors() -> None:
    document = xbackend(
        "partner",
        "api.partner.example",
        tls={"mode": "ServerOnly", "clientCertificateRef": {"name": "c"}},
    )
    with pytest.raises(ObjectError, match="clientCertificateRef must be set if and only if"):
        parse_object(document)
    document = xbackend("partner", "api.partner.example", protocol="GRPC")
    with pytest.raises(ObjectError, match=r"spec\.protocol"):
        parse_object(document)


def test_the_xbackends_certificate_takes_precedence_over_the_gateways() -> None:
    presenting = {"mode": "ClientAndServer", "clientCertificateRef": {"name": "client"}}
    route = http_route("r", rules=[rule(xbackend_ref("own")), rule(xbackend_ref("plain"))])
    dag = build_text(
        gateway_class(),
        gateway("gw", 80, tls={"backend": {"clientCertificateRef": {"name": "other"}}}),
        xbackend("own", "own.partner.example", tls=presenting),
        xbackend("plain", "plain.partner.example", tls={"mode": "ServerOnly"}),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key),
        tls_secret("other", OTHER.certificate, OTHER.private_key),
        route,
    )
    assert presented(dag) == {"own.partner.example": "client", "plain.partner.example": "other"}


def test_http11_over_tls_is_served_as_asked_and_reported_as_nothing() -> None:
    dag = build(
        xbackend("partner", "api.partner.example", protocol="HTTP11", tls={"mode": "ServerOnly"}),
        ROUTE,
    )
    cluster = only_cluster(dag)
    assert (cluster.protocol, cluster.name) == (H1, "xbackend/default/partner/443/h1")
    assert route_problems(dag) == []
    assert xbackend_conditions(dag) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }


def test_a_grpc_route_speaks_http2_even_to_an_http11_xbackend_over_tls() -> None:
    route = http_route("g", kind="GRPCRoute", rules=[rule(xbackend_ref("partner"))])
    backend = xbackend(
        "partner", "grpc.partner.example", protocol="HTTP11", tls={"mode": "ServerOnly"}
    )
    cluster = only_cluster(build(backend, route))
    assert (cluster.protocol, cluster.name) == (H2, "xbackend/default/partner/443/h2")


def test_a_grpc_route_speaks_http2_to_an_xbackend() -> None:
    route = http_route("g", kind="GRPCRoute", rules=[rule(xbackend_ref("partner"))])
    cleartext = build(xbackend("partner", "grpc.partner.example", 50051), route)
    assert only_cluster(cleartext).protocol == H2C
    secure = build(xbackend("partner", "grpc.partner.example", tls={"mode": "ServerOnly"}), route)
    assert only_cluster(secure).protocol == H2
    assert only_cluster(secure).name == "xbackend/default/partner/443/h2"


def test_a_tls_route_passing_tls_through_refuses_an_xbackend_that_adds_its_own() -> None:
    route = http_route(
        "t", kind="TLSRoute", hostnames=["a.example.com"], rules=[rule(xbackend_ref("partner"))]
    )
    dag = build_text(
        gateway_class(),
        gateway("gw", listeners=[listener("tls", 9443, "TLS", tls={"mode": "Passthrough"})]),
        xbackend("partner", "db.partner.example", tls={"mode": "ServerOnly"}),
        route,
    )
    [problem] = route_problems(dag, "t")
    assert problem.reason == "UnsupportedValue"
    assert problem.message.startswith("XBackend default/partner asks for TLS (spec.tls)")
