"""The DNS check as an input of the build: which resolved addresses the policy refuses, what
a name not (yet) resolved means, and the DNSResolved route condition."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest

from dragoman.dag.dns_check import DnsObservation, dns_resolved_condition
from dragoman.dag.external_name_policy import ExternalNamePolicy, domain_rule
from dragoman.dag.model import Dag, DnsCluster, DnsSettings
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.dns_settings import LOOKUP_FAMILY, RESOLVERS
from dragoman.dag.upstreams.endpoints import checked_assignment
from dragoman.objects import ObjectKey
from dragoman.runtime.server_config import ServerConfig
from tests.support.builders import external_service, http_route, service
from tests.support.status_builds import GATEWAY, build_text, parent_conditions, route_problems

# --- address rules ---------------------------------------------------------------------------


def networks(*cidrs: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


ADDRESS_RULES = [
    # (allowed networks, denied networks, address, words of the refusal or None)
    ((), (), "93.184.216.34", None),
    ((), (), "2606:2800:220:1::1", None),
    ((), (), "169.254.169.254", "cloud metadata"),
    ((), (), "::ffff:169.254.169.254", "cloud metadata"),
    ((), (), "fd00:ec2::254", "cloud metadata"),
    ((), (), "100.100.100.200", "cloud metadata"),
    ((), (), "168.63.129.16", "cloud metadata"),
    ((), (), "fd00:ec2::23", "cloud metadata"),
    ((), (), "127.0.0.1", "loopback"),
    ((), (), "127.9.9.9", "loopback"),
    ((), (), "::1", "loopback"),
    ((), (), "169.254.10.10", "link-local"),
    ((), (), "fe80::1", "link-local"),
    ((), (), "0.0.0.0", "unspecified"),
    ((), (), "::", "unspecified"),
    ((), ("10.0.0.0/8",), "10.1.2.3", "inside the denied range 10.0.0.0/8"),
    ((), ("10.0.0.0/8",), "::ffff:10.1.2.3", "inside the denied range 10.0.0.0/8"),
    (("203.0.113.0/24",), (), "203.0.113.7", None),
    (("203.0.113.0/24",), (), "198.51.100.1", "outside every allowed range"),
    # An allowed entry inside a built-in range makes an exception (labs and tests) ...
    (("127.0.0.0/8",), (), "127.0.0.4", None),
    (("127.0.0.4/32",), (), "127.0.0.5", "loopback"),
    # ... a broad one does not.
    (("0.0.0.0/0",), (), "127.0.0.1", "loopback"),
    (("0.0.0.0/0",), (), "169.254.169.254", "cloud metadata"),
    (("127.0.0.0/8",), (), "169.254.169.254", "cloud metadata"),
    # Denied wins over allowed.
    (("10.0.0.0/8",), ("10.9.0.0/16",), "10.9.1.1", "inside the denied range"),
]


@pytest.mark.parametrize(("allowed", "denied", "address", "refused"), ADDRESS_RULES)
def test_address_rules(
    allowed: tuple[str, ...], denied: tuple[str, ...], address: str, refused: str | None
) -> None:
    policy = ExternalNamePolicy(
        allowed_networks=networks(*allowed), denied_networks=networks(*denied)
    )

    reason = policy.address_refusal("api.example.com", [address])

    if refused is None:
        assert reason is None
    else:
        assert reason is not None
        assert refused in reason
        assert reason.startswith(f"externalName 'api.example.com' resolves to {address}, ")


def test_one_denied_address_refuses_the_whole_name() -> None:
    reason = ExternalNamePolicy().address_refusal(
        "api.example.com", ["93.184.216.34", "169.254.169.254"]
    )
    assert reason is not None and "169.254.169.254" in reason


# --- the build with the check on -------------------------------------------------------------

CHECKED = BuildOptions(dns_check=True)
OBJECTS = (GATEWAY, external_service("ext", "api.example.com"), http_route("r", "ext", 443))

OUTCOMES = [
    # (observation, served, ResolvedRefs reason when refused, DNSResolved (status, reason))
    (DnsObservation(("93.184.216.34",)), True, None, ("True", "Resolved")),
    (None, False, "DNSCheckPending", ("Unknown", "Pending")),
    (DnsObservation(error="NXDOMAIN"), False, "DNSCheckFailed", ("False", "NXDOMAIN")),
    (DnsObservation(error="Timeout"), False, "DNSCheckFailed", ("False", "Timeout")),
    (DnsObservation(error="SERVFAIL"), False, "DNSCheckFailed", ("False", "SERVFAIL")),
    (DnsObservation(error="NoAnswer"), False, "DNSCheckFailed", ("False", "NoAnswer")),
    # A resolver outage after a good answer keeps the checked addresses in service.
    (DnsObservation(("93.184.216.34",), "Timeout"), True, None, ("False", "Timeout")),
    (DnsObservation(("169.254.169.254",)), False, "NotAllowedByPolicy", ("True", "Resolved")),
    (DnsObservation(("127.0.0.1",)), False, "NotAllowedByPolicy", ("True", "Resolved")),
]


@pytest.mark.parametrize(("observation", "served", "refusal", "resolved"), OUTCOMES)
def test_the_check_decides_whether_an_external_name_is_served(
    observation: DnsObservation | None,
    served: bool,
    refusal: str | None,
    resolved: tuple[str, str],
) -> None:
    dns = {} if observation is None else {"api.example.com": observation}

    dag = build_text(*OBJECTS, options=CHECKED, dns=dns)

    assert dag.dns_hostnames == ("api.example.com",)
    conditions = parent_conditions(dag)
    refs = conditions["ResolvedRefs"]
    if served:
        assert list(dag.clusters) == ["default/ext/443"]
        assert refs["status"] == "True"
    else:
        assert dag.clusters == {}
        assert (refs["status"], refs["reason"]) == ("False", refusal)
    dns_resolved = conditions["DNSResolved"]
    assert (dns_resolved["status"], dns_resolved["reason"]) == resolved
    assert dns_resolved["message"].startswith("api.example.com: ")


def test_a_public_name_resolving_to_the_metadata_address_is_refused_by_name() -> None:
    dns = {"api.example.com": DnsObservation(("169.254.169.254",))}

    dag = build_text(*OBJECTS, options=CHECKED, dns=dns)

    refs = parent_conditions(dag)["ResolvedRefs"]
    assert "resolves to 169.254.169.254, a cloud metadata address" in refs["message"]
    assert parent_conditions(dag)["DNSResolved"]["message"] == "api.example.com: 169.254.169.254"


def test_without_the_check_nothing_is_resolved_or_reported() -> None:
    dag = build_text(*OBJECTS)

    assert dag.dns_hostnames == ()
    assert "DNSResolved" not in parent_conditions(dag)
    assert list(dag.clusters) == ["default/ext/443"]


def test_without_the_check_a_metadata_service_name_still_gets_no_cluster() -> None:
    dag = build_text(
        GATEWAY, external_service("ext", "metadata.google.internal"), http_route("r", "ext", 443)
    )

    assert dag.clusters == {}
    refs = parent_conditions(dag)["ResolvedRefs"]
    assert (refs["status"], refs["reason"]) == ("False", "UnsafeExternalName")
    assert "Google Cloud instance metadata service" in refs["message"]


def test_only_external_names_of_attached_routes_are_checked() -> None:
    detached = http_route("lost", "ext2", 443, parents=("nowhere",))
    dag = build_text(
        GATEWAY,
        service("web", 443),
        external_service("ext", "api.example.com"),
        external_service("ext2", "other.example.com"),
        external_service("alias", "web.default.svc.cluster.local"),
        external_service("bad", "localhost"),
        http_route("r", "ext", 443),
        http_route("r2", "alias", 443),
        http_route("r3", "bad", 443),
        detached,
        options=CHECKED,
    )

    assert dag.dns_hostnames == ("api.example.com",)
    assert "DNSResolved" not in parent_conditions(dag, "r2")  # an alias resolves nothing


def test_with_the_check_on_a_service_cannot_resolve_through_its_own_resolvers() -> None:
    """The check vets what dragoman's resolvers answer; a Service's own resolver (chosen by
    its namespace's owner) could answer anything, so it is refused and reported."""
    own_resolver = external_service(
        "ext", "api.example.com", annotations={RESOLVERS: "203.0.113.53:53"}
    )
    objects = (GATEWAY, own_resolver, http_route("r", "ext", 443))
    dns = {"api.example.com": DnsObservation(("93.184.216.34",))}

    checked = build_text(*objects, options=CHECKED, dns=dns)

    cluster = checked.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster) and cluster.dns.resolvers == ()
    partial = parent_conditions(checked)["PartiallyInvalid"]
    assert partial["reason"] == "UnsupportedValue"
    assert f"annotation {RESOLVERS}: is not allowed while the DNS check is on" in partial["message"]
    assert "using Envoy's resolver" in partial["message"]
    assert any(RESOLVERS in p.message for p in route_problems(checked))

    unchecked = build_text(*objects)
    cluster = unchecked.clusters["default/ext/443"]
    assert isinstance(cluster, DnsCluster) and cluster.dns.resolvers == (("203.0.113.53", 53),)
    assert "PartiallyInvalid" not in parent_conditions(unchecked)


