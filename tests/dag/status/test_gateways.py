"""Gateway, listener and GatewayClass status: every reason dragoman reports, table-driven."""

from __future__ import annotations

from functools import partial

import pytest

from dragoman.dag.model import ALL_GATEWAYS, HttpsListener
from dragoman.dag.options import BuildOptions
from tests.support.builders import (
    Object,
    allowed_routes,
    gateway,
    gateway_class,
    listener,
    listener_tls,
    local_ref,
    reference_grant,
    secret,
    tls_secret,
)
from tests.support.certificates import certificate_authority
from tests.support.status_builds import (
    CONTROLLER,
    build_text,
    gateway_condition,
    listener_condition,
    status,
)
from tests.support.status_builds import listener as listener_status

CA = certificate_authority()
SITE = CA.issue("site.example.com")
OTHER = CA.issue("other.example.com")


# This file's world: Gateways at generation 4.
gw = partial(gateway, generation=4)
HTTP = listener()
SCTP = listener("tcp", 9000, "example.com/sctp")
https_listener = partial(listener, port=443, protocol="HTTPS")
SITE_HTTPS = https_listener("https", tls=listener_tls("site"))
CROSS_NAMESPACE = https_listener("https", tls=listener_tls({"name": "other", "namespace": "certs"}))
PARAMETERS = {"parametersRef": {"group": "example.com", "kind": "Config", "name": "c"}}
SECRETS = [
    tls_secret("site", SITE.certificate, SITE.private_key),
    tls_secret("other", OTHER.certificate, OTHER.private_key, namespace="certs"),
]
MISMATCHED = tls_secret("mismatched", SITE.certificate, OTHER.private_key)
OPAQUE = secret("opaque", {"tls.crt": SITE.certificate, "tls.key": SITE.private_key})
MALFORMED = tls_secret("malformed", b"Hello world\n", b"Hello world\n")
grant = partial(
    reference_grant,
    "g",
    "certs",
    from_kind="Gateway",
    from_namespace="default",
    to_kind="Secret",
    to_name="other",
    version="v1beta1",
)

VALID = (
    ("True", "Accepted"),
    ("True", "Programmed"),
    ("True", "ResolvedRefs"),
    ("False", "NoConflicts"),
)
REFUSED_CERTIFICATE = (
    ("True", "Accepted"),
    ("False", "Invalid"),
    ("False", "InvalidCertificateRef"),
    ("False", "NoConflicts"),
)
NOT_PERMITTED = (
    ("True", "Accepted"),
    ("False", "Invalid"),
    ("False", "RefNotPermitted"),
    ("False", "NoConflicts"),
)
CLASH = listener("clash", 80, "HTTPS", hostname="a.example.com", tls=listener_tls("site"))


