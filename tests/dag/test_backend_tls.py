"""BackendTLSPolicy through the build: the TLS it gives a Service port, and its status.

The scenarios follow the Gateway API v1.6.1 conformance tests backendtlspolicy*.yaml
(normative, SAN, conflict resolution, invalid CA certificate ref, invalid kind, observed
generation) and their status expectations, with manifests written for these tests.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from dragoman.dag.model import Dag, DirectResponse, EdsCluster, SubjectAltNameMatch
from tests.support.certificates import certificate_authority
from tests.support.upstream_builds import build_yaml

NS = "gateway-conformance-infra"
CA = certificate_authority("conformance CA")
OTHER_CA = certificate_authority("unrelated CA")


def indented(pem: bytes) -> str:
    return "\n".join("    " + line for line in pem.decode().splitlines())


INFRA = f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: same-namespace, namespace: {NS}}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: tls-checks-ca-certificate, namespace: {NS}}}
data:
  ca.crt: |
{indented(CA.pem)}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: mismatch-ca-certificate, namespace: {NS}}}
data:
  ca.crt: |
{indented(OTHER_CA.pem)}
"""


def service(name: str, *ports: tuple[str, int], app_protocol: str = "") -> str:
    extra = f", appProtocol: {app_protocol}" if app_protocol else ""
    listed = ", ".join(
        f"{{name: {port_name}, port: {number}, targetPort: 8443{extra}}}"
        for port_name, number in ports
    )
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {NS}}}
spec: {{selector: {{app: tls-backend}}, ports: [{listed}]}}
"""


def route(*backends: tuple[str, int], name: str = "r") -> str:
    rules = ", ".join(
        f"{{matches: [{{path: {{type: Exact, value: /{svc}-{port}}}}}], "
        f"backendRefs: [{{name: {svc}, port: {port}}}]}}"
        for svc, port in backends
    )
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: {NS}}}
spec:
  parentRefs: [{{name: same-namespace}}]
  rules: [{rules}]
"""


def policy(
    name: str,
    target: str,
    hostname: str = "abc.example.com",
    *,
    section: str | None = None,
    ca_refs: str = '[{group: "", kind: ConfigMap, name: tls-checks-ca-certificate}]',
    created: str = "2026-01-01T00:00:00Z",
    generation: int = 1,
    extra: str = "",
) -> str:
    section_field = f", sectionName: {section}" if section else ""
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: {name}, namespace: {NS}, creationTimestamp: "{created}",
  generation: {generation}}}
spec:
  targetRefs: [{{group: "", kind: Service, name: {target}{section_field}}}]
  validation: {{hostname: {hostname}, caCertificateRefs: {ca_refs}{extra}}}
