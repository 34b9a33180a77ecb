"""BackendTLSPolicy (gateway.networking.k8s.io/v1) from decoded manifests, validated as the
CRD (OpenAPI schema and CEL rules) validates it.

What the CRD accepts but dragoman cannot use (a CA reference to a missing ConfigMap, an
unknown wellKnownCACertificates set, a target that is not a Service) is not a parse error:
the build reports it in the policy's status.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from dragoman.objects import ObjectMeta
from dragoman.objects.backend_tls import (
    SAN_HOSTNAME,
    SAN_TYPES,
    SAN_URI,
    BackendTLSPolicy,
    CACertificateRef,
    PolicyTargetRef,
    SubjectAltName,
)
from dragoman.sources.fields import Node, describe
from dragoman.sources.formats import DNS1123_SUBDOMAIN, GROUP, HOSTNAME, KIND, Format

MAX_TARGET_REFS = 16
MAX_CA_REFS = 8
MAX_SUBJECT_ALT_NAMES = 5
MAX_OPTIONS = 16

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_WELL_KNOWN = re.compile(rf"System|{_SUBDOMAIN}/([A-Za-z0-9][-A-Za-z0-9_.]{{0,61}})?[A-Za-z0-9]")
_URI = re.compile(r"(([^:/?#]+):)(//([^/?#]*))([^?#]*)(\?([^#]*))?(#(.*))?")

WELL_KNOWN_CA_CERTIFICATES = Format(
    '"System" or a domain-prefixed name such as "example.com/corporate-cas"',
    lambda value: len(value) <= 253 and _WELL_KNOWN.fullmatch(value) is not None,
)
URI = Format(
    'a URI with a scheme and an authority, such as "spiffe://example.com/ns/default/sa/api"',
    lambda value: len(value) <= 253 and _URI.match(value) is not None,
)


def parse_backend_tls_policy(root: Node, meta: ObjectMeta) -> BackendTLSPolicy:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return BackendTLSPolicy(meta=meta)
    target_nodes = spec.mappings(
        "targetRefs", required=True, min_items=1, max_items=MAX_TARGET_REFS
    )
    targets = tuple(_target_ref(node) for node in target_nodes or [])
    _check_distinct_targets(spec, targets)
    validation = spec.mapping("validation", required=True)
    options = _options(spec)
    if validation is None:
        return BackendTLSPolicy(meta=meta, target_refs=targets, options=options)
    hostname, ca_refs, well_known, sans = parse_validation(validation)
    return BackendTLSPolicy(
        meta=meta,
        target_refs=targets,
        hostname=hostname,
        ca_certificate_refs=ca_refs,
        well_known_ca_certificates=well_known,
        subject_alt_names=sans,
        options=options,
    )


def parse_validation(
    validation: Node,
) -> tuple[str, tuple[CACertificateRef, ...], str | None, tuple[SubjectAltName, ...]]:
    """A BackendTLSPolicy's `validation` (an XBackend's spec.tls.validation has its shape):
    the hostname, the CA references, wellKnownCACertificates (None: unset) and the names."""
    hostname = validation.string("hostname", required=True, format=DNS1123_SUBDOMAIN)
    ca_nodes = validation.mappings("caCertificateRefs", max_items=MAX_CA_REFS) or []
    ca_refs = tuple(_ca_ref(node) for node in ca_nodes)
    well_known = validation.optional_string(
        "wellKnownCACertificates", format=WELL_KNOWN_CA_CERTIFICATES
    )
    if ca_refs and well_known:
        validation.report(
            validation.path, "must not contain both caCertificateRefs and wellKnownCACertificates"
        )
    elif not ca_refs and not well_known and not validation.has("wellKnownCACertificates"):
        validation.report(
            validation.path, "must specify either caCertificateRefs or wellKnownCACertificates"
        )
    san_nodes = validation.mappings("subjectAltNames", max_items=MAX_SUBJECT_ALT_NAMES) or []
    sans = tuple(san for san in (_subject_alt_name(node) for node in san_nodes) if san)
    return hostname, ca_refs, well_known or None, sans


def _target_ref(node: Node) -> PolicyTargetRef:
    return PolicyTargetRef(
        group=_required_group(node),
        kind=node.string("kind", required=True, format=KIND),
        name=node.string("name", required=True, min_length=1, max_length=253),
        section_name=node.optional_string("sectionName", format=DNS1123_SUBDOMAIN) or None,
    )


def _check_distinct_targets(spec: Node, targets: tuple[PolicyTargetRef, ...]) -> None:
    """The CRD's CEL rules: a target named twice needs a sectionName each time, all distinct."""
    by_target: dict[tuple[str, str, str], list[str | None]] = {}
    for target in targets:
        by_target.setdefault((target.group, target.kind, target.name), []).append(
            target.section_name
        )
    for (_, kind, name), sections in by_target.items():
        if len(sections) < 2:
            continue
        if None in sections:
            spec.report(
                spec.at("targetRefs"),
                f"sectionName must be specified when targetRefs includes 2 or more references "
                f"to the same target ({kind} {describe(name)})",
            )
        elif max(Counter(sections).values()) > 1:
            spec.report(
                spec.at("targetRefs"),
                f"sectionName must be unique when targetRefs includes 2 or more references to "
                f"the same target ({kind} {describe(name)})",
            )


def _ca_ref(node: Node) -> CACertificateRef:
    return CACertificateRef(
        group=_required_group(node),
        kind=node.string("kind", required=True, format=KIND),
        name=node.string("name", required=True, min_length=1, max_length=253),
    )


def _subject_alt_name(node: Node) -> SubjectAltName | None:
    san_type = node.optional_choice("type", SAN_TYPES, required=True)
    hostname = node.optional_string("hostname", format=HOSTNAME)
    uri = node.optional_string("uri", format=URI)
    if san_type == SAN_HOSTNAME:
        if uri:
            node.report(node.at("uri"), "must not be set when type is Hostname")
        if not hostname:
            node.report(node.at("hostname"), "is required when type is Hostname")
            return None
        return SubjectAltName(SAN_HOSTNAME, hostname)
    if san_type == SAN_URI:
        if hostname:
            node.report(node.at("hostname"), "must not be set when type is URI")
        if not uri:
            node.report(node.at("uri"), "is required when type is URI")
            return None
        return SubjectAltName(SAN_URI, uri)
    return None


def _options(spec: Node) -> Mapping[str, str]:
    options = spec.string_map("options")
    if len(options) > MAX_OPTIONS:
        spec.report(spec.at("options"), f"must have at most {MAX_OPTIONS} entries")
    for key, value in options.items():
        if len(value) > 4096:
            spec.report(f"{spec.at('options')}.{key}", "must be at most 4096 characters long")
    return options


def _required_group(node: Node) -> str:
    if node.raw("group") is None:
        node.report(node.at("group"), 'is required ("" for the core API group)')
        return ""
    return node.string("group", format=GROUP)
