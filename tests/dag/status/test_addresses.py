"""Gateway status.addresses: the configured addresses, and spec.addresses honoured or
reported (AddressNotAssigned, UnsupportedAddress) as the Gateway API specifies."""

from __future__ import annotations

import pytest

from dragoman.dag.options import BuildOptions
from tests.support.builders import Object, gateway, service, service_port
from tests.support.status_builds import build_text, condition, status

SERVED_AT = BuildOptions(gateway_addresses=("203.0.113.10", "gw.example.com"))
ALL = [
    {"type": "IPAddress", "value": "203.0.113.10"},
    {"type": "Hostname", "value": "gw.example.com"},
]


GATEWAY = gateway(port=80, generation=2)


def test_every_served_gateway_lists_the_configured_addresses() -> None:
    dag = build_text(GATEWAY, options=SERVED_AT)
    gateway_status = status(dag, "Gateway", "gw")
    assert gateway_status["addresses"] == ALL
    assert condition(gateway_status["conditions"], "Programmed") == ("True", "Programmed")
    assert not dag.problems


def test_no_addresses_configured_writes_none() -> None:
    assert "addresses" not in status(build_text(GATEWAY), "Gateway", "gw")


def test_a_load_balancer_service_gives_its_ingress_addresses() -> None:
    ingress = [{"ip": "198.51.100.7"}, {"hostname": "lb.example.net"}, {}]
    envoy = {
        **service("envoy", namespace="edge", service_type="LoadBalancer", ports=[service_port(80)]),
        "status": {"loadBalancer": {"ingress": ingress}},
    }
    options = BuildOptions(address_service=("edge", "envoy"))
    dag = build_text(envoy, GATEWAY, options=options)
    assert status(dag, "Gateway", "gw")["addresses"] == [
        {"type": "IPAddress", "value": "198.51.100.7"},
        {"type": "Hostname", "value": "lb.example.net"},
    ]
    # The Service not there (yet): an empty list, so a stale address is taken away.
    assert status(build_text(GATEWAY, options=options), "Gateway", "gw")["addresses"] == []


def test_requested_addresses_among_those_served_are_honoured() -> None:
    dag = build_text(
        gateway(port=80, generation=2, addresses=[{"type": "Hostname", "value": "gw.example.com"}]),
        options=SERVED_AT,
    )
    gateway_status = status(dag, "Gateway", "gw")
    assert gateway_status["addresses"] == [{"type": "Hostname", "value": "gw.example.com"}]
    assert condition(gateway_status["conditions"], "Programmed") == ("True", "Programmed")
    assert not dag.problems


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        ([{"value": "192.0.2.1"}], "IPAddress '192.0.2.1' is not an address the Envoys"),
        ([{"type": "IPAddress"}], "dragoman does not choose addresses"),
        (
            [
                {"type": "IPAddress", "value": "203.0.113.10"},
                {"type": "Hostname", "value": "x.example"},
            ],
            "x.",
        ),
    ],
)
def test_a_requested_address_dragoman_cannot_assign_is_reported(
    requested: list[Object], message: str
) -> None:
    dag = build_text(gateway(port=80, generation=2, addresses=requested), options=SERVED_AT)
    gateway_status = status(dag, "Gateway", "gw")
    assert condition(gateway_status["conditions"], "Programmed") == (
        "False",
        "AddressNotAssigned",
    )
    assert condition(gateway_status["conditions"], "Accepted") == ("True", "Accepted")
    [problem] = dag.problems
    assert problem.reason == "AddressNotAssigned" and problem.field.startswith("spec.addresses")
    assert message in problem.message
    # Where the Gateway can be reached all the same.
    assert gateway_status["addresses"] == ALL


def test_an_unsupported_address_type_makes_the_gateway_not_accepted() -> None:
    dag = build_text(
        gateway(port=80, generation=2, addresses=[{"type": "example.com/pool", "value": "blue"}]),
        options=SERVED_AT,
    )
    gateway_status = status(dag, "Gateway", "gw")
    assert condition(gateway_status["conditions"], "Accepted") == ("False", "UnsupportedAddress")
    assert condition(gateway_status["conditions"], "Programmed")[0] == "False"
    [problem] = dag.problems
    assert (problem.field, problem.reason) == ("spec.addresses[0]", "UnsupportedAddress")
