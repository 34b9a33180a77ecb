"""BackendTLSPolicy through the build: the TLS it gives a Service port, and its status.

The scenarios follow the Gateway API v1.6.1 conformance tests backendtlspolicy*.yaml
(normative, SAN, conflict resolution, invalid CA certificate ref, invalid kind, observed
generation) and their status expectations, with manifests written for these tests.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from dragoman.dag.model import Dag, DirectResponse, EdsCluster, SubjectAltNameMatch
from tests.support.builders import (
    Object,
    backend_ref,
    backend_tls_policy,
    config_map,
    gateway,
    http_route,
    listener,
    local_ref,
    match,
    parent_ref,
    rule,
    secret,
    service,
    service_port,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import build_text

NS = "gateway-conformance-infra"
CA = certificate_authority("conformance CA")
OTHER_CA = certificate_authority("unrelated CA")
HOST = "abc.example.com"
OLDER = "2026-01-01T00:00:00Z"
NEWER = "2026-01-02T00:00:00Z"
CA_REF = local_ref("ConfigMap", "tls-checks-ca-certificate")
INFRA = [
    gateway("same-namespace", namespace=NS, listeners=[listener()]),
    config_map("tls-checks-ca-certificate", {"ca.crt": CA.pem.decode()}, namespace=NS),
    config_map("mismatch-ca-certificate", {"ca.crt": OTHER_CA.pem.decode()}, namespace=NS),
]

# This file's world: the TLS backend's Services (every port to targetPort 8443), routes
# attached to the Gateway above, policies with its CA created at one time.
backend_service = partial(service, namespace=NS, selector={"app": "tls-backend"})
BTLS = service_port(443, 8443, name="btls")
HTTPS = service_port(443, 8443, name="https")
HTTPS_1 = service_port(443, 8443, name="https-1")
HTTPS_2 = service_port(8443, 8443, name="https-2")
BTLS_HTTPS = service_port(443, 8443, name="btls", app_protocol="HTTPS")
HTTPS_HTTPS = service_port(443, 8443, name="https", app_protocol="HTTPS")
route = partial(http_route, namespace=NS, parents=[parent_ref("same-namespace")])
policy = partial(backend_tls_policy, namespace=NS, ca_refs=[CA_REF], created=OLDER, generation=1)


def to(service_name: str, port: int) -> Object:
    """A rule sending /<service>-<port> to that Service port."""
    exact = match(f"/{service_name}-{port}", path_type="Exact")
    return rule(backend_ref(service_name, port), matches=[exact])


def policy_conditions(dag: Dag, name: str) -> dict[str, dict[str, Any]]:
    """The conditions of the policy's one ancestor, which must be the Gateway."""
    key = next(k for k in dag.statuses if k.kind == "BackendTLSPolicy" and k.name == name)
    [ancestor] = dag.statuses[key].status["ancestors"]
    assert ancestor["ancestorRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": NS,
        "name": "same-namespace",
    }
    assert ancestor["controllerName"] == "dragoman.dev/gateway-controller"
    return {c["type"]: c for c in ancestor["conditions"]}


def state(conditions: dict[str, dict[str, Any]], type: str) -> tuple[str, str]:
    found = conditions[type]
    assert found["message"]
    return found["status"], found["reason"]


def route_refs(dag: Dag, name: str = "r") -> tuple[str, str]:
    key = next(k for k in dag.statuses if k.kind == "HTTPRoute" and k.name == name)
    [parent] = dag.statuses[key].status["parents"]
    found = {c["type"]: c for c in parent["conditions"]}
    return found["ResolvedRefs"]["status"], found["ResolvedRefs"]["reason"]


def eds(dag: Dag, service: str, port: int) -> EdsCluster:
    cluster = dag.clusters[f"{NS}/{service}/{port}"]
    assert isinstance(cluster, EdsCluster)
    return cluster


# --- normative ---------------------------------------------------------------------------------


