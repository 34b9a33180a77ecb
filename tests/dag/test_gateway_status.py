"""Gateway, listener and GatewayClass status: every reason dragoman reports, table-driven."""

from __future__ import annotations

import base64

import pytest

from dragoman.dag.model import ALL_GATEWAYS, HttpsListener
from dragoman.dag.options import BuildOptions
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    CONTROLLER,
    DRAGOMAN_CLASS,
    GW,
    build_text,
    gateway_condition,
    listener,
    listener_condition,
    status,
)

CA = certificate_authority()
SITE = CA.issue("site.example.com")
OTHER = CA.issue("other.example.com")


def gateway(
    *listeners: str, name: str = "gw", class_name: str = "dragoman", extra: str = ""
) -> str:
    body = "\n".join(f"    - {item}" for item in listeners)
    return f"""
apiVersion: {GW}
kind: Gateway
metadata: {{name: {name}, namespace: default, generation: 4}}
spec:
  gatewayClassName: {class_name}{extra}
  listeners:
{body}
---
"""


def https(name: str = "https", refs: str = "[{name: site}]", extra: str = "") -> str:
    return f"{{name: {name}, port: 443, protocol: HTTPS{extra}, tls: {{certificateRefs: {refs}}}}}"


HTTP = "{name: http, port: 80, protocol: HTTP}"
PARAMETERS = "\n  infrastructure: {parametersRef: {group: example.com, kind: Config, name: c}}"
SECRETS = SITE.secret_yaml("site") + "---\n" + OTHER.secret_yaml("other", "certs")
MISMATCHED = (
    "apiVersion: v1\nkind: Secret\nmetadata: {name: mismatched}\ntype: kubernetes.io/tls\n"
    f"data: {{tls.crt: {base64.b64encode(SITE.certificate).decode()}, "
    f"tls.key: {base64.b64encode(OTHER.private_key).decode()}}}\n"
)
OPAQUE = (
    "apiVersion: v1\nkind: Secret\nmetadata: {name: opaque}\n"
    f"data: {{tls.crt: {base64.b64encode(SITE.certificate).decode()}, "
    f"tls.key: {base64.b64encode(SITE.private_key).decode()}}}\n"
)
MALFORMED = (
    "apiVersion: v1\nkind: Secret\nmetadata: {name: malformed}\ntype: kubernetes.io/tls\n"
    "data: {tls.crt: SGVsbG8gd29ybGQK, tls.key: SGVsbG8gd29ybGQK}\n"
)


def grant(
    from_kind: str = "Gateway", to_name: str | None = "other", namespace: str = "default"
) -> str:
    to_name_field = f", name: {to_name}" if to_name else ""
    return f"""
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: g, namespace: certs}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: {from_kind}, namespace: {namespace}}}]
  to: [{{group: "", kind: Secret{to_name_field}}}]
"""


VALID = (
    ("True", "Accepted"),
    ("True", "Programmed"),
    ("True", "ResolvedRefs"),
    ("False", "NoConflicts"),
)