def test_names_the_domain_policy_refuses_are_never_resolved() -> None:
    options = BuildOptions(
        dns_check=True,
        external_names=ExternalNamePolicy(denied_domains=(domain_rule("example.com"),)),
    )

    dag = build_text(*OBJECTS, options=options)

    assert dag.dns_hostnames == ()
    assert parent_conditions(dag)["ResolvedRefs"]["reason"] == "NotAllowedByPolicy"


def test_dns_resolved_lists_every_name_of_a_route() -> None:
    condition = dns_resolved_condition(
        ["a.example.com", "b.example.com", "c.example.com"],
        {
            "a.example.com": DnsObservation(("192.0.2.1", "192.0.2.2")),
            "b.example.com": DnsObservation(error="NXDOMAIN"),
        },
        generation=3,
    )

    assert condition["status"] == "False"
    assert condition["reason"] == "NXDOMAIN"
    assert condition["observedGeneration"] == 3
    assert condition["message"] == (
        "a.example.com: 192.0.2.1, 192.0.2.2; b.example.com: NXDOMAIN; "
        "c.example.com: not checked yet"
    )


# --- what Envoy connects to -----------------------------------------------------------------


def endpoint_hosts(dag: Dag, cluster: str = "default/ext/443") -> list[tuple[str, int, str]]:
    assignment = dag.load_assignments[cluster]
    return [(e.address, e.port, e.hostname) for p in assignment.localities for e in p.endpoints]