# (id, manifests, listener, Accepted, Programmed, ResolvedRefs, Conflicted)
LISTENERS = [
    pytest.param([gw(listeners=[HTTP])], "http", *VALID, id="plain HTTP"),
    pytest.param(
        [gw(listeners=[SITE_HTTPS]), *SECRETS], "https", *VALID, id="HTTPS with its Secret"
    ),
    pytest.param(
        [gw(listeners=[HTTP, SCTP])],
        "tcp",
        ("False", "UnsupportedProtocol"),
        ("False", "Invalid"),
        ("True", "ResolvedRefs"),
        ("False", "NoConflicts"),
        id="unsupported protocol",
    ),
    pytest.param(
        [gw(listeners=[listener(allowed_routes=allowed_routes(kinds=["TCPRoute"]))])],
        "http",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("False", "InvalidRouteKinds"),
        ("False", "NoConflicts"),
        id="only an invalid route kind",
    ),
    pytest.param(
        [gw(listeners=[listener(allowed_routes=allowed_routes(kinds=["TCPRoute", "HTTPRoute"]))])],
        "http",
        ("True", "Accepted"),
        ("True", "Programmed"),
        ("False", "InvalidRouteKinds"),
        ("False", "NoConflicts"),
        id="an invalid route kind beside a valid one",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https", tls=listener_tls("nope"))])],
        "https",
        *REFUSED_CERTIFICATE,
        id="missing Secret",
    ),
    pytest.param(
        [
            gw(
                listeners=[
                    https_listener(
                        "https", tls=listener_tls(local_ref("Secret", "site", "wrong.example.com"))
                    )
                ]
            ),
            *SECRETS,
        ],
        "https",
        *REFUSED_CERTIFICATE,
        id="certificateRef group",
    ),
    pytest.param(
        [
            gw(
                listeners=[
                    https_listener("https", tls=listener_tls({"kind": "ConfigMap", "name": "site"}))
                ]
            ),
            *SECRETS,
        ],
        "https",
        *REFUSED_CERTIFICATE,
        id="certificateRef kind",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https", tls=listener_tls("malformed"))]), MALFORMED],
        "https",
        *REFUSED_CERTIFICATE,
        id="malformed certificate",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https", tls=listener_tls("mismatched"))]), MISMATCHED],
        "https",
        *REFUSED_CERTIFICATE,
        id="key of another certificate",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https", tls=listener_tls("opaque"))]), OPAQUE],
        "https",
        *REFUSED_CERTIFICATE,
        id="Secret not of type kubernetes.io/tls",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https")])],
        "https",
        *REFUSED_CERTIFICATE,
        id="HTTPS without tls",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS],
        "https",
        *NOT_PERMITTED,
        id="Secret in another namespace without a grant",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS, grant()],
        "https",
        *VALID,
        id="Secret in another namespace, granted by name",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS, grant(to_name=None)],
        "https",
        *VALID,
        id="Secret in another namespace, every Secret granted",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS, grant(from_kind="HTTPRoute")],
        "https",
        *NOT_PERMITTED,
        id="grant for another kind",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS, grant(to_name="x")],
        "https",
        *NOT_PERMITTED,
        id="grant for another Secret name",
    ),
    pytest.param(
        [gw(listeners=[CROSS_NAMESPACE]), *SECRETS, grant(from_namespace="elsewhere")],
        "https",
        *NOT_PERMITTED,
        id="grant for another namespace",
    ),
    pytest.param(
        [gw(listeners=[https_listener("https", tls=listener_tls("site", "nope"))]), *SECRETS],
        "https",
        ("True", "Accepted"),
        ("True", "Programmed"),
        ("False", "InvalidCertificateRef"),
        ("False", "NoConflicts"),
        id="one usable certificate of two",
    ),
    pytest.param(
        [gw(listeners=[HTTP, CLASH]), *SECRETS],
        "clash",
        ("True", "Accepted"),
        ("False", "Invalid"),
        ("True", "ResolvedRefs"),
        ("True", "ProtocolConflict"),
        id="another protocol on the port",
    ),
    pytest.param(
        [gw(listeners=[HTTP, CLASH]), *SECRETS],
        "http",
        *VALID,
        id="the first listener of a port keeps it",
    ),
]


@pytest.mark.parametrize(
    ("manifests", "name", "accepted", "programmed", "resolved", "conflicted"), LISTENERS
)
def test_listener_conditions(
    manifests: list[Object],
    name: str,
    accepted: tuple[str, str],
    programmed: tuple[str, str],
    resolved: tuple[str, str],
    conflicted: tuple[str, str],
) -> None:
    dag = build_text(*manifests)
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
    grpc_only = listener("grpc-only", 81, allowed_routes=allowed_routes(kinds=["GRPCRoute"]))
    dag = build_text(gw(listeners=[HTTP, grpc_only, listener("tcp", 82, "example.com/sctp")]))
    kinds = {
        entry["name"]: [k["kind"] for k in entry["supportedKinds"]]
        for entry in status(dag, "Gateway", "gw")["listeners"]
    }
    assert kinds == {"http": ["HTTPRoute", "GRPCRoute"], "grpc-only": ["GRPCRoute"], "tcp": []}
    groups = {k["group"] for k in listener_status(dag, "gw", "http")["supportedKinds"]}
    assert groups == {"gateway.networking.k8s.io"}


# (id, manifests, Accepted, Programmed)
GATEWAYS = [
    pytest.param(gw(listeners=[HTTP]), ("True", "Accepted"), ("True", "Programmed"), id="valid"),
    pytest.param(
        gw(listeners=[HTTP, SCTP]),
        ("True", "ListenersNotValid"),
        ("True", "Programmed"),
        id="some listeners not valid",
    ),
    pytest.param(
        gw(listeners=[SCTP]),
        ("False", "ListenersNotValid"),
        ("False", "Invalid"),
        id="no listener valid",
    ),
    pytest.param(
        gw(listeners=[https_listener("https", tls=listener_tls("nope"))]),
        ("True", "ListenersNotValid"),
        ("False", "Invalid"),
        id="accepted but nothing can be served",
    ),
    pytest.param(
        gw(listeners=[HTTP], infrastructure=PARAMETERS),
        ("False", "InvalidParameters"),
        ("False", "Invalid"),
        id="parametersRef",
    ),
]


@pytest.mark.parametrize(("manifests", "accepted", "programmed"), GATEWAYS)
def test_gateway_conditions(
    manifests: Object, accepted: tuple[str, str], programmed: tuple[str, str]
) -> None:
    dag = build_text(gateway_class(), manifests)
    assert gateway_condition(dag, "gw", "Accepted") == accepted
    assert gateway_condition(dag, "gw", "Programmed") == programmed


