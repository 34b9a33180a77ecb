"""Parsing the kinds dragoman reads for Gateway status and TLS: GatewayClass, ReferenceGrant
(v1beta1 and v1), Namespace, Secret, ConfigMap, and the Gateway listener fields they feed."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from dragoman.objects import (
    CertificateRef,
    ConfigMap,
    Gateway,
    GatewayClass,
    LabelSelector,
    LabelSelectorRequirement,
    ListenerTLS,
    Namespace,
    ObjectKey,
    ReferenceGrant,
    ReferenceGrantFrom,
    ReferenceGrantTo,
    RouteGroupKind,
    Secret,
)
from dragoman.sources.errors import ObjectError
from dragoman.sources.parse import parse_object

GW = "gateway.networking.k8s.io"


def parse(text: str) -> Any:
    return parse_object(yaml.safe_load(textwrap.dedent(text)))


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ObjectError) as caught:
        parse(text)
    return caught.value.problems


def test_gateway_class_is_cluster_scoped() -> None:
    found = parse(
        f"""
        apiVersion: {GW}/v1
        kind: GatewayClass
        metadata: {{name: dragoman, namespace: ignored, generation: 2}}
        spec: {{controllerName: dragoman.dev/gateway-controller, description: ours}}
        """
    )
    assert isinstance(found, GatewayClass)
    assert found.controller_name == "dragoman.dev/gateway-controller"
    assert found.key == ObjectKey("GatewayClass", "", "dragoman")
    assert str(found.key) == "GatewayClass/dragoman"
    assert found.meta.generation == 2


def test_gateway_class_controller_name_must_be_domain_prefixed() -> None:
    assert problems(
        f"""
        apiVersion: {GW}/v1
        kind: GatewayClass
        metadata: {{name: c}}
        spec: {{controllerName: dragoman}}
        """
    ) == [
        (
            "spec.controllerName",
            'expected a domain-prefixed path such as "example.com/gateway-controller" '
            '(at most 253 characters), got "dragoman"',
        )
    ]


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_reference_grant(version: str) -> None:
    found = parse(
        f"""
        apiVersion: {GW}/{version}
        kind: ReferenceGrant
        metadata: {{name: allow, namespace: backends}}
        spec:
          from:
            - {{group: {GW}, kind: HTTPRoute, namespace: routes}}
            - {{group: "", kind: Service, namespace: aliases}}
          to:
            - {{group: "", kind: Service, name: web}}
            - {{group: "", kind: Secret}}
        """
    )
    assert found == ReferenceGrant(
        meta=found.meta,
        from_=(
            ReferenceGrantFrom(GW, "HTTPRoute", "routes"),
            ReferenceGrantFrom("", "Service", "aliases"),
        ),
        to=(ReferenceGrantTo("", "Service", "web"), ReferenceGrantTo("", "Secret", None)),
    )
    assert found.meta.namespace == "backends"


def test_reference_grant_needs_from_and_to_with_groups() -> None:
    assert problems(
        f"""
        apiVersion: {GW}/v1
        kind: ReferenceGrant
        metadata: {{name: g}}
        spec:
          from: [{{kind: HTTPRoute, namespace: x}}]
          to: []
        """
    ) == [
        ("spec.to", "must have at least 1 item(s)"),
        ("spec.from[0].group", 'is required ("" for the core API group)'),
    ]


def test_namespace_labels_include_its_name() -> None:
    found = parse("apiVersion: v1\nkind: Namespace\nmetadata: {name: team, labels: {a: b}}\n")
    assert isinstance(found, Namespace)
    assert found.key == ObjectKey("Namespace", "", "team")
    assert found.labels == {"a": "b", "kubernetes.io/metadata.name": "team"}


def test_secret_data_is_decoded_and_string_data_wins() -> None:
    found = parse(
        """
        apiVersion: v1
        kind: Secret
        metadata: {name: s, namespace: shop}
        type: kubernetes.io/tls
        data: {tls.crt: UEVNREFUQTE=, tls.key: S0VZREFUQTI=}
        stringData: {tls.key: KEYDATA3}
        """
    )
    assert isinstance(found, Secret)
    assert found.type == "kubernetes.io/tls"
    assert found.data == {"tls.crt": b"PEMDATA1", "tls.key": b"KEYDATA3"}
    assert "DATA" not in repr(found)


def test_secret_problems_never_show_values() -> None:
    found = problems(
        """
        apiVersion: v1
        kind: Secret
        metadata: {name: s}
        type: kubernetes.io/tls
        data: {tls.crt: "not base64!", "bad key": Zm9v}
        """
    )
    assert found == [
        ("data.tls.crt", "is not valid base64 (the value is not shown)"),
        (
            "data.bad key",
            "expected a key of letters, digits, '-', '_' or '.' (at most 253 characters), "
            'got "bad key"',
        ),
        ("data.tls.key", "is required in a Secret of type kubernetes.io/tls"),
    ]
    assert all("not base64!" not in message for _, message in found)


def test_opaque_secret_and_config_map() -> None:
    secret = parse("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: YQ==}\n")
    assert secret.type == "Opaque" and secret.data == {"a": b"a"}
    config = parse("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {ca.crt: PEM}\n")
    assert config == ConfigMap(meta=config.meta, data={"ca.crt": "PEM"})


GATEWAY = f"""
apiVersion: {GW}/v1
kind: Gateway
metadata: {{name: edge}}
spec:
  gatewayClassName: dragoman
  listeners:
"""


def test_listener_tls_allowed_routes_and_selector() -> None:
    found = parse(
        GATEWAY
        + """
          - name: https
            port: 443
            protocol: HTTPS
            hostname: shop.example.com
            tls:
              certificateRefs: [{name: shop}, {name: other, namespace: certs, kind: Secret}]
            allowedRoutes:
              kinds: [{kind: HTTPRoute}, {group: example.com, kind: Custom}]
              namespaces:
                from: Selector
                selector:
                  matchLabels: {team: shop}
                  matchExpressions:
                    - {key: env, operator: NotIn, values: [dev]}
                    - {key: gateway-access, operator: Exists}
        """
    )
    assert isinstance(found, Gateway)
    [listener] = found.listeners
    assert listener.tls == ListenerTLS(
        "Terminate", (CertificateRef("shop"), CertificateRef("other", "certs"))
    )
    assert listener.allowed_kinds == (
        RouteGroupKind("HTTPRoute"),
        RouteGroupKind("Custom", "example.com"),
    )
    assert listener.allowed_namespaces == "Selector"
    assert listener.namespace_selector == LabelSelector(
        {"team": "shop"},
        (
            LabelSelectorRequirement("env", "NotIn", ("dev",)),
            LabelSelectorRequirement("gateway-access", "Exists"),
        ),
    )


@pytest.mark.parametrize(
    ("listener", "expected"),
    [
        pytest.param(
            "{name: h, port: 80, protocol: HTTP, tls: {certificateRefs: [{name: s}]}}",
            ("spec.listeners[0].tls", "must not be set for protocol HTTP"),
            id="tls on HTTP",
        ),
        pytest.param(
            "{name: h, port: 443, protocol: HTTPS, tls: {mode: Passthrough}}",
            ("spec.listeners[0].tls.mode", "must be Terminate for protocol HTTPS"),
            id="HTTPS passthrough",
        ),
        pytest.param(
            "{name: h, port: 443, protocol: HTTPS, tls: {}}",
            (
                "spec.listeners[0].tls",
                "certificateRefs or options must be set when mode is Terminate",
            ),
            id="Terminate without certificates",
        ),
        pytest.param(
            "{name: h, port: 443, protocol: TLS, tls: {certificateRefs: [{name: s}]}}",
            ("spec.listeners[0].tls.mode", "is required for protocol TLS"),
            id="TLS without mode",
        ),
        pytest.param(
            "{name: h, port: 9000, protocol: TCP, hostname: a.example.com}",
            ("spec.listeners[0].hostname", "must not be set for protocol TCP"),
            id="hostname on TCP",
        ),
        pytest.param(
            "{name: h, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector,"
            " selector: {matchExpressions: [{key: a, operator: In}]}}}}",
            (
                "spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].values",
                "must be non-empty when operator is In",
            ),
            id="In without values",
        ),
        pytest.param(
            "{name: h, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Selector,"
            " selector: {matchExpressions: [{key: a, operator: Near}]}}}}",
            (
                "spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].operator",
                'expected one of "In", "NotIn", "Exists", "DoesNotExist", got "Near"',
            ),
            id="unknown operator",
        ),
    ],
)
def test_listener_rules_of_the_crd(listener: str, expected: tuple[str, str]) -> None:
    assert problems(GATEWAY + f"  - {listener}\n") == [expected]


def test_label_selector_semantics() -> None:
    labels = {"team": "shop", "env": "prod"}
    assert LabelSelector().matches({})
    assert LabelSelector({"team": "shop"}).matches(labels)
    assert not LabelSelector({"team": "web"}).matches(labels)
    cases = [
        (LabelSelectorRequirement("env", "In", ("prod", "stage")), True),
        (LabelSelectorRequirement("env", "In", ("dev",)), False),
        (LabelSelectorRequirement("env", "NotIn", ("dev",)), True),
        (LabelSelectorRequirement("missing", "NotIn", ("dev",)), True),
        (LabelSelectorRequirement("env", "Exists"), True),
        (LabelSelectorRequirement("missing", "Exists"), False),
        (LabelSelectorRequirement("missing", "DoesNotExist"), True),
        (LabelSelectorRequirement("env", "DoesNotExist"), False),
    ]
    for requirement, expected in cases:
        assert LabelSelector(match_expressions=(requirement,)).matches(labels) is expected, (
            requirement
        )


def test_gateway_infrastructure_labels_and_annotations() -> None:
    gateway = parse(
        f"""
        apiVersion: {GW}/v1
        kind: Gateway
        metadata: {{name: edge}}
        spec:
          gatewayClassName: dragoman
          infrastructure:
            labels: {{team: payments}}
            annotations: {{example.com/owner: someone}}
          listeners: [{{name: http, port: 80, protocol: HTTP}}]
        """
    )
    assert isinstance(gateway, Gateway)
    assert gateway.infrastructure_labels == {"team": "payments"}
    assert gateway.infrastructure_annotations == {"example.com/owner": "someone"}


def test_gateway_infrastructure_labels_are_at_most_eight() -> None:
    labels = ", ".join(f"l{i}: v" for i in range(9))
    found = problems(
        f"""
        apiVersion: {GW}/v1
        kind: Gateway
        metadata: {{name: edge}}
        spec:
          gatewayClassName: dragoman
          infrastructure: {{labels: {{{labels}}}}}
          listeners: [{{name: http, port: 80, protocol: HTTP}}]
        """
    )
    assert found == [("spec.infrastructure.labels", "at most 8 entries, got 9")]