# (id, manifests, listener, Accepted, Programmed, ResolvedRefs, Conflicted)
LISTENERS = [
    pytest.param(gateway(HTTP), "http", *VALID, id="plain HTTP"),
    pytest.param(gateway(https()) + SECRETS, "https", *VALID, id="HTTPS with its Secret"),
    pytest.param(
        gateway(HTTP, "{name: tcp, port: 9000, protocol: example.com/sctp}"),
        "tcp",
        ("False", "UnsupportedProtocol"),
        ("False", "Invalid"),
        ("True", "ResolvedRefs"),
        ("False", "NoConflicts"),
        id="unsupported protocol",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: TCPRoute}]}}"
        ),
        "http",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidRouteKinds"),
        ("False", "NoConflicts"),
        id="only an invalid route kind",
    ),
    pytest.param(
        gateway(
            "{name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: "
            "[{kind: TCPRoute}, {kind: HTTPRoute}]}}"
        ),
        "http",
        ("True", "Accepted"),
        ("True", "Programmed"),
        ("False", "InvalidRouteKinds"),
        ("False", "NoConflicts"),
        id="an invalid route kind beside a valid one",
    ),
    pytest.param(
        gateway(https(refs="[{name: nope}]")),
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="missing Secret",
    ),
    pytest.param(
        gateway(https(refs="[{group: wrong.example.com, kind: Secret, name: site}]")) + SECRETS,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="certificateRef group",
    ),
    pytest.param(
        gateway(https(refs="[{kind: ConfigMap, name: site}]")) + SECRETS,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="certificateRef kind",
    ),
    pytest.param(
        gateway(https(refs="[{name: malformed}]")) + MALFORMED,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="malformed certificate",
    ),
    pytest.param(
        gateway(https(refs="[{name: mismatched}]")) + MISMATCHED,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="key of another certificate",
    ),
    pytest.param(
        gateway(https(refs="[{name: opaque}]")) + OPAQUE,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="Secret not of type kubernetes.io/tls",
    ),
    pytest.param(
        gateway("{name: https, port: 443, protocol: HTTPS}"),
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="HTTPS without tls",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]")) + SECRETS,
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "RefNotPermitted"),
        ("False", "NoConflicts"),
        id="Secret in another namespace without a grant",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]")) + SECRETS + grant(),
        "https",
        *VALID,
        id="Secret in another namespace, granted by name",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]")) + SECRETS + grant(to_name=None),
        "https",
        *VALID,
        id="Secret in another namespace, every Secret granted",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]")) + SECRETS + grant("HTTPRoute"),
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "RefNotPermitted"),
        ("False", "NoConflicts"),
        id="grant for another kind",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]")) + SECRETS + grant(to_name="x"),
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "RefNotPermitted"),
        ("False", "NoConflicts"),
        id="grant for another Secret name",
    ),
    pytest.param(
        gateway(https(refs="[{name: other, namespace: certs}]"))
        + SECRETS
        + grant(namespace="elsewhere"),
        "https",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "RefNotPermitted"),
        ("False", "NoConflicts"),
        id="grant for another namespace",
    ),
    pytest.param(
        gateway(https(refs="[{name: site}, {name: nope}]")) + SECRETS,
        "https",
        ("True", "Accepted"),
        ("True", "Programmed"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="one usable certificate of two",
    ),
    pytest.param(
        gateway(HTTP, https(name="clash", extra=", hostname: a.example.com").replace("443", "80"))
        + SECRETS,
        "clash",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("True", "ResolvedRefs"),
        ("True", "ProtocolConflict"),
        id="another protocol on the port",
    ),
    pytest.param(
        gateway(HTTP, https(name="clash", extra=", hostname: a.example.com").replace("443", "80"))
        + SECRETS,
        "http",
        *VALID,
        id="the first listener of a port keeps it",
    ),
]


@pytest.mark.parametrize(
    ("manifests", "name", "accepted", "programmed", "resolved", "conflicted"), LISTENERS
)
def test_listener_conditions(
    manifests: str,
    name: str,
    accepted: tuple[str, str],
    programmed: tuple[str, str],
    resolved: tuple[str, str],
    conflicted: tuple[str, str],
) -> None:
    dag = build_text(manifests)
    assert listener_condition(dag, "gw", name, "Accepted") == accepted
    assert listener_condition(dag, "gw", name, "Programmed") == programmed
    assert listener_condition(dag, "gw", name, "ResolvedRefs") == resolved
    assert listener_condition(dag, "gw", name, "Conflicted") == conflicted
    for entry in status(dag, "Gateway", "gw")["listeners"]:
        assert all(c["observedGeneration"] == 4 for c in entry["conditions"])


def test_hostname_conflict_reaches_the_dag_even_if_a_source_does_not_check() -> None:
    # The CRD (and so the parser) refuses this; the DAG must still not hand Envoy two
    # filter chains with the same match.
    from dragoman.dag.build import build
    from dragoman.objects import Gateway, GatewayListener, ObjectMeta
    from dragoman.store import Store

    gw = Gateway(
        ObjectMeta("gw"),
        "dragoman",
        (
            GatewayListener("a", 80, hostname="x.example.com"),
            GatewayListener("b", 80, hostname="x.example.com"),
        ),
    )
    dag = build(Store.from_objects([gw]))
    assert listener_condition(dag, "gw", "b", "Conflicted") == ("True", "HostnameConflict")
    assert listener_condition(dag, "gw", "a", "Conflicted") == ("False", "NoConflicts")


