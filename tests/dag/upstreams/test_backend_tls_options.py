"""BackendTLSPolicy `options` of dragoman's: a client certificate per targeted Service (before
the Gateway's), TLS versions, cipher suites and groups checked against what Envoy accepts,
and every bad value or unknown dragoman.dev/ key refusing the policy, naming the key."""

from __future__ import annotations

from typing import Any

import pytest

from dragoman.dag.backend_tls_options import CIPHER_SUITE_NAMES, ECDH_CURVE_NAMES
from dragoman.dag.model import Dag, DnsCluster, TlsParameters, UpstreamTls
from tests.support.builders import (
    Object,
    backend_ref,
    backend_tls_policy,
    external_service,
    gateway,
    gateway_class,
    http_route,
    match,
    rule,
    secret,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text, condition, route_problems, status

CA = certificate_authority("options CA")
ONE = CA.issue("one.client.example")
TWO = CA.issue("two.client.example")
GATEWAYS = CA.issue("gateway.client.example")
ROUTE = http_route(
    "r",
    rules=[
        rule(backend_ref("one", 443), matches=[match("/one")]),
        rule(backend_ref("two", 443), matches=[match("/two")]),
    ],
)
SECRETS = [
    tls_secret("one-client", ONE.certificate, ONE.private_key),
    tls_secret("two-client", TWO.certificate, TWO.private_key),
    tls_secret("gateway-client", GATEWAYS.certificate, GATEWAYS.private_key),
    secret("opaque", {"tls.crt": b"x"}, secret_type="Opaque"),
]


def policy(name: str, service: str, options: dict[str, str] | None) -> Object:
    return backend_tls_policy(
        name, service, f"{service}.partner.example", well_known="System", options=options
    )


def build(*documents: Object, gateway_tls: Object | None = None) -> Dag:
    return build_text(
        gateway_class(),
        gateway("gw", 80, tls=gateway_tls),
        external_service("one", "one.partner.example", 443),
        external_service("two", "two.partner.example", 443),
        *SECRETS,
        ROUTE,
        *documents,
    )


def tls_of(dag: Dag, hostname: str) -> UpstreamTls:
    [cluster] = [
        c for c in dag.clusters.values() if isinstance(c, DnsCluster) and c.hostname == hostname
    ]
    assert cluster.tls is not None
    return cluster.tls


def conditions(dag: Dag, name: str) -> dict[str, tuple[str, str]]:
    [ancestor] = status(dag, "BackendTLSPolicy", name)["ancestors"]
    return {c["type"]: condition(ancestor["conditions"], c["type"]) for c in ancestor["conditions"]}


def message(dag: Dag, name: str, type: str) -> str:
    [ancestor] = status(dag, "BackendTLSPolicy", name)["ancestors"]
    [found] = [c for c in ancestor["conditions"] if c["type"] == type]
    return str(found["message"])


def presented(dag: Dag, hostname: str) -> str | None:
    certificate = tls_of(dag, hostname).client_certificate
    return certificate.secret.name if certificate is not None else None


def test_each_policy_presents_its_own_certificate_to_its_services() -> None:
    dag = build(
        policy("one", "one", {"dragoman.dev/client-certificate": "one-client"}),
        policy("two", "two", {"dragoman.dev/client-certificate": "two-client"}),
    )
    assert presented(dag, "one.partner.example") == "one-client"
    assert presented(dag, "two.partner.example") == "two-client"
    assert conditions(dag, "one") == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }


def test_the_policys_certificate_takes_precedence_over_the_gateways() -> None:
    dag = build(
        policy("one", "one", {"dragoman.dev/client-certificate": "one-client"}),
        gateway_tls={"backend": {"clientCertificateRef": {"name": "gateway-client"}}},
    )
    assert presented(dag, "one.partner.example") == "one-client"
    # The other Service, without an option, presents the Gateway's.
    assert presented(dag, "two.partner.example") == "gateway-client"


@pytest.mark.parametrize(
    ("name", "words"), [("missing", "not found"), ("opaque", "has type 'Opaque'")]
)
def test_an_unusable_certificate_refuses_the_policy(name: str, words: str) -> None:
    dag = build(policy("one", "one", {"dragoman.dev/client-certificate": name}))
    assert conditions(dag, "one") == {
        "Accepted": ("False", "Invalid"),
        "ResolvedRefs": ("False", "InvalidClientCertificateRef"),
    }
    text = message(dag, "one", "Accepted")
    assert "options[dragoman.dev/client-certificate]" in text and words in text
    # Requests to the Service fail rather than go without the certificate.
    assert all(c.hostname != "one.partner.example" for c in dag.clusters.values())  # type: ignore[union-attr]
    assert [p.reason for p in route_problems(dag)] == ["InvalidBackendTLSPolicy"]