def test_a_gateway_that_is_not_accepted_is_not_served() -> None:
    dag = build_text(gw(listeners=[HTTP], infrastructure=PARAMETERS))
    assert dag.groups[ALL_GATEWAYS].listeners == ()
    # Its listeners are valid, but none is programmed: the Gateway serves nothing.
    assert listener_condition(dag, "gw", "http", "Accepted") == ("True", "Accepted")
    assert listener_condition(dag, "gw", "http", "Programmed") == ("False", "Invalid")
    [programmed] = [
        c for c in listener_status(dag, "gw", "http")["conditions"] if c["type"] == "Programmed"
    ]
    assert programmed["message"].startswith("the Gateway is not accepted: dragoman takes no")


# --- GatewayClass ---------------------------------------------------------------------------

OTHER_CLASS = gateway_class("theirs", "example.com/another-controller")


def served_gateways(dag) -> list[str]:
    return sorted(name for name in dag.groups if name != ALL_GATEWAYS)


def test_gateways_of_dragomans_class_are_served() -> None:
    dag = build_text(gateway_class(), gw(listeners=[HTTP]))
    assert served_gateways(dag) == ["default/gw"]
    assert status(dag, "GatewayClass", "dragoman")["conditions"][0]["reason"] == "Accepted"
    message = status(dag, "Gateway", "gw")["conditions"][0]["message"]
    assert "does not exist" not in message


def test_a_class_of_another_controller_is_never_served_nor_given_status() -> None:
    for options in (BuildOptions(), BuildOptions(require_gateway_class=True)):
        dag = build_text(OTHER_CLASS, gw(listeners=[HTTP], class_name="theirs"), options=options)
        assert served_gateways(dag) == []
        assert dag.groups[ALL_GATEWAYS].listeners == ()
        assert dag.statuses == {}
    problems = build_text(OTHER_CLASS, gw(listeners=[HTTP], class_name="theirs")).problems
    assert [(p.reason, p.field) for p in problems] == [("NotServed", "spec.gatewayClassName")]


def test_an_absent_class_is_served_in_manifest_mode_with_a_note() -> None:
    dag = build_text(gw(listeners=[HTTP], class_name="missing"))
    assert served_gateways(dag) == ["default/gw"]
    accepted = status(dag, "Gateway", "gw")["conditions"][0]
    assert accepted["status"] == "True"
    assert "GatewayClass 'missing' does not exist" in accepted["message"]
    assert CONTROLLER in accepted["message"]


def test_an_absent_class_is_not_served_when_classes_are_required() -> None:
    dag = build_text(
        gw(listeners=[HTTP], class_name="missing"), options=BuildOptions(require_gateway_class=True)
    )
    assert served_gateways(dag) == []
    assert dag.statuses == {}


def test_the_controller_name_is_configurable() -> None:
    options = BuildOptions(controller_name="example.com/another-controller")
    dag = build_text(
        OTHER_CLASS, gateway_class(), gw(listeners=[HTTP], class_name="theirs"), options=options
    )
    assert served_gateways(dag) == ["default/gw"]
    assert list(map(str, dag.statuses)) == ["GatewayClass/theirs", "Gateway/default/gw"]


def test_a_class_with_parameters_is_not_accepted_and_its_gateways_are_not_served() -> None:
    with_parameters = gateway_class(parameters_ref=PARAMETERS["parametersRef"])
    dag = build_text(with_parameters, gw(listeners=[HTTP]))
    assert status(dag, "GatewayClass", "dragoman")["conditions"][0]["reason"] == "InvalidParameters"
    assert gateway_condition(dag, "gw", "Accepted") == ("False", "InvalidParameters")
    assert listener_condition(dag, "gw", "http", "Programmed") == ("False", "Invalid")
    assert dag.groups[ALL_GATEWAYS].listeners == ()


def test_gateway_class_observed_generation() -> None:
    dag = build_text(gateway_class(generation=7))
    [accepted] = status(dag, "GatewayClass", "dragoman")["conditions"]
    assert accepted["observedGeneration"] == 7


# --- HTTPS in the built configuration -------------------------------------------------------


def test_https_listener_has_one_chain_per_hostname_with_its_certificate() -> None:
    dag = build_text(
        gw(
            listeners=[
                https_listener("site", hostname="site.example.com", tls=listener_tls("site")),
                https_listener(
                    "other",
                    hostname="*.other.example.com",
                    tls=listener_tls({"name": "other", "namespace": "certs"}),
                ),
                https_listener("fallback", tls=listener_tls("site")),
            ]
        ),
        *SECRETS,
        grant(to_name=None),
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
    first = gw("a", listeners=[HTTP])
    second = gw(
        "b",
        listeners=[
            listener("https", 80, "HTTPS", hostname="site.example.com", tls=listener_tls("site"))
        ],
    )
    third = gw("c", listeners=[listener("again")])
    dag = build_text(first, second, third, *SECRETS)
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
