"""Gateway spec.tls.backend.clientCertificateRef: the Gateway's ResolvedRefs condition with
the reasons of the gateway-invalid-tls-backend-configuration scenarios, and clusters reached
over TLS presenting the certificate to that Gateway's Envoys only."""

from __future__ import annotations

import pytest

from dragoman.dag.model import ALL_GATEWAYS, DnsCluster, Forward
from tests.support.builders import (
    Object,
    backend_ref,
    external_service,
    gateway,
    gateway_class,
    http_route,
    local_ref,
    match,
    parent_ref,
    reference_grant,
    rule,
    secret,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text, gateway_condition, status

CLIENT = certificate_authority().issue("gateway.example.com")


def presenting(ref: Object) -> Object:
    """The Gateway's tls: present the certificate of `ref` to backends."""
    return {"backend": {"clientCertificateRef": ref}}


TO_PARTNER_AND_PLAIN = [
    rule(backend_ref("partner", 443), matches=[match("/tls")]),
    rule(backend_ref("plain", 8080), matches=[match("/plain")]),
]
ROUTE = http_route("r", rules=TO_PARTNER_AND_PLAIN, parents=[parent_ref("gw")], namespace="infra")


def build(*documents: Object):  # type: ignore[no-untyped-def]
    return build_text(
        gateway_class(),
        external_service("partner", "api.partner.example", 443, namespace="infra"),
        external_service("plain", "plain.partner.example", 8080, namespace="infra"),
        secret("malformed", {}, namespace="infra", secret_type="Opaque"),
        tls_secret("client", CLIENT.certificate, CLIENT.private_key, namespace="infra"),
        *documents,
    )


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        (local_ref("Secret", "nonexistent-certificate"), "InvalidClientCertificateRef"),
        (local_ref("Secret", "client", "wrong.group.company.io"), "InvalidClientCertificateRef"),
        (local_ref("WrongKind", "client"), "InvalidClientCertificateRef"),
        (local_ref("Secret", "malformed"), "InvalidClientCertificateRef"),
        ({**local_ref("Secret", "certificate"), "namespace": "web"}, "RefNotPermitted"),
    ],
)
def test_invalid_references_are_reported_on_the_gateway(ref: Object, reason: str) -> None:
    dag = build(gateway("gw", 80, namespace="infra", tls=presenting(ref)), ROUTE)
    assert gateway_condition(dag, "gw", "ResolvedRefs", "infra") == ("False", reason)
    assert gateway_condition(dag, "gw", "Accepted", "infra")[0] == "True"
    # Nothing is presented: the clusters stay as they are.
    assert not any("client-certificate" in name for name in dag.clusters)


def test_a_granted_secret_in_another_namespace_is_used() -> None:
    grant = reference_grant(
        "g",
        "web",
        from_kind="Gateway",
        from_namespace="infra",
        to_kind="Secret",
        to_name="certificate",
    )
    certificate = {"name": "certificate", "namespace": "web"}
    dag = build(
        gateway("gw", 80, namespace="infra", tls=presenting(certificate)),
        ROUTE,
        grant,
        tls_secret("certificate", CLIENT.certificate, CLIENT.private_key, namespace="web"),
    )
    assert gateway_condition(dag, "gw", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    assert "infra/partner/443/client-certificate/web/certificate" in dag.clusters


def test_only_clusters_reached_over_tls_present_it() -> None:
    dag = build(gateway("gw", 80, namespace="infra", tls=presenting({"name": "client"})), ROUTE)
    assert gateway_condition(dag, "gw", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    variant = dag.clusters["infra/partner/443/client-certificate/infra/client"]
    assert isinstance(variant, DnsCluster) and variant.tls is not None
    assert variant.tls.client_certificate is not None
    assert variant.tls.client_certificate.certificate_chain == CLIENT.certificate
    assert "infra/plain/8080" in dag.clusters  # cleartext: nothing to present
    assert "infra/partner/443" not in dag.clusters  # nobody references the bare one now
    for group in (ALL_GATEWAYS, "infra/gw"):
        sent = {
            b.cluster
            for table in dag.groups[group].route_tables
            for host in table.virtual_hosts
            for r in host.routes
            if isinstance(r.action, Forward)
            for b in r.action.backends
        }
        assert sent == {"infra/partner/443/client-certificate/infra/client", "infra/plain/8080"}


def test_a_gateway_without_one_never_presents_anothers() -> None:
    dag = build(
        gateway("mtls", 80, namespace="infra", tls=presenting({"name": "client"})),
        gateway("plain", 8080, namespace="infra"),
        http_route(
            "r",
            rules=TO_PARTNER_AND_PLAIN,
            parents=[parent_ref("mtls"), parent_ref("plain")],
            namespace="infra",
        ),
    )
    assert "infra/partner/443/client-certificate/infra/client" in dag.groups["infra/mtls"].clusters
    assert "infra/partner/443" in dag.groups["infra/plain"].clusters
    # Envoys of every Gateway: the Gateways disagree, so no certificate at all.
    assert "infra/partner/443" in dag.groups[ALL_GATEWAYS].clusters
    assert not any("client-certificate" in n for n in dag.groups[ALL_GATEWAYS].clusters)


def test_no_condition_without_a_reference() -> None:
    dag = build(gateway("gw", 80, namespace="infra"), ROUTE)
    types = [c["type"] for c in status(dag, "Gateway", "gw", "infra")["conditions"]]
    assert types == ["Accepted", "Programmed"]