def test_a_checked_name_is_served_as_its_checked_addresses_keeping_the_name() -> None:
    dns = {"api.example.com": DnsObservation(("93.184.216.34", "2606:2800:220:1::1"))}
    both_families = dataclasses.replace(CHECKED, dns_lookup_family="ALL")

    dag = build_text(*OBJECTS, options=both_families, dns=dns)

    [cluster] = dag.clusters.values()
    assert isinstance(cluster, DnsCluster) and cluster.checked
    assert endpoint_hosts(dag) == [
        ("93.184.216.34", 443, "api.example.com"),
        ("2606:2800:220:1::1", 443, "api.example.com"),
    ]
    # A zone-less locality is still a locality (gRPC clients require one).
    assert [p.zone for p in dag.load_assignments["default/ext/443"].localities] == [""]


def test_without_the_check_envoy_resolves_and_no_endpoints_are_served() -> None:
    dag = build_text(*OBJECTS)

    [cluster] = dag.clusters.values()
    assert isinstance(cluster, DnsCluster) and not cluster.checked
    assert dag.load_assignments == {}


@pytest.mark.parametrize(
    ("family", "expected"),
    [
        ("v4", ["192.0.2.1"]),
        ("v6", ["2001:db8::1"]),
        ("v4-preferred", ["192.0.2.1"]),
        ("all", ["192.0.2.1", "2001:db8::1"]),
        # No annotation: the server's default (V4_PREFERRED), as Envoy would resolve it.
        (None, ["192.0.2.1"]),
    ],
)
def test_the_services_lookup_family_picks_the_checked_addresses_used(
    family: str | None, expected: list[str]
) -> None:
    annotations = {LOOKUP_FAMILY: family} if family else None
    service = external_service("ext", "api.example.com", annotations=annotations)
    dns = {"api.example.com": DnsObservation(("192.0.2.1", "2001:db8::1"))}

    dag = build_text(GATEWAY, service, http_route("r", "ext", 443), options=CHECKED, dns=dns)

    assert [address for address, _, _ in endpoint_hosts(dag)] == expected


