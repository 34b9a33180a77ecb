"""A Gateway's spec.tls.frontend (client certificate validation): the scenarios of the
Gateway API v1.6 conformance suite (GatewayFrontendClientCertificateValidation, its
InsecureFallback variant, GatewayInvalidFrontendClientCertificateValidation and
GatewayFrontendInvalidDefaultClientCertificateValidation), written afresh in its style, and
what the build makes of each configuration for Envoy."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from dragoman.dag.build import build
from dragoman.dag.incremental import IncrementalBuild
from dragoman.dag.model import ClientValidation, Dag, HttpsListener, TcpListener
from dragoman.objects import ObjectKey
from dragoman.store import Store
from tests.support.builders import (
    Object,
    allowed_routes,
    backend_ref,
    config_map,
    gateway,
    gateway_class,
    http_route,
    listener,
    listener_set,
    namespace_object,
    parent_ref,
    reference_grant,
    rule,
    secret,
    service,
    service_port,
    tls_secret,
    typed,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    build_text,
    gateway_condition,
    listener_condition,
    route_condition,
    status,
)

SERVER = certificate_authority("server CA").issue("example.org", "*.example.org")
CA = certificate_authority("client CA")
PER_PORT_CA = certificate_authority("per-port client CA")

infra_gateway = partial(gateway, namespace="infra", generation=1)
https = partial(
    listener,
    protocol="HTTPS",
    allowed_routes=allowed_routes("Same"),
    tls={"certificateRefs": [{"group": "", "kind": "Secret", "name": "server"}]},
)

WORLD = [
    gateway_class(),
    namespace_object("infra"),
    namespace_object("web"),
    service("infra-v1", namespace="infra", ports=[service_port(8080)]),
    service("infra-v2", namespace="infra", ports=[service_port(8080)]),
    tls_secret("server", SERVER.certificate, SERVER.private_key, namespace="infra"),
    config_map("ca", {"ca.crt": CA.pem.decode()}, namespace="infra"),
    config_map("per-port-ca", {"ca.crt": PER_PORT_CA.pem.decode()}, namespace="infra"),
    config_map("web-ca", {"ca.crt": CA.pem.decode()}, namespace="web"),
]


def ca_ref(name: str, kind: str = "ConfigMap", **extra: str) -> dict[str, str]:
    return {"group": "", "kind": kind, "name": name, **extra}


def validation(*refs: dict[str, str], mode: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"caCertificateRefs": list(refs)}
    if mode is not None:
        found["mode"] = mode
    return {"validation": found}


def frontend(default: dict[str, Any], **per_port: dict[str, Any]) -> dict[str, Any]:
    """spec.tls with a frontend: `per_port` keyed `p<port>`."""
    entries = [{"port": int(port[1:]), "tls": tls} for port, tls in per_port.items()]
    found: dict[str, Any] = {"default": default}
    if entries:
        found["perPort"] = entries
    return {"frontend": found}


def dag_of(*documents: Object) -> Dag:
    return build_text(*WORLD, *documents)


def two_port_gateway(name: str, mode: str | None = None) -> Object:
    return infra_gateway(
        name,
        listeners=[
            https("https", 443),
            https("https-with-hostname", 8443, hostname="second-example.org"),
        ],
        tls=frontend(
            validation(ca_ref("ca"), mode=mode),
            p8443=validation(ca_ref("per-port-ca"), mode=mode),
        ),
    )


def two_routes(gateway_name: str) -> list[Object]:
    return [
        http_route(
            "with-hostname",
            namespace="infra",
            parents=[parent_ref(gateway_name)],
            hostnames=["example.org"],
            rules=[rule(backend_ref("infra-v1", 8080))],
        ),
        http_route(
            "no-hostname",
            namespace="infra",
            parents=[parent_ref(gateway_name, section="https-with-hostname")],
            rules=[rule(backend_ref("infra-v2", 8080))],
        ),
    ]


def chain_validation(dag: Dag, gateway_name: str, port: int) -> ClientValidation | None:
    """The client validation of the HTTPS listener on `port` (each chain has the same)."""
    [found] = [
        value
        for value in dag.groups[f"infra/{gateway_name}"].listeners
        if isinstance(value, HttpsListener) and value.port == port
    ]
    validations = {chain.client_validation for chain in found.filter_chains}
    assert len(validations) == 1, validations
    return validations.pop()


def served_ports(dag: Dag, gateway_name: str) -> set[int]:
    return {value.port for value in dag.groups[f"infra/{gateway_name}"].listeners}


# --- the conformance scenarios ----------------------------------------------------------------


def test_client_certificate_validation_default_and_per_port() -> None:
    dag = dag_of(
        two_port_gateway("client-validation-default"), *two_routes("client-validation-default")
    )
    assert gateway_condition(dag, "client-validation-default", "Accepted", "infra") == (
        "True",
        "Accepted",
    )
    for name in ("with-hostname", "no-hostname"):
        assert route_condition(dag, name, "Accepted", "infra") == ("True", "Accepted")
        assert route_condition(dag, name, "ResolvedRefs", "infra") == ("True", "ResolvedRefs")
    default = chain_validation(dag, "client-validation-default", 443)
    per_port = chain_validation(dag, "client-validation-default", 8443)
    assert default is not None and per_port is not None
    assert default.trusted_ca == CA.pem and not default.insecure_fallback
    assert per_port.trusted_ca == PER_PORT_CA.pem and not per_port.insecure_fallback
    assert default.name != per_port.name
    conditions = status(dag, "Gateway", "client-validation-default", "infra")["conditions"]
    assert "InsecureFrontendValidationMode" not in {c["type"] for c in conditions}


def test_client_certificate_validation_insecure_fallback() -> None:
    gateway_name = "client-validation-insecure-fallback"
    dag = dag_of(
        two_port_gateway(gateway_name, mode="AllowInsecureFallback"), *two_routes(gateway_name)
    )
    assert gateway_condition(dag, gateway_name, "Accepted", "infra") == ("True", "Accepted")
    assert gateway_condition(dag, gateway_name, "InsecureFrontendValidationMode", "infra") == (
        "True",
        "ConfigurationChanged",
    )
    for port in (443, 8443):
        found = chain_validation(dag, gateway_name, port)
        assert found is not None and found.insecure_fallback


INVALID_LISTENERS = [
    https("https", 443),
    https("https-unresolved", 7443, hostname="first-example.org"),
    https("https-invalid-kind", 8443, hostname="second-example.org"),
    https("https-grant-missing", 6443, hostname="fourth-example.org"),
]
INVALID_FRONTEND = frontend(
    validation(ca_ref("ca")),
    p7443=validation(ca_ref("non-existing-cm")),
    p8443=validation(ca_ref("infra-v2", kind="Service")),
    p6443=validation(ca_ref("web-ca", namespace="web")),
)


@pytest.mark.parametrize(
    ("name", "resolved_reason"),
    [
        ("https-unresolved", "InvalidCACertificateRef"),
        ("https-invalid-kind", "InvalidCACertificateKind"),
        ("https-grant-missing", "RefNotPermitted"),
    ],
)
def test_invalid_client_certificate_validation(name: str, resolved_reason: str) -> None:
    gateway_name = "gateway-with-invalid-client-cert-validation"
    dag = dag_of(infra_gateway(gateway_name, listeners=INVALID_LISTENERS, tls=INVALID_FRONTEND))
    assert listener_condition(dag, gateway_name, name, "ResolvedRefs", "infra") == (
        "False",
        resolved_reason,
    )
    assert listener_condition(dag, gateway_name, name, "Accepted", "infra") == (
        "False",
        "NoValidCACertificate",
    )
    assert listener_condition(dag, gateway_name, name, "Programmed", "infra")[0] == "False"
    # The valid one is served alone: no listener goes out without its client validation.
    for condition_type in ("ResolvedRefs", "Accepted", "Programmed"):
        assert listener_condition(dag, gateway_name, "https", condition_type, "infra")[0] == "True"
    assert served_ports(dag, gateway_name) == {443}


def test_cross_namespace_ca_with_reference_grant() -> None:
    gateway_name = "gateway-with-invalid-client-cert-validation"
    grant = reference_grant(
        "gateways-read-ca",
        "web",
        from_kind="Gateway",
        from_namespace="infra",
        to_kind="ConfigMap",
    )
    dag = dag_of(
        infra_gateway(gateway_name, listeners=INVALID_LISTENERS, tls=INVALID_FRONTEND), grant
    )
    assert listener_condition(dag, gateway_name, "https-grant-missing", "Accepted", "infra") == (
        "True",
        "Accepted",
    )
    found = chain_validation(dag, gateway_name, 6443)
    assert found is not None and found.trusted_ca == CA.pem


def test_invalid_default_validation_affects_only_https() -> None:
    gateway_name = "invalid-default-client-validation-config"
    dag = dag_of(
        infra_gateway(
            gateway_name,
            listeners=[
                https("https", 443),
                listener("http", 80, allowed_routes=allowed_routes("Same")),
            ],
            tls=frontend(
                validation(ca_ref("does-not-exist")), p80=validation(ca_ref("per-port-ca"))
            ),
        ),
        http_route(
            "route",
            namespace="infra",
            parents=[parent_ref(gateway_name)],
            hostnames=["example.org"],
            rules=[rule(backend_ref("infra-v1", 8080))],
        ),
    )
    for condition_type in ("ResolvedRefs", "Accepted", "Programmed"):
        assert listener_condition(dag, gateway_name, "http", condition_type, "infra")[0] == "True"
    assert listener_condition(dag, gateway_name, "https", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCACertificateRef",
    )
    assert listener_condition(dag, gateway_name, "https", "Accepted", "infra") == (
        "False",
        "NoValidCACertificate",
    )
    assert listener_condition(dag, gateway_name, "https", "Programmed", "infra")[0] == "False"
    assert served_ports(dag, gateway_name) == {80}
    # Reported with the fields to fix: the configuration, and the reference.
    fields = {(p.field, p.reason) for p in dag.problems if p.object.name == gateway_name}
    assert fields == {
        ("spec.tls.frontend.default.validation", "NoValidCACertificate"),
        ("spec.tls.frontend.default.validation.caCertificateRefs[0]", "InvalidCACertificateRef"),
    }


# --- beyond the suite ---------------------------------------------------------------------------


def test_some_references_invalid_uses_the_others() -> None:
    dag = dag_of(
        infra_gateway(
            "gw",
            listeners=[https("https", 443)],
            tls=frontend(validation(ca_ref("missing"), ca_ref("ca"), ca_ref("per-port-ca"))),
        )
    )
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCACertificateRef",
    )
    assert listener_condition(dag, "gw", "https", "Accepted", "infra") == ("True", "Accepted")
    found = chain_validation(dag, "gw", 443)
    assert found is not None and found.trusted_ca == CA.pem + PER_PORT_CA.pem


def test_ca_from_a_secret() -> None:
    dag = dag_of(
        secret("ca-secret", {"ca.crt": CA.pem}, namespace="infra"),
        infra_gateway(
            "gw",
            listeners=[https("https", 443)],
            tls=frontend(validation(ca_ref("ca-secret", "Secret"))),
        ),
    )
    found = chain_validation(dag, "gw", 443)
    assert found is not None and found.trusted_ca == CA.pem


def test_ca_bundle_holding_a_private_key_is_refused() -> None:
    leaked = CA.pem.decode() + SERVER.private_key.decode()
    dag = dag_of(
        config_map("leaky", {"ca.crt": leaked}, namespace="infra"),
        infra_gateway(
            "gw", listeners=[https("https", 443)], tls=frontend(validation(ca_ref("leaky")))
        ),
    )
    assert listener_condition(dag, "gw", "https", "ResolvedRefs", "infra") == (
        "False",
        "InvalidCACertificateRef",
    )
    assert listener_condition(dag, "gw", "https", "Accepted", "infra") == (
        "False",
        "NoValidCACertificate",
    )
    [listener_status] = status(dag, "Gateway", "gw", "infra")["listeners"]
    messages = " ".join(c["message"] for c in listener_status["conditions"])
    assert "private key" in messages
    assert "BEGIN" not in messages
    assert served_ports(dag, "gw") == set()


def test_per_port_without_validation_overrides_the_default() -> None:
    dag = dag_of(
        infra_gateway(
            "gw",
            listeners=[https("https", 443), https("open", 8443, hostname="open.example.org")],
            tls=frontend(validation(ca_ref("ca")), p8443={}),
        )
    )
    assert chain_validation(dag, "gw", 443) is not None
    assert chain_validation(dag, "gw", 8443) is None


def test_tls_terminate_listener_validates_clients() -> None:
    tls_listener = listener(
        "tls",
        9443,
        "TLS",
        hostname="tcp.example.org",
        allowed_routes=allowed_routes("Same", kinds=["TLSRoute"]),
        tls={"mode": "Terminate", "certificateRefs": [{"name": "server"}]},
    )
    route = http_route(
        "terminated",
        namespace="infra",
        parents=[parent_ref("gw")],
        rules=[rule(backend_ref("echo", 3000))],
        kind="TLSRoute",
        hostnames=["tcp.example.org"],
    )
    dag = dag_of(
        service("echo", namespace="infra", ports=[service_port(3000, protocol="TCP")]),
        infra_gateway("gw", listeners=[tls_listener], tls=frontend(validation(ca_ref("ca")))),
        route,
    )
    [tcp] = [v for v in dag.groups["infra/gw"].listeners if isinstance(v, TcpListener)]
    [chain] = tcp.filter_chains
    assert chain.certificates and chain.client_validation is not None
    assert chain.client_validation.trusted_ca == CA.pem


def test_listener_set_listeners_get_their_gateways_validation() -> None:
    dag = dag_of(
        infra_gateway(
            "gw",
            listeners=[https("https", 443)],
            allowed_listeners="Same",
            tls=frontend(validation(ca_ref("ca")), p8443=validation(ca_ref("missing"))),
        ),
        listener_set(
            "extra",
            [
                https("added", 443, hostname="added.example.org"),
                https("broken", 8443, hostname="broken.example.org"),
            ],
            namespace="infra",
        ),
    )
    found = chain_validation(dag, "gw", 443)
    assert found is not None and found.trusted_ca == CA.pem
    set_status = status(dag, "ListenerSet", "extra", "infra")
    [broken] = [entry for entry in set_status["listeners"] if entry["name"] == "broken"]
    accepted = next(c for c in broken["conditions"] if c["type"] == "Accepted")
    assert (accepted["status"], accepted["reason"]) == ("False", "NoValidCACertificate")
    assert 8443 not in served_ports(dag, "gw")


def test_a_changed_ca_reaches_an_incremental_build() -> None:
    """ConfigMaps are read for Gateways' CAs too, not only for BackendTLSPolicies: a CA
    rotated in its ConfigMap changes what the next build serves."""
    gw = infra_gateway(
        "gw", listeners=[https("https", 443)], tls=frontend(validation(ca_ref("ca")))
    )
    rotated = config_map("ca", {"ca.crt": PER_PORT_CA.pem.decode()}, namespace="infra")
    before = [obj for document in (*WORLD, gw) for obj in typed(document)]
    after = [
        *(obj for obj in before if obj.key != ObjectKey("ConfigMap", "infra", "ca")),
        *typed(rotated),
    ]
    builder = IncrementalBuild()
    builder.build(Store.from_objects(before))
    result = builder.build(Store.from_objects(after))
    assert result.dag == build(Store.from_objects(after))
    found = chain_validation(result.dag, "gw", 443)
    assert found is not None and found.trusted_ca == PER_PORT_CA.pem
