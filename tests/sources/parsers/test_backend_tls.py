"""BackendTLSPolicy manifests to typed objects, with the CRD's validation and field paths."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dragoman.objects import BackendTLSPolicy, CACertificateRef, PolicyTargetRef, SubjectAltName
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object

VALID = """
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: api-tls, namespace: shop, generation: 4}
spec:
  targetRefs:
    - {group: "", kind: Service, name: api, sectionName: https}
    - {group: "", kind: Service, name: api, sectionName: admin}
  validation:
    hostname: api.example.com
    caCertificateRefs: [{group: "", kind: ConfigMap, name: api-ca}]
    subjectAltNames:
      - {type: Hostname, hostname: "*.example.com"}
      - {type: URI, uri: "spiffe://example.com/ns/shop/sa/api"}
  options: {example.com/min-version: "1.3"}
"""


def parse(text: str) -> BackendTLSPolicy:
    parsed = parse_object(yaml.safe_load(text))
    assert isinstance(parsed, BackendTLSPolicy)
    return parsed


def test_a_valid_policy() -> None:
    policy = parse(VALID)

    assert str(policy.key) == "BackendTLSPolicy/shop/api-tls"
    assert policy.meta.generation == 4
    assert policy.target_refs == (
        PolicyTargetRef("api", "", "Service", "https"),
        PolicyTargetRef("api", "", "Service", "admin"),
    )
    assert policy.hostname == "api.example.com"
    assert policy.ca_certificate_refs == (CACertificateRef("api-ca", "", "ConfigMap"),)
    assert policy.well_known_ca_certificates is None
    assert policy.subject_alt_names == (
        SubjectAltName("Hostname", "*.example.com"),
        SubjectAltName("URI", "spiffe://example.com/ns/shop/sa/api"),
    )
    assert policy.options == {"example.com/min-version": "1.3"}


def test_well_known_system_cas() -> None:
    policy = parse(
        """
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: p}
spec:
  targetRefs: [{group: "", kind: Service, name: api}]
  validation: {hostname: api.example.com, wellKnownCACertificates: System}
"""
    )
    assert policy.well_known_ca_certificates == "System"
    assert policy.ca_certificate_refs == ()
    assert policy.target_refs[0].section_name is None


TARGET = {"group": "", "kind": "Service", "name": "a"}
SYSTEM = {"hostname": "a.example.com", "wellKnownCACertificates": "System"}
CONFIG_MAP = {"group": "", "kind": "ConfigMap", "name": "c"}


def spec(targets: list[dict] | None = None, **validation: Any) -> dict[str, Any]:
    result: dict[str, Any] = {"targetRefs": [TARGET] if targets is None else targets}
    if validation.pop("absent", False):
        return result
    result["validation"] = {**SYSTEM, **validation}
    return result


def without(mapping: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in keys}


INVALID = [
    # (spec, field path, words of the message)
    (without(spec(), "targetRefs"), "spec.targetRefs", "is required"),
    (spec([]), "spec.targetRefs", "at least 1"),
    (spec([without(TARGET, "group")]), "spec.targetRefs[0].group", "is required"),
    (spec(absent=True), "spec.validation", "is required"),
    (
        {"targetRefs": [TARGET], "validation": without(SYSTEM, "hostname")},
        "spec.validation.hostname",
        "is required",
    ),
    (spec(hostname="*.example.com"), "spec.validation.hostname", "DNS-1123 subdomain"),
    (
        {"targetRefs": [TARGET], "validation": {"hostname": "a.example.com"}},
        "spec.validation",
        "either caCertificateRefs or wellKnownCACertificates",
    ),
    (spec(caCertificateRefs=[CONFIG_MAP]), "spec.validation", "must not contain both"),
    (
        spec(wellKnownCACertificates="Mozilla"),
        "spec.validation.wellKnownCACertificates",
        '"System" or a domain-prefixed name',
    ),
    (spec([TARGET, TARGET]), "spec.targetRefs", "sectionName must be specified"),
    (
        spec([{**TARGET, "sectionName": "x"}, {**TARGET, "sectionName": "x"}]),
        "spec.targetRefs",
        "sectionName must be unique",
    ),
    (
        spec(subjectAltNames=[{"type": "Hostname"}]),
        "spec.validation.subjectAltNames[0].hostname",
        "is required when type is Hostname",
    ),
    (
        spec(subjectAltNames=[{"type": "URI", "uri": "x", "hostname": "a.b"}]),
        "spec.validation.subjectAltNames[0].uri",
        "a URI with a scheme",
    ),
    (
        spec(subjectAltNames=[{"type": "Email", "hostname": "a.b"}]),
        "spec.validation.subjectAltNames[0].type",
        'one of "Hostname", "URI"',
    ),
]


@pytest.mark.parametrize(("spec", "field", "words"), INVALID)
def test_invalid_policies_name_the_field(spec: dict[str, Any], field: str, words: str) -> None:
    doc = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "BackendTLSPolicy",
        "metadata": {"name": "p", "namespace": "shop"},
        "spec": spec,
    }
    with pytest.raises(ObjectError) as raised:
        parse_object(doc)

    assert raised.value.object == "BackendTLSPolicy/shop/p"
    matching = [message for path, message in raised.value.problems if path == field]
    assert matching, raised.value.problems
    assert any(words in message for message in matching), matching


def test_only_v1_is_read() -> None:
    with pytest.raises(ObjectError, match=r"expected gateway\.networking\.k8s\.io/v1"):
        parse_object(
            {
                "apiVersion": "gateway.networking.k8s.io/v1alpha3",
                "kind": "BackendTLSPolicy",
                "metadata": {"name": "p"},
                "spec": {},
            }
        )