@pytest.mark.parametrize(
    ("server_family", "expected"),
    [
        ("ALL", ["192.0.2.1", "2001:db8::1"]),
        ("V6_ONLY", ["2001:db8::1"]),
        ("V4_ONLY", ["192.0.2.1"]),
    ],
)
def test_the_servers_lookup_family_applies_to_services_that_name_none(
    server_family: str, expected: list[str]
) -> None:
    service = external_service("ext", "api.example.com")
    dns = {"api.example.com": DnsObservation(("192.0.2.1", "2001:db8::1"))}
    options = dataclasses.replace(CHECKED, dns_lookup_family=server_family)

    dag = build_text(GATEWAY, service, http_route("r", "ext", 443), options=options, dns=dns)

    assert [address for address, _, _ in endpoint_hosts(dag)] == expected


def test_the_config_files_lookup_family_reaches_the_build() -> None:
    config = ServerConfig(dns_lookup_family="V6_ONLY")
    assert config.build_options().dns_lookup_family == "V6_ONLY"
    assert config.translate_options().dns_lookup_family == "V6_ONLY"
    assert ServerConfig().build_options().dns_lookup_family == "V4_PREFERRED"


def test_v6_preferred_falls_back_to_v4_only_without_v6() -> None:
    cluster = DnsCluster("c", ObjectKey("Service", "d", "s"), "h.example", 80, checked=True)
    v4_only = checked_assignment(
        dataclasses.replace(cluster, dns=DnsSettings(lookup_family="V6_PREFERRED")),
        ["192.0.2.1"],
        "V4_ONLY",
    )
    assert [e.address for p in v4_only.localities for e in p.endpoints] == ["192.0.2.1"]


@pytest.mark.parametrize(
    ("family", "expected"),
    [("ALL", ("192.0.2.1", ("2001:db8::1",))), ("V4_PREFERRED", ("192.0.2.1", ()))],
)
def test_a_logical_cluster_is_one_host_with_every_checked_address(
    family: str, expected: tuple[str, tuple[str, ...]]
) -> None:
    cluster = DnsCluster("c", ObjectKey("Service", "d", "s"), "h.example", 80, checked=True)
    logical = dataclasses.replace(cluster, dns=DnsSettings(lookup_family=family, logical=True))
    assignment = checked_assignment(logical, ["192.0.2.1", "2001:db8::1"], "V4_PREFERRED")
    [locality] = assignment.localities
    [host] = locality.endpoints
    assert (host.address, host.additional_addresses) == expected
    assert (host.port, host.hostname) == (80, "h.example")
    # Strict: a host of each address.
    strict = checked_assignment(
        dataclasses.replace(cluster, dns=DnsSettings(lookup_family=family)),
        ["192.0.2.1", "2001:db8::1"],
        "V4_PREFERRED",
    )
    assert [e.additional_addresses for e in strict.localities[0].endpoints] == [()] * (
        1 + len(expected[1])
    )


GRACE = [
    # (observation, served addresses, DNSResolved (status, reason), words in its message)
    (
        DnsObservation(("169.254.169.254",), kept=("93.184.216.34",)),
        ["93.184.216.34"],
        ("False", "DNSCheckFailed"),
        (
            "resolves to 169.254.169.254, a cloud metadata address",
            "serving the last accepted addresses 93.184.216.34 until the grace ends",
        ),
    ),
    (
        DnsObservation(("127.0.0.1",), kept=()),
        [],
        ("False", "DNSCheckFailed"),
        "resolves to 127.0.0.1, a loopback address; no address is served (the backend answers 503)",
    ),
]


@pytest.mark.parametrize(("observation", "served", "resolved", "words"), GRACE)
def test_a_refused_answer_for_a_name_accepted_before_keeps_the_cluster_never_the_address(
    observation: DnsObservation,
    served: list[str],
    resolved: tuple[str, str],
    words: tuple[str, str],
) -> None:
    dag = build_text(*OBJECTS, options=CHECKED, dns={"api.example.com": observation})

    assert list(dag.clusters) == ["default/ext/443"]
    assert [address for address, _, _ in endpoint_hosts(dag)] == served
    assert route_problems(dag) == []  # the route stays valid: its backend answers 503
    conditions = parent_conditions(dag)
    assert conditions["ResolvedRefs"]["status"] == "True"
    dns_resolved = conditions["DNSResolved"]
    assert (dns_resolved["status"], dns_resolved["reason"]) == resolved
    assert all(w in dns_resolved["message"] for w in words), dns_resolved["message"]