def test_a_policy_gives_its_service_port_verified_tls() -> None:
    dag = build_text(
        *INFRA,
        backend_service("backendtlspolicy-test", ports=[BTLS]),
        route("r", rules=[to("backendtlspolicy-test", 443)]),
        policy("normative-test", "backendtlspolicy-test", HOST, section="btls"),
    )

    conditions = policy_conditions(dag, "normative-test")
    assert state(conditions, "Accepted") == ("True", "Accepted")
    assert state(conditions, "ResolvedRefs") == ("True", "ResolvedRefs")
    assert route_refs(dag) == ("True", "ResolvedRefs")
    tls = eds(dag, "backendtlspolicy-test", 443).tls
    assert tls is not None
    assert tls.sni == "abc.example.com"
    assert tls.subject_alt_names == (SubjectAltNameMatch("DNS", "abc.example.com"),)
    assert tls.trusted_ca == CA.pem
    assert tls.policy is not None and tls.policy.name == "normative-test"


def test_a_policy_with_an_unrelated_ca_or_another_hostname_is_accepted_and_fails_at_runtime() -> (
    None
):
    dag = build_text(
        *INFRA,
        backend_service("host-mismatch", ports=[BTLS_HTTPS]),
        backend_service("cert-mismatch", ports=[BTLS_HTTPS]),
        route("r", rules=[to("host-mismatch", 443), to("cert-mismatch", 443)]),
        policy("host-mismatch", "host-mismatch", "mismatch.example.com", section="btls"),
        policy(
            "cert-mismatch",
            "cert-mismatch",
            HOST,
            section="btls",
            ca_refs=[local_ref("ConfigMap", "mismatch-ca-certificate")],
        ),
    )

    for name in ("host-mismatch", "cert-mismatch"):
        assert state(policy_conditions(dag, name), "Accepted") == ("True", "Accepted")
    host = eds(dag, "host-mismatch", 443).tls
    assert host is not None and host.sni == "mismatch.example.com"
    cert = eds(dag, "cert-mismatch", 443).tls
    assert cert is not None and cert.trusted_ca == OTHER_CA.pem


# --- subjectAltNames -----------------------------------------------------------------------

ABC = {"type": "Hostname", "hostname": "abc.example.com"}
SPIFFE = {"type": "URI", "uri": "spiffe://abc.example.com/test-identity"}
SANS = [
    ([ABC], (("DNS", "abc.example.com"),)),
    ([{"type": "Hostname", "hostname": "dce.example.com"}], (("DNS", "dce.example.com"),)),
    ([SPIFFE], (("URI", "spiffe://abc.example.com/test-identity"),)),
    (
        [SPIFFE, ABC],
        (("URI", "spiffe://abc.example.com/test-identity"), ("DNS", "abc.example.com")),
    ),
]


@pytest.mark.parametrize(("sans", "expected"), SANS)
def test_subject_alt_names_replace_the_hostname_as_the_verified_names(
    sans: list[Object], expected: tuple[tuple[str, str], ...]
) -> None:
    dag = build_text(
        *INFRA,
        backend_service("san", ports=[BTLS]),
        route("r", rules=[to("san", 443)]),
        policy("san", "san", HOST, section="btls", subject_alt_names=sans),
    )

    tls = eds(dag, "san", 443).tls
    assert tls is not None
    assert tls.sni == "abc.example.com"  # still the SNI
    assert tls.subject_alt_names == tuple(SubjectAltNameMatch(*san) for san in expected)
    assert state(policy_conditions(dag, "san"), "Accepted") == ("True", "Accepted")


# --- conflict resolution -------------------------------------------------------------------


@pytest.mark.parametrize("section", [None, "https-1"])
def test_of_two_policies_on_the_same_target_the_older_wins(section: str | None) -> None:
    dag = build_text(
        *INFRA,
        backend_service("conflicted", ports=[HTTPS_1, HTTPS_2]),
        route("r", rules=[to("conflicted", 443)]),
        # The newer one comes first in the input: order must not matter.
        policy("conflicted-2", "conflicted", HOST, section=section, created=NEWER),
        policy("conflicted-1", "conflicted", "other.example.com", section=section, created=OLDER),
    )

    assert state(policy_conditions(dag, "conflicted-1"), "Accepted") == ("True", "Accepted")
    loser = policy_conditions(dag, "conflicted-2")
    assert state(loser, "Accepted") == ("False", "Conflicted")
    assert "conflicted-1" in loser["Accepted"]["message"]
    tls = eds(dag, "conflicted", 443).tls
    assert tls is not None and tls.sni == "other.example.com"
    assert route_refs(dag) == ("True", "ResolvedRefs")