def test_tls_versions_ciphers_and_curves_become_tls_parameters() -> None:
    options = {
        "dragoman.dev/min-tls-version": "TLSv1_2",
        "dragoman.dev/max-tls-version": "TLSv1_3",
        "dragoman.dev/cipher-suites": "ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256",
        "dragoman.dev/ecdh-curves": "X25519,P-256",
    }
    dag = build(policy("one", "one", options))
    assert tls_of(dag, "one.partner.example").parameters == TlsParameters(
        "TLSv1_2",
        "TLSv1_3",
        ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
        ("X25519", "P-256"),
    )
    assert tls_of(dag, "two.partner.example").parameters is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # Envoy's client maximum is TLSv1_2: a minimum above it raises the maximum too.
        ({"dragoman.dev/min-tls-version": "TLSv1_3"}, ("TLSv1_3", "TLSv1_3")),
        ({"dragoman.dev/min-tls-version": "TLSv1_1"}, ("TLSv1_1", None)),
        ({"dragoman.dev/max-tls-version": "TLSv1_1"}, ("TLSv1_1", "TLSv1_1")),
        ({"dragoman.dev/max-tls-version": "TLSv1_3"}, (None, "TLSv1_3")),
    ],
)
def test_one_end_of_the_versions_moves_envoys_other_default(
    options: dict[str, str], expected: tuple[str | None, str | None]
) -> None:
    parameters = tls_of(build(policy("one", "one", options)), "one.partner.example").parameters
    assert parameters is not None
    assert (parameters.min_version, parameters.max_version) == expected


@pytest.mark.parametrize(
    ("options", "named", "words"),
    [
        ({"dragoman.dev/min-tls-version": "TLSv1.3"}, "min-tls-version", "is not a TLS version"),
        ({"dragoman.dev/max-tls-version": "1.2"}, "max-tls-version", "is not a TLS version"),
        (
            {"dragoman.dev/min-tls-version": "TLSv1_3", "dragoman.dev/max-tls-version": "TLSv1_2"},
            "min-tls-version",
            "is above",
        ),
        ({"dragoman.dev/cipher-suites": "TLS_AES_128_GCM_SHA256"}, "cipher-suites", "not known"),
        ({"dragoman.dev/cipher-suites": ""}, "cipher-suites", "not known"),
        ({"dragoman.dev/ecdh-curves": "X25519,P-256,X25519"}, "ecdh-curves", "twice"),
        ({"dragoman.dev/ecdh-curves": "P-224"}, "ecdh-curves", "not known"),
        ({"dragoman.dev/min-tls-versoin": "TLSv1_3"}, "min-tls-versoin", "unknown option"),
    ],
)
def test_bad_options_refuse_the_policy_naming_the_key(
    options: dict[str, str], named: str, words: str
) -> None:
    dag = build(policy("one", "one", options))
    assert conditions(dag, "one")["Accepted"] == ("False", "Invalid")
    text = message(dag, "one", "Accepted")
    assert f"options[dragoman.dev/{named}]" in text and words in text
    assert all(c.hostname != "one.partner.example" for c in dag.clusters.values())  # type: ignore[union-attr]
    # The rest is served.
    assert tls_of(dag, "two.partner.example").parameters is None


def test_other_implementations_options_are_not_read() -> None:
    dag = build(policy("one", "one", {"example.com/ciphers": "anything"}))
    assert conditions(dag, "one")["Accepted"] == ("True", "Accepted")
    assert tls_of(dag, "one.partner.example").parameters is None


def test_every_known_name_is_accepted() -> None:
    # (tests/envoy/resources/test_upstream_tls_options.py proves Envoy accepts them all.)
    options: dict[str, Any] = {
        "dragoman.dev/cipher-suites": ",".join(CIPHER_SUITE_NAMES),
        "dragoman.dev/ecdh-curves": ",".join(ECDH_CURVE_NAMES),
    }
    parameters = tls_of(build(policy("one", "one", options)), "one.partner.example").parameters
    assert parameters is not None
    assert parameters.cipher_suites == CIPHER_SUITE_NAMES
    assert parameters.ecdh_curves == ECDH_CURVE_NAMES


def test_a_bad_option_and_a_bad_validation_are_both_said() -> None:
    bad = backend_tls_policy(
        "one",
        "one",
        "one.partner.example",
        well_known="example.com/corporate",
        options={"dragoman.dev/max-tls-version": "TLSv2"},
    )
    dag = build(bad)
    assert conditions(dag, "one")["Accepted"] == ("False", "Invalid")
    text = message(dag, "one", "Accepted")
    assert "wellKnownCACertificates" in text and "options[dragoman.dev/max-tls-version]" in text