"""


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
    dag = build_yaml(
        INFRA,
        service("backendtlspolicy-test", ("btls", 443)),
        route(("backendtlspolicy-test", 443)),
        policy("normative-test", "backendtlspolicy-test", section="btls"),
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
    dag = build_yaml(
        INFRA,
        service("host-mismatch", ("btls", 443), app_protocol="HTTPS"),
        service("cert-mismatch", ("btls", 443), app_protocol="HTTPS"),
        route(("host-mismatch", 443), ("cert-mismatch", 443)),
        policy("host-mismatch", "host-mismatch", "mismatch.example.com", section="btls"),
        policy(
            "cert-mismatch",
            "cert-mismatch",
            section="btls",
            ca_refs='[{group: "", kind: ConfigMap, name: mismatch-ca-certificate}]',
        ),
    )

    for name in ("host-mismatch", "cert-mismatch"):
        assert state(policy_conditions(dag, name), "Accepted") == ("True", "Accepted")
    host = eds(dag, "host-mismatch", 443).tls
    assert host is not None and host.sni == "mismatch.example.com"
    cert = eds(dag, "cert-mismatch", 443).tls
    assert cert is not None and cert.trusted_ca == OTHER_CA.pem


# --- subjectAltNames -----------------------------------------------------------------------

SANS = [
    ("[{type: Hostname, hostname: abc.example.com}]", (("DNS", "abc.example.com"),)),
    ("[{type: Hostname, hostname: dce.example.com}]", (("DNS", "dce.example.com"),)),
    (
        "[{type: URI, uri: 'spiffe://abc.example.com/test-identity'}]",
        (("URI", "spiffe://abc.example.com/test-identity"),),
    ),
    (
        "[{type: URI, uri: 'spiffe://abc.example.com/test-identity'}, "
        "{type: Hostname, hostname: abc.example.com}]",
        (("URI", "spiffe://abc.example.com/test-identity"), ("DNS", "abc.example.com")),
    ),
]


@pytest.mark.parametrize(("sans", "expected"), SANS)
def test_subject_alt_names_replace_the_hostname_as_the_verified_names(
    sans: str, expected: tuple[tuple[str, str], ...]
) -> None:
    dag = build_yaml(
        INFRA,
        service("san", ("btls", 443)),
        route(("san", 443)),
        policy("san", "san", section="btls", extra=f", subjectAltNames: {sans}"),
    )

    tls = eds(dag, "san", 443).tls
    assert tls is not None
    assert tls.sni == "abc.example.com"  # still the SNI
    assert tls.subject_alt_names == tuple(SubjectAltNameMatch(*san) for san in expected)
    assert state(policy_conditions(dag, "san"), "Accepted") == ("True", "Accepted")


# --- conflict resolution -------------------------------------------------------------------

OLDER = "2026-01-01T00:00:00Z"
NEWER = "2026-01-02T00:00:00Z"


@pytest.mark.parametrize("section", [None, "https-1"])
def test_of_two_policies_on_the_same_target_the_older_wins(section: str | None) -> None:
    dag = build_yaml(
        INFRA,
        service("conflicted", ("https-1", 443), ("https-2", 8443)),
        route(("conflicted", 443)),
        # The newer one comes first in the input: order must not matter.
        policy("conflicted-2", "conflicted", "abc.example.com", section=section, created=NEWER),
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
    dag = build_yaml(
        INFRA,
        service("svc", ("https", 443)),
        route(("svc", 443)),
        policy("b-policy", "svc", "b.example.com"),
        policy("a-policy", "svc", "a.example.com"),
    )

    assert state(policy_conditions(dag, "a-policy"), "Accepted") == ("True", "Accepted")
    assert state(policy_conditions(dag, "b-policy"), "Accepted") == ("False", "Conflicted")


def test_a_policy_on_a_port_and_one_on_the_whole_service_do_not_conflict() -> None:
    dag = build_yaml(
        INFRA,
        service("not-conflicted", ("https-1", 443), ("https-2", 8443)),
        route(("not-conflicted", 443), ("not-conflicted", 8443)),
        policy("with-section", "not-conflicted", "other.example.com", section="https-1"),
        policy("without-section", "not-conflicted", "abc.example.com"),
    )

    for name in ("with-section", "without-section"):
        assert state(policy_conditions(dag, name), "Accepted") == ("True", "Accepted")
    port_443 = eds(dag, "not-conflicted", 443).tls
    port_8443 = eds(dag, "not-conflicted", 8443).tls
    assert port_443 is not None and port_443.sni == "other.example.com"  # the port's own
    assert port_8443 is not None and port_8443.sni == "abc.example.com"  # the Service's


# --- invalid CA certificate references -----------------------------------------------------

MALFORMED = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: malformed-ca-certificate, namespace: {NS}}}
data: {{}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: not-pem, namespace: {NS}}}
data: {{ca.crt: "hello"}}
"""

INVALID_REFS = [
    ('[{group: "", kind: ConfigMap, name: nonexistent-ca-certificate}]', "InvalidCACertificateRef",
     "ConfigMap gateway-conformance-infra/nonexistent-ca-certificate not found"),
    ('[{group: "", kind: ConfigMap, name: malformed-ca-certificate}]', "InvalidCACertificateRef",
     "has no 'ca.crt' key"),
    ('[{group: "", kind: ConfigMap, name: not-pem}]', "InvalidCACertificateRef",
     "is not PEM CA certificates"),
    ('[{group: "", kind: Secret, name: no-such-secret}]', "InvalidCACertificateRef",
     "Secret gateway-conformance-infra/no-such-secret not found"),
    ("[{group: invalid.io, kind: InvalidKind, name: invalid-kind}]", "InvalidKind",
     "'invalid.io/InvalidKind' is not supported"),
]  # fmt: skip