def test_equal_creation_times_fall_back_to_namespace_and_name() -> None:
    dag = build_text(
        *INFRA,
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("b-policy", "svc", "b.example.com"),
        policy("a-policy", "svc", "a.example.com"),
    )

    assert state(policy_conditions(dag, "a-policy"), "Accepted") == ("True", "Accepted")
    assert state(policy_conditions(dag, "b-policy"), "Accepted") == ("False", "Conflicted")


def test_a_policy_on_a_port_and_one_on_the_whole_service_do_not_conflict() -> None:
    dag = build_text(
        *INFRA,
        backend_service("not-conflicted", ports=[HTTPS_1, HTTPS_2]),
        route("r", rules=[to("not-conflicted", 443), to("not-conflicted", 8443)]),
        policy("with-section", "not-conflicted", "other.example.com", section="https-1"),
        policy("without-section", "not-conflicted", HOST),
    )

    for name in ("with-section", "without-section"):
        assert state(policy_conditions(dag, name), "Accepted") == ("True", "Accepted")
    port_443 = eds(dag, "not-conflicted", 443).tls
    port_8443 = eds(dag, "not-conflicted", 8443).tls
    assert port_443 is not None and port_443.sni == "other.example.com"  # the port's own
    assert port_8443 is not None and port_8443.sni == "abc.example.com"  # the Service's


# --- invalid CA certificate references -----------------------------------------------------

# A bundle with a private key appended: served to Envoy, the key would travel with it.
WITH_KEY = CA.pem.decode() + OTHER_CA.issue("leaf.example.com").private_key.decode()
MALFORMED = [
    config_map("malformed-ca-certificate", {}, namespace=NS),
    config_map("not-pem", {"ca.crt": "hello"}, namespace=NS),
    config_map("with-key", {"ca.crt": WITH_KEY}, namespace=NS),
]

INVALID_REFS = [
    (local_ref("ConfigMap", "nonexistent-ca-certificate"), "InvalidCACertificateRef",
     "ConfigMap gateway-conformance-infra/nonexistent-ca-certificate not found"),
    (local_ref("ConfigMap", "malformed-ca-certificate"), "InvalidCACertificateRef",
     "has no 'ca.crt' key"),
    (local_ref("ConfigMap", "not-pem"), "InvalidCACertificateRef", "is not PEM CA certificates"),
    (local_ref("ConfigMap", "with-key"), "InvalidCACertificateRef", "holds a private key"),
    (local_ref("Secret", "no-such-secret"), "InvalidCACertificateRef",
     "Secret gateway-conformance-infra/no-such-secret not found"),
    (local_ref("InvalidKind", "invalid-kind", "invalid.io"), "InvalidKind",
     "'invalid.io/InvalidKind' is not supported"),
]  # fmt: skip


@pytest.mark.parametrize(("ca_ref", "reason", "words"), INVALID_REFS)
def test_a_policy_without_a_valid_ca_is_not_accepted_and_its_backend_fails(
    ca_ref: Object, reason: str, words: str
) -> None:
    dag = build_text(
        *INFRA,
        *MALFORMED,
        backend_service("invalid", ports=[HTTPS_HTTPS]),
        route("r", rules=[to("invalid", 443)]),
        policy("invalid", "invalid", HOST, ca_refs=[ca_ref]),
    )

    conditions = policy_conditions(dag, "invalid")
    assert state(conditions, "Accepted") == ("False", "NoValidCACertificate")
    assert state(conditions, "ResolvedRefs") == ("False", reason)
    assert words in conditions["ResolvedRefs"]["message"]
    assert "validation.caCertificateRefs[0]" in conditions["ResolvedRefs"]["message"]
    # Requests to the backend fail with a 5xx: the rule has nothing valid to send to.
    assert dag.clusters == {}
    [table] = dag.groups[""].route_tables
    [vhost] = table.virtual_hosts
    assert [r.action for r in vhost.routes] == [DirectResponse(500)]
    assert route_refs(dag) == ("False", "InvalidBackendTLSPolicy")


