"""Gateway spec.tls.backend.clientCertificateRef: the Gateway's ResolvedRefs condition with
the reasons of the gateway-invalid-tls-backend-configuration scenarios, and clusters reached
over TLS presenting the certificate to that Gateway's Envoys only."""

from __future__ import annotations

import pytest

from dragoman.dag.model import ALL_GATEWAYS, DnsCluster, Forward
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    DRAGOMAN_CLASS,
    GW,
    build_text,
    gateway_condition,
    status,
)

CLIENT = certificate_authority().issue("gateway.example.com")


def gateway(name: str, ref: str | None, port: int = 80) -> str:
    tls = f"  tls:\n    backend:\n      clientCertificateRef: {ref}\n" if ref else ""
    return (
        f"apiVersion: {GW}\nkind: Gateway\nmetadata: {{name: {name}, namespace: infra}}\n"
        f"spec:\n  gatewayClassName: dragoman\n"
        f"  listeners: [{{name: http, port: {port}, protocol: HTTP}}]\n{tls}---\n"
    )


BACKENDS = """
apiVersion: v1
kind: Service
metadata: {name: partner, namespace: infra}
spec: {type: ExternalName, externalName: api.partner.example, ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: infra}
spec: {type: ExternalName, externalName: plain.partner.example, ports: [{port: 8080}]}
---
apiVersion: v1
kind: Secret
metadata: {name: malformed, namespace: infra}
type: Opaque
data: {}
---
"""


def route(name: str, *parents: str) -> str:
    refs = ", ".join(f"{{name: {p}}}" for p in parents)
    return (
        f"apiVersion: {GW}\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: infra}}\n"
        f"spec:\n  parentRefs: [{refs}]\n  rules:\n"
        "  - matches: [{path: {value: /tls}}]\n    backendRefs: [{name: partner, port: 443}]\n"
        "  - matches: [{path: {value: /plain}}]\n    backendRefs: [{name: plain, port: 8080}]\n"
        "---\n"
    )


def build(*texts: str):  # type: ignore[no-untyped-def]
    return build_text(DRAGOMAN_CLASS, BACKENDS, CLIENT.secret_yaml("client", "infra"), *texts)


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("{group: '', kind: Secret, name: nonexistent-certificate}", "InvalidClientCertificateRef"),
        (
            "{group: wrong.group.company.io, kind: Secret, name: client}",
            "InvalidClientCertificateRef",
        ),
        ("{group: '', kind: WrongKind, name: client}", "InvalidClientCertificateRef"),
        ("{group: '', kind: Secret, name: malformed}", "InvalidClientCertificateRef"),
        ("{group: '', kind: Secret, name: certificate, namespace: web}", "RefNotPermitted"),
    ],
)
def test_invalid_references_are_reported_on_the_gateway(ref: str, reason: str) -> None:
    dag = build(gateway("gw", ref), route("r", "gw"))
    assert gateway_condition(dag, "gw", "ResolvedRefs", "infra") == ("False", reason)
    assert gateway_condition(dag, "gw", "Accepted", "infra")[0] == "True"
    # Nothing is presented: the clusters stay as they are.
    assert not any("client-certificate" in name for name in dag.clusters)


def test_a_granted_secret_in_another_namespace_is_used() -> None:
    grant = (
        f"apiVersion: {GW}\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: web}}\n"
        "spec:\n  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}]\n"
        "  to: [{group: '', kind: Secret, name: certificate}]\n---\n"
    )
    dag = build(
        gateway("gw", "{name: certificate, namespace: web}"),
        route("r", "gw"),
        grant,
        CLIENT.secret_yaml("certificate", "web"),
    )
    assert gateway_condition(dag, "gw", "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    assert "infra/partner/443/client-certificate/web/certificate" in dag.clusters


def test_only_clusters_reached_over_tls_present_it() -> None:
    dag = build(gateway("gw", "{name: client}"), route("r", "gw"))
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
        gateway("mtls", "{name: client}"),
        gateway("plain", None, port=8080),
        route("r", "mtls", "plain"),
    )
    assert "infra/partner/443/client-certificate/infra/client" in dag.groups["infra/mtls"].clusters
    assert "infra/partner/443" in dag.groups["infra/plain"].clusters
    # Envoys of every Gateway: the Gateways disagree, so no certificate at all.
    assert "infra/partner/443" in dag.groups[ALL_GATEWAYS].clusters
    assert not any("client-certificate" in n for n in dag.groups[ALL_GATEWAYS].clusters)


def test_no_condition_without_a_reference() -> None:
    dag = build(gateway("gw", None), route("r", "gw"))
    types = [c["type"] for c in status(dag, "Gateway", "gw", "infra")["conditions"]]
    assert types == ["Accepted", "Programmed"]
