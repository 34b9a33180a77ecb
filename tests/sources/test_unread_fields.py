"""The spec fields a parser never read (misspelled, or unknown to dragoman), found only when
asked (by `dragoman check`), with the field most likely meant."""

from __future__ import annotations

import io
import textwrap

import yaml

from dragoman.sources.paths import load_paths
from dragoman.sources.unread_fields import parse_noting_unread

ROUTE = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: HTTPRoute
    metadata: {name: shop, labels: {anything: goes}, managedFields: []}
    spec:
      parentRefs: [{name: edge, sectionNmae: http}]
      hostname: [shop.example.com]
      rules:
      - backendRef: [{name: web, port: 80}]
        matches: [{path: {type: PathPrefix, value: /}}]
        sessionPersistence: {sessionName: s, type: Cookie}
      - backendRefs: [{name: web, port: 80, wieght: 3}]
        color: blue
    status: {parents: []}
    """


def unread(text: str) -> list[tuple[str, str]]:
    parsed, found = parse_noting_unread(yaml.safe_load(textwrap.dedent(text)))
    assert parsed is not None
    return found


def test_each_unread_spec_field_is_named_with_the_field_likely_meant() -> None:
    assert unread(ROUTE) == [
        (
            "spec.parentRefs[0].sectionNmae",
            "dragoman knows no such field of HTTPRoute: ignored; did you mean sectionName?",
        ),
        (
            "spec.hostname",
            "dragoman knows no such field of HTTPRoute: ignored; did you mean hostnames?",
        ),
        (
            "spec.rules[0].backendRef",
            "dragoman knows no such field of HTTPRoute: ignored; did you mean backendRefs?",
        ),
        (
            "spec.rules[1].backendRefs[0].wieght",
            "dragoman knows no such field of HTTPRoute: ignored; did you mean weight?",
        ),
        ("spec.rules[1].color", "dragoman knows no such field of HTTPRoute: ignored"),
    ]


def test_a_field_read_whole_or_refused_whole_is_not_looked_into() -> None:
    # sessionPersistence above is refused whole by the build (UnsupportedValue): its own
    # fields are not named again; nor are a BackendPolicy's, which refuses unknown fields.
    policy = """
        apiVersion: dragoman.dev/v1alpha1
        kind: BackendPolicy
        metadata: {name: p}
        spec:
          targetRefs: [{group: "", kind: Service, name: web}]
          circuitBreakers: {maxConnections: 5}
        """
    assert all("sessionPersistence" not in field for field, _ in unread(ROUTE))
    assert unread(policy) == []


def test_core_kinds_keep_the_fields_dragoman_has_no_use_for() -> None:
    service = """
        apiVersion: v1
        kind: Service
        metadata: {name: web}
        spec: {clusterIP: 10.0.0.1, sessionAffinity: None, ports: [{port: 80}]}
        """
    assert unread(service) == []


def test_only_a_load_that_asks_reports_them() -> None:
    text = textwrap.dedent(ROUTE).encode()
    quiet = load_paths(["-"], io.BytesIO(text))
    assert quiet.warnings == () and len(quiet.objects) == 1
    asked = load_paths(["-"], io.BytesIO(text), unread_fields=True)
    assert len(asked.objects) == 1 and asked.errors == ()
    assert [(w.origin, w.object, w.field, w.severity) for w in asked.warnings][:1] == [
        ("-#1", "HTTPRoute/default/shop", "spec.parentRefs[0].sectionNmae", "warning")
    ]
    assert len(asked.warnings) == 5