def test_some_invalid_references_leave_the_valid_ones_in_use() -> None:
    refs = [CA_REF, local_ref("ConfigMap", "missing")]
    dag = build_text(
        *INFRA,
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("p", "svc", HOST, ca_refs=refs),
    )

    conditions = policy_conditions(dag, "p")
    assert state(conditions, "Accepted") == ("True", "Accepted")
    assert state(conditions, "ResolvedRefs") == ("False", "InvalidCACertificateRef")
    assert "validation.caCertificateRefs[1]" in conditions["ResolvedRefs"]["message"]
    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca == CA.pem


def test_a_ca_in_a_secret() -> None:
    dag = build_text(
        *INFRA,
        secret("ca-secret", {"ca.crt": CA.pem}, namespace=NS),
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("p", "svc", HOST, ca_refs=[local_ref("Secret", "ca-secret")]),
    )

    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca == CA.pem
    assert state(policy_conditions(dag, "p"), "ResolvedRefs") == ("True", "ResolvedRefs")


def test_well_known_cas_other_than_system_are_invalid() -> None:
    dag = build_text(
        *INFRA,
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("p", "svc", HOST, ca_refs=(), well_known="example.com/corporate"),
    )

    assert state(policy_conditions(dag, "p"), "Accepted") == ("False", "Invalid")
    assert dag.clusters == {}


def test_well_known_system_cas_trust_the_system_bundle() -> None:
    dag = build_text(
        *INFRA,
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("p", "svc", HOST, ca_refs=(), well_known="System"),
    )

    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca is None and tls.sni == "abc.example.com"


def test_a_section_name_that_names_no_port_is_target_not_found() -> None:
    dag = build_text(
        *INFRA,
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        policy("p", "svc", HOST, section="nope"),
    )

    conditions = policy_conditions(dag, "p")
    assert state(conditions, "Accepted") == ("False", "TargetNotFound")
    assert "has no port named 'nope'" in conditions["Accepted"]["message"]
    assert eds(dag, "svc", 443).tls is None


# --- status bookkeeping --------------------------------------------------------------------


def test_conditions_carry_the_policy_generation() -> None:
    dag = build_text(
        *INFRA,
        backend_service("observed-generation-bump-test", ports=[HTTPS]),
        route("r", rules=[to("observed-generation-bump-test", 443)]),
        policy("observed", "observed-generation-bump-test", HOST, section="https", generation=7),
    )

    conditions = policy_conditions(dag, "observed")
    assert {c["observedGeneration"] for c in conditions.values()} == {7}


def test_a_policy_no_route_of_ours_reaches_has_no_ancestors() -> None:
    dag = build_text(*INFRA, backend_service("svc", ports=[HTTPS]), policy("p", "svc", HOST))

    [status] = [s for k, s in dag.statuses.items() if k.kind == "BackendTLSPolicy"]
    assert status.status == {"ancestors": []}


def test_every_gateway_of_the_routes_is_an_ancestor() -> None:
    dag = build_text(
        *INFRA,
        gateway("second", namespace=NS, listeners=[listener()]),
        backend_service("svc", ports=[HTTPS]),
        route("r", rules=[to("svc", 443)]),
        route("r2", rules=[to("svc", 443)], parents=[parent_ref("second")]),
        policy("p", "svc", HOST),
    )

    [status] = [s for k, s in dag.statuses.items() if k.kind == "BackendTLSPolicy"]
    names = [a["ancestorRef"]["name"] for a in status.status["ancestors"]]
    assert names == ["same-namespace", "second"]