@pytest.mark.parametrize(("ca_refs", "reason", "words"), INVALID_REFS)
def test_a_policy_without_a_valid_ca_is_not_accepted_and_its_backend_fails(
    ca_refs: str, reason: str, words: str
) -> None:
    dag = build_yaml(
        INFRA,
        MALFORMED,
        service("invalid", ("https", 443), app_protocol="HTTPS"),
        route(("invalid", 443)),
        policy("invalid", "invalid", ca_refs=ca_refs),
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
    refs = (
        '[{group: "", kind: ConfigMap, name: tls-checks-ca-certificate}, '
        '{group: "", kind: ConfigMap, name: missing}]'
    )
    dag = build_yaml(
        INFRA, service("svc", ("https", 443)), route(("svc", 443)), policy("p", "svc", ca_refs=refs)
    )

    conditions = policy_conditions(dag, "p")
    assert state(conditions, "Accepted") == ("True", "Accepted")
    assert state(conditions, "ResolvedRefs") == ("False", "InvalidCACertificateRef")
    assert "validation.caCertificateRefs[1]" in conditions["ResolvedRefs"]["message"]
    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca == CA.pem


def test_a_ca_in_a_secret() -> None:
    secret = f"""
apiVersion: v1
kind: Secret
metadata: {{name: ca-secret, namespace: {NS}}}
data: {{ca.crt: {base64.b64encode(CA.pem).decode()}}}
"""
    dag = build_yaml(
        INFRA,
        secret,
        service("svc", ("https", 443)),
        route(("svc", 443)),
        policy("p", "svc", ca_refs='[{group: "", kind: Secret, name: ca-secret}]'),
    )

    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca == CA.pem
    assert state(policy_conditions(dag, "p"), "ResolvedRefs") == ("True", "ResolvedRefs")


def test_well_known_cas_other_than_system_are_invalid() -> None:
    text = policy("p", "svc").replace(
        '{hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, '
        "name: tls-checks-ca-certificate}]}",
        "{hostname: abc.example.com, wellKnownCACertificates: example.com/corporate}",
    )
    dag = build_yaml(INFRA, service("svc", ("https", 443)), route(("svc", 443)), text)

    assert state(policy_conditions(dag, "p"), "Accepted") == ("False", "Invalid")
    assert dag.clusters == {}


def test_well_known_system_cas_trust_the_system_bundle() -> None:
    text = policy("p", "svc").replace(
        '{hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, '
        "name: tls-checks-ca-certificate}]}",
        "{hostname: abc.example.com, wellKnownCACertificates: System}",
    )
    dag = build_yaml(INFRA, service("svc", ("https", 443)), route(("svc", 443)), text)

    tls = eds(dag, "svc", 443).tls
    assert tls is not None and tls.trusted_ca is None and tls.sni == "abc.example.com"


def test_a_section_name_that_names_no_port_is_target_not_found() -> None:
    dag = build_yaml(
        INFRA,
        service("svc", ("https", 443)),
        route(("svc", 443)),
        policy("p", "svc", section="nope"),
    )

    conditions = policy_conditions(dag, "p")
    assert state(conditions, "Accepted") == ("False", "TargetNotFound")
    assert "has no port named 'nope'" in conditions["Accepted"]["message"]
    assert eds(dag, "svc", 443).tls is None


# --- status bookkeeping --------------------------------------------------------------------


def test_conditions_carry_the_policy_generation() -> None:
    dag = build_yaml(
        INFRA,
        service("observed-generation-bump-test", ("https", 443)),
        route(("observed-generation-bump-test", 443)),
        policy("observed", "observed-generation-bump-test", section="https", generation=7),
    )

    conditions = policy_conditions(dag, "observed")
    assert {c["observedGeneration"] for c in conditions.values()} == {7}


def test_a_policy_no_route_of_ours_reaches_has_no_ancestors() -> None:
    dag = build_yaml(INFRA, service("svc", ("https", 443)), policy("p", "svc"))

    [status] = [s for k, s in dag.statuses.items() if k.kind == "BackendTLSPolicy"]
    assert status.status == {"ancestors": []}


def test_every_gateway_of_the_routes_is_an_ancestor() -> None:
    second = INFRA.split("---")[0].replace("same-namespace", "second")
    other_route = route(("svc", 443), name="r2").replace("same-namespace", "second")
    dag = build_yaml(
        INFRA, second, service("svc", ("https", 443)), route(("svc", 443)), other_route,
        policy("p", "svc"),
    )  # fmt: skip

    [status] = [s for k, s in dag.statuses.items() if k.kind == "BackendTLSPolicy"]
    names = [a["ancestorRef"]["name"] for a in status.status["ancestors"]]
    assert names == ["same-namespace", "second"]