def test_supported_kinds() -> None:
    dag = build_text(
        gateway(
            HTTP,
            "{name: grpc-only, port: 81, protocol: HTTP,"
            " allowedRoutes: {kinds: [{kind: GRPCRoute}]}}",
            "{name: tcp, port: 82, protocol: example.com/sctp}",
        )
    )
    kinds = {
        entry["name"]: [k["kind"] for k in entry["supportedKinds"]]
        for entry in status(dag, "Gateway", "gw")["listeners"]
    }
    assert kinds == {"http": ["HTTPRoute", "GRPCRoute"], "grpc-only": ["GRPCRoute"], "tcp": []}
    groups = {k["group"] for k in listener(dag, "gw", "http")["supportedKinds"]}
    assert groups == {"gateway.networking.k8s.io"}


# (id, manifests, Accepted, Programmed)
GATEWAYS = [
    pytest.param(gateway(HTTP), ("True", "Accepted"), ("True", "Programmed"), id="valid"),
    pytest.param(
        gateway(HTTP, "{name: tcp, port: 9000, protocol: example.com/sctp}"),
        ("True", "ListenersNotValid"),
        ("True", "Programmed"),
        id="some listeners not valid",
    ),
    pytest.param(
        gateway("{name: tcp, port: 9000, protocol: example.com/sctp}"),
        ("False", "ListenersNotValid"),
        ("False", "Invalid"),
        id="no listener valid",
    ),
    pytest.param(
        gateway(https(refs="[{name: nope}]")),
        ("True", "ListenersNotValid"),
        ("False", "Invalid"),
        id="accepted but nothing can be served",
    ),
    pytest.param(
        gateway(
            HTTP,
            extra=PARAMETERS,
        ),
        ("False", "InvalidParameters"),
        ("False", "Invalid"),
        id="parametersRef",
    ),
]


@pytest.mark.parametrize(("manifests", "accepted", "programmed"), GATEWAYS)
def test_gateway_conditions(
    manifests: str, accepted: tuple[str, str], programmed: tuple[str, str]
) -> None:
    dag = build_text(DRAGOMAN_CLASS, manifests)
    assert gateway_condition(dag, "gw", "Accepted") == accepted
    assert gateway_condition(dag, "gw", "Programmed") == programmed


def test_a_gateway_that_is_not_accepted_is_not_served() -> None:
    dag = build_text(
        gateway(
            HTTP,
            extra=PARAMETERS,
        )
    )
    assert dag.groups[ALL_GATEWAYS].listeners == ()
    # Its listeners are valid, but none is programmed: the Gateway serves nothing.
    assert listener_condition(dag, "gw", "http", "Accepted") == ("True", "Accepted")
    assert listener_condition(dag, "gw", "http", "Programmed") == ("False", "Invalid")
    [programmed] = [
        c for c in listener(dag, "gw", "http")["conditions"] if c["type"] == "Programmed"
    ]
    assert programmed["message"].startswith("the Gateway is not accepted: dragoman takes no")


# --- GatewayClass ---------------------------------------------------------------------------

OTHER_CLASS = f"""
apiVersion: {GW}
kind: GatewayClass
metadata: {{name: theirs}}
spec: {{controllerName: example.com/another-controller}}
---
"""


def served_gateways(dag) -> list[str]:
    return sorted(name for name in dag.groups if name != ALL_GATEWAYS)


def test_gateways_of_dragomans_class_are_served() -> None:
    dag = build_text(DRAGOMAN_CLASS, gateway(HTTP))
    assert served_gateways(dag) == ["default/gw"]
    assert status(dag, "GatewayClass", "dragoman")["conditions"][0]["reason"] == "Accepted"
    message = status(dag, "Gateway", "gw")["conditions"][0]["message"]
    assert "does not exist" not in message


def test_a_class_of_another_controller_is_never_served_nor_given_status() -> None:
    for options in (BuildOptions(), BuildOptions(require_gateway_class=True)):
        dag = build_text(OTHER_CLASS, gateway(HTTP, class_name="theirs"), options=options)
        assert served_gateways(dag) == []
        assert dag.groups[ALL_GATEWAYS].listeners == ()
        assert dag.statuses == {}
    problems = build_text(OTHER_CLASS, gateway(HTTP, class_name="theirs")).problems
    assert [(p.reason, p.field) for p in problems] == [("NotServed", "spec.gatewayClassName")]


