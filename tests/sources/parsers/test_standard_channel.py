"""Parsing the rest of the standard channel: TCPRoute, TLSRoute, UDPRoute, ListenerSet, the
HTTPRoute CORS filter and the Gateway's clientCertificateRef, frontend validation and
allowedListeners, with the validation their CRDs apply (schema and CEL rules) and the field
paths kubectl would name."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from dragoman.objects import (
    BackendRef,
    CertificateRef,
    Gateway,
    HTTPCORSFilter,
    HTTPRoute,
    ListenerSet,
    ListenerSetParent,
    TCPRoute,
    TLSRoute,
    UDPRoute,
)
from dragoman.objects.gateway import (
    ALLOW_INSECURE_FALLBACK,
    ALLOW_VALID_ONLY,
    FrontendValidation,
    ObjectReference,
)
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object

GW = "gateway.networking.k8s.io/v1"


def parse(text: str) -> Any:
    return parse_object(yaml.safe_load(textwrap.dedent(text)))


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ObjectError) as caught:
        parse(text)
    return caught.value.problems


def route_text(kind: str, spec: str) -> str:
    """A route of `kind` whose spec is the YAML text `spec`, as a file would hold it."""
    return f"apiVersion: {GW}\nkind: {kind}\nmetadata: {{name: r, namespace: apps}}\nspec: {spec}\n"


@pytest.mark.parametrize(("kind", "cls"), [("TCPRoute", TCPRoute), ("UDPRoute", UDPRoute)])
def test_tcp_and_udp_routes(kind: str, cls: type) -> None:
    found = parse(
        route_text(
            kind,
            "{parentRefs: [{name: gw, sectionName: db, port: 5432}],"
            " rules: [{name: only, backendRefs: [{name: db, port: 5432, weight: 3}]}]}",
        )
    )
    assert isinstance(found, cls)
    assert found.hostnames == ()
    [rule] = found.rules
    assert rule.name == "only"
    assert rule.backend_refs == (BackendRef(name="db", port=5432, weight=3),)
    assert found.parent_refs[0].section_name == "db" and found.parent_refs[0].port == 5432


def test_tls_route_needs_hostnames() -> None:
    found = parse(
        route_text(
            "TLSRoute",
            "{hostnames: [a.example.com, '*.example.com'],"
            " rules: [{backendRefs: [{name: s, port: 443}]}]}",
        )
    )
    assert isinstance(found, TLSRoute)
    assert found.hostnames == ("a.example.com", "*.example.com")
    assert ("spec.hostnames", "is required") in problems(
        route_text("TLSRoute", "{rules: [{backendRefs: [{name: s, port: 443}]}]}")
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("{}", "spec.rules"),
        ("{rules: []}", "spec.rules"),
        (
            "{rules: [{backendRefs: [{name: a, port: 1}]}, {backendRefs: [{name: b, port: 1}]}]}",
            "spec.rules",
        ),  # v1 allows exactly one rule
        ("{rules: [{}]}", "spec.rules[0].backendRefs"),
        ("{rules: [{backendRefs: []}]}", "spec.rules[0].backendRefs"),
        ("{rules: [{backendRefs: [{name: s}]}]}", "spec.rules[0].backendRefs[0].port"),
        ("{rules: [{backendRefs: [{name: s, port: 70000}]}]}", "spec.rules[0].backendRefs[0].port"),
    ],
)
@pytest.mark.parametrize("kind", ["TCPRoute", "UDPRoute"])
def test_l4_rules_are_validated_as_the_crds_do(kind: str, spec: str, field: str) -> None:
    assert field in [path for path, _ in problems(route_text(kind, spec))]


def test_tls_route_hostnames_are_bounded_and_unique() -> None:
    many = ", ".join(f"h{i}.example.com" for i in range(1025))
    rules = "rules: [{backendRefs: [{name: s, port: 443}]}]"
    assert "spec.hostnames" in [
        p for p, _ in problems(route_text("TLSRoute", f"{{hostnames: [{many}], {rules}}}"))
    ]
    assert ("spec.hostnames", "must not list a hostname twice") in problems(
        route_text("TLSRoute", f"{{hostnames: [a.example.com, a.example.com], {rules}}}")
    )
    assert "spec.hostnames[0]" in [
        p for p, _ in problems(route_text("TLSRoute", f"{{hostnames: ['a b\\x00c'], {rules}}}"))
    ]


def test_cors_filter() -> None:
    found = parse(
        route_text(
            "HTTPRoute",
            """
            rules:
            - filters:
              - type: CORS
                cors:
                  allowOrigins: ["https://www.foo.com", "https://*.bar.com:8443"]
                  allowMethods: [GET, OPTIONS]
                  allowHeaders: [x-header-1]
                  exposeHeaders: ["*"]
                  maxAge: 3600
                  allowCredentials: true
            """,
        ).replace("spec: \n", "spec:\n")
    )
    assert isinstance(found, HTTPRoute)
    assert found.rules[0].filters[0].cors == HTTPCORSFilter(
        allow_origins=("https://www.foo.com", "https://*.bar.com:8443"),
        allow_methods=("GET", "OPTIONS"),
        allow_headers=("x-header-1",),
        expose_headers=("*",),
        max_age_s=3600,
        allow_credentials=True,
    )
    default = parse(route_text("HTTPRoute", "{rules: [{filters: [{type: CORS, cors: {}}]}]}"))
    assert default.rules[0].filters[0].cors == HTTPCORSFilter()  # maxAge 5 by default


@pytest.mark.parametrize(
    ("cors", "field"),
    [
        ("{allowOrigins: ['*', 'https://a.example']}", "allowOrigins"),
        ("{allowOrigins: ['ftp://a.example']}", "allowOrigins[0]"),
        ("{allowOrigins: ['https://a.example/path']}", "allowOrigins[0]"),
        ("{allowMethods: [GET, '*']}", "allowMethods"),
        ("{allowMethods: [FETCH]}", "allowMethods[0]"),
        ("{allowHeaders: ['x y']}", "allowHeaders[0]"),
        ("{allowHeaders: [a, a]}", "allowHeaders"),
        ("{maxAge: 0}", "maxAge"),
        ("{allowCredentials: 'yes'}", "allowCredentials"),
    ],
)
def test_cors_filter_is_validated_as_the_crd_does(cors: str, field: str) -> None:
    found = problems(
        route_text("HTTPRoute", f"{{rules: [{{filters: [{{type: CORS, cors: {cors}}}]}}]}}")
    )
    assert f"spec.rules[0].filters[0].cors.{field}" in [path for path, _ in found]


def gateway_text(extra: str) -> str:
    """The Gateway gw (one HTTP listener) with the spec lines `extra`, as a file holds it."""
    return (
        f"apiVersion: {GW}\nkind: Gateway\nmetadata: {{name: gw, namespace: infra}}\n"
        "spec:\n  gatewayClassName: dragoman\n"
        "  listeners: [{name: http, port: 80, protocol: HTTP}]\n" + extra
    )


def test_gateway_client_certificate_and_allowed_listeners() -> None:
    found = parse(
        gateway_text(
            "  tls: {backend: {clientCertificateRef: {name: client, namespace: certs}}}\n"
            "  allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {a: b}}}}\n"
        )
    )
    assert isinstance(found, Gateway)
    assert found.backend_client_certificate == CertificateRef(name="client", namespace="certs")
    assert found.allowed_listener_sets == "Selector"
    assert found.listener_set_selector is not None
    plain = parse(gateway_text(""))
    assert (plain.backend_client_certificate, plain.allowed_listener_sets) == (None, "None")
    assert "spec.allowedListeners.namespaces.selector" in [
        p for p, _ in problems(gateway_text("  allowedListeners: {namespaces: {from: Selector}}\n"))
    ]


def test_gateway_frontend_validation() -> None:
    found = parse(
        gateway_text(
            "  tls:\n"
            "    frontend:\n"
            "      default: {validation: {caCertificateRefs: [{group: '', kind: ConfigMap,"
            " name: ca}]}}\n"
            "      perPort:\n"
            "      - {port: 8443, tls: {validation: {mode: AllowInsecureFallback,"
            " caCertificateRefs: [{group: '', kind: Secret, name: other, namespace: certs}]}}}\n"
            "      - {port: 9443, tls: {}}\n"
        )
    )
    assert isinstance(found, Gateway)
    frontend = found.frontend_tls
    assert frontend is not None
    assert frontend.default == FrontendValidation(
        (ObjectReference("ca", "ConfigMap"),), ALLOW_VALID_ONLY, "spec.tls.frontend.default"
    )
    per_port = frontend.for_port(8443)
    assert per_port.mode == ALLOW_INSECURE_FALLBACK
    assert per_port.ca_certificate_refs == (ObjectReference("other", "Secret", "", "certs"),)
    assert per_port.field == "spec.tls.frontend.perPort[0].tls"
    assert frontend.for_port(9443).ca_certificate_refs == ()  # overrides the default: none
    assert frontend.for_port(443) is frontend.default
    assert parse(gateway_text("")).frontend_tls is None


@pytest.mark.parametrize(
    ("frontend", "field"),
    [
        ("{}", "spec.tls.frontend.default"),
        (
            "{default: {validation: {caCertificateRefs: []}}}",
            "spec.tls.frontend.default.validation.caCertificateRefs",
        ),
        ("{default: {validation: {}}}", "spec.tls.frontend.default.validation.caCertificateRefs"),
        (
            "{default: {validation: {mode: Sometimes, caCertificateRefs: [{group: '',"
            " kind: ConfigMap, name: ca}]}}}",
            "spec.tls.frontend.default.validation.mode",
        ),
        (
            "{default: {validation: {caCertificateRefs: [{kind: ConfigMap, name: ca}]}}}",
            "spec.tls.frontend.default.validation.caCertificateRefs[0].group",
        ),
        (
            "{default: {validation: {caCertificateRefs: [{group: '', name: ca}]}}}",
            "spec.tls.frontend.default.validation.caCertificateRefs[0].kind",
        ),
        (
            "{default: {}, perPort: [{port: 443, tls: {}}, {port: 443, tls: {}}]}",
            "spec.tls.frontend.perPort[1].port",
        ),
        ("{default: {}, perPort: [{port: 70000, tls: {}}]}", "spec.tls.frontend.perPort[0].port"),
        ("{default: {}, perPort: [{port: 443}]}", "spec.tls.frontend.perPort[0].tls"),
    ],
)
def test_gateway_frontend_validation_refused(frontend: str, field: str) -> None:
    assert field in [
        path for path, _ in problems(gateway_text(f"  tls: {{frontend: {frontend}}}\n"))
    ]


def test_listener_set() -> None:
    found = parse(
        f"""
        apiVersion: {GW}
        kind: ListenerSet
        metadata: {{name: extra, namespace: team}}
        spec:
          parentRef: {{name: gw, namespace: infra}}
          listeners:
          - {{name: db, port: 5432, protocol: TCP}}
          - {{name: site, port: 443, protocol: HTTPS, hostname: team.example.com,
              tls: {{certificateRefs: [{{name: cert}}]}}}}
        """
    )
    assert isinstance(found, ListenerSet)
    assert found.parent_ref == ListenerSetParent(name="gw", namespace="infra")
    assert [listener.name for listener in found.listeners] == ["db", "site"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("{listeners: [{name: a, port: 80, protocol: HTTP}]}", "spec.parentRef"),
        ("{parentRef: {name: gw}}", "spec.listeners"),
        (
            "{parentRef: {name: gw}, listeners: [{name: a, port: 80, protocol: HTTP},"
            " {name: a, port: 81, protocol: HTTP}]}",
            "spec.listeners[1].name",
        ),
        (
            "{parentRef: {name: gw}, listeners: [{name: a, port: 80, protocol: TCP,"
            " hostname: a.example.com}]}",
            "spec.listeners[0].hostname",
        ),
    ],
)
def test_listener_set_is_validated_as_the_crd_does(spec: str, field: str) -> None:
    text = (
        f"apiVersion: {GW}\nkind: ListenerSet\nmetadata: {{name: s, namespace: t}}\nspec: {spec}\n"
    )
    assert field in [path for path, _ in problems(text)]