def test_an_absent_class_is_served_in_manifest_mode_with_a_note() -> None:
    dag = build_text(gateway(HTTP, class_name="missing"))
    assert served_gateways(dag) == ["default/gw"]
    accepted = status(dag, "Gateway", "gw")["conditions"][0]
    assert accepted["status"] == "True"
    assert "GatewayClass 'missing' does not exist" in accepted["message"]
    assert CONTROLLER in accepted["message"]


def test_an_absent_class_is_not_served_when_classes_are_required() -> None:
    dag = build_text(
        gateway(HTTP, class_name="missing"), options=BuildOptions(require_gateway_class=True)
    )
    assert served_gateways(dag) == []
    assert dag.statuses == {}


def test_the_controller_name_is_configurable() -> None:
    options = BuildOptions(controller_name="example.com/another-controller")
    dag = build_text(
        OTHER_CLASS, DRAGOMAN_CLASS, gateway(HTTP, class_name="theirs"), options=options
    )
    assert served_gateways(dag) == ["default/gw"]
    assert list(map(str, dag.statuses)) == ["GatewayClass/theirs", "Gateway/default/gw"]


def test_a_class_with_parameters_is_not_accepted_and_its_gateways_are_not_served() -> None:
    with_parameters = DRAGOMAN_CLASS.replace(
        "spec: {", "spec: {parametersRef: {group: example.com, kind: Config, name: c}, "
    )
    dag = build_text(with_parameters, "---", gateway(HTTP))
    assert status(dag, "GatewayClass", "dragoman")["conditions"][0]["reason"] == "InvalidParameters"
    assert gateway_condition(dag, "gw", "Accepted") == ("False", "InvalidParameters")
    assert listener_condition(dag, "gw", "http", "Programmed") == ("False", "Invalid")
    assert dag.groups[ALL_GATEWAYS].listeners == ()


def test_gateway_class_observed_generation() -> None:
    bumped = DRAGOMAN_CLASS.replace(
        "metadata: {name: dragoman}", "metadata: {name: dragoman, generation: 7}"
    )
    dag = build_text(bumped)
    [accepted] = status(dag, "GatewayClass", "dragoman")["conditions"]
    assert accepted["observedGeneration"] == 7


# --- HTTPS in the built configuration -------------------------------------------------------


def test_https_listener_has_one_chain_per_hostname_with_its_certificate() -> None:
    dag = build_text(
        gateway(
            https("site", "[{name: site}]", ", hostname: site.example.com"),
            https(
                "other", "[{name: other, namespace: certs}]", ", hostname: '*.other.example.com'"
            ),
            https("fallback", "[{name: site}]"),
        )
        + SECRETS
        + grant(to_name=None)
    )
    [value] = dag.groups["default/gw"].listeners
    assert isinstance(value, HttpsListener) and value.port == 443
    chains = [(chain.server_names, chain.route_table) for chain in value.filter_chains]
    assert chains == [
        (("site.example.com",), "https-443/site.example.com"),
        (("*.other.example.com",), "https-443/*.other.example.com"),
        ((), "https-443"),
    ]
    certificates = [chain.certificates[0].certificate_chain for chain in value.filter_chains]
    assert certificates == [SITE.certificate, OTHER.certificate, SITE.certificate]
    assert "PRIVATE KEY" not in repr(value)


def test_gateways_sharing_a_port_in_the_all_gateways_group() -> None:
    first = gateway(HTTP, name="a")
    second = gateway(https(extra=", hostname: site.example.com").replace("443", "80"), name="b")
    third = gateway(HTTP.replace("name: http", "name: again"), name="c")
    dag = build_text(first, second, third, SECRETS)
    # Envoy has one listener per port: the first Gateway's protocol (and hostname) wins it ...
    [shared] = dag.groups[ALL_GATEWAYS].listeners
    assert (type(shared).__name__, shared.port) == ("HttpListener", 80)
    # ... while an Envoy serving one Gateway gets that Gateway's own listener.
    [own] = dag.groups["default/b"].listeners
    assert isinstance(own, HttpsListener) and own.port == 80
    assert [type(g.listeners[0]).__name__ for n, g in sorted(dag.groups.items()) if n] == [
        "HttpListener",
        "HttpsListener",
        "HttpListener",
    ]
