"""spec.externalIPs on an ExternalName Service: traffic goes to those addresses, judged by the
address rules like resolved ones, while the external name stays the Host, SNI and the name
the certificate must carry. Invalid or denied entries are reported on the routes."""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2

from dragoman.dag.context import build_context
from dragoman.dag.model import DnsCluster
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.clusters import ResolvedCluster, resolved_cluster
from dragoman.envoy.resources.cluster_messages import cluster
from dragoman.envoy.translate_options import DEFAULT_OPTIONS
from dragoman.store import Store
from tests.support.builders import external_service, http_route, typed
from tests.support.status_builds import GATEWAY, build_text, parent_conditions, route_problems


def hosts(dag, name: str = "default/ext/443") -> list[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    cla = dag.load_assignments[name]
    return [(e.address, e.port, e.hostname) for p in cla.localities for e in p.endpoints]


def test_usable_external_ips_are_the_endpoints_and_the_rest_is_reported() -> None:
    dag = build_text(
        GATEWAY,
        external_service(
            "ext",
            "api.example.com",
            external_ips=["203.0.113.5", "not-an-ip", "127.0.0.1", "203.0.113.5", "2001:DB8::7"],
        ),
        http_route("r", "ext", 443),
    )

    [value] = dag.clusters.values()
    assert isinstance(value, DnsCluster)
    assert value.addresses == ("203.0.113.5", "2001:db8::7")
    # Served over EDS: Envoy resolves nothing; the name stays each endpoint's hostname.
    assert cluster(value, DEFAULT_OPTIONS).type == cluster_pb2.Cluster.EDS
    assert hosts(dag) == [
        ("203.0.113.5", 443, "api.example.com"),
        ("2001:db8::7", 443, "api.example.com"),
    ]
    reported = [p.message for p in route_problems(dag)]
    assert len(reported) == 2, reported
    assert "spec.externalIPs: [1] 'not-an-ip' is not an IP address; not used" in reported[0]
    assert "[2] 127.0.0.1 is a loopback address" in reported[1]
    assert parent_conditions(dag)["ResolvedRefs"]["status"] == "True"


def test_no_usable_external_ip_refuses_the_backend() -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", external_ips=["169.254.169.254", "0.0.0.0"]),
        http_route("r", "ext", 443),
    )

    assert dag.clusters == {}
    refs = parent_conditions(dag)["ResolvedRefs"]
    assert (refs["status"], refs["reason"]) == ("False", "NotAllowedByPolicy")
    assert "169.254.169.254 is a cloud metadata address" in refs["message"]


def test_with_the_dns_check_external_ips_need_no_resolution() -> None:
    dag = build_text(
        GATEWAY,
        external_service("ext", "api.example.com", external_ips=["203.0.113.5"]),
        http_route("r", "ext", 443),
        options=BuildOptions(dns_check=True),
        dns={},
    )

    assert hosts(dag) == [("203.0.113.5", 443, "api.example.com")]
    assert dag.dns_hostnames == ()  # nothing to resolve


def test_the_cluster_comes_with_its_warnings() -> None:
    """What of the Service is not used is found once, as the cluster is resolved."""
    store = Store.from_objects(
        typed(external_service("ext", "api.example.com", external_ips=["203.0.113.5", "::1"]))
    )
    context = build_context(store, BuildOptions())
    resolved = resolved_cluster(store.services[("default", "ext")], 443, context)
    assert isinstance(resolved, ResolvedCluster)
    assert isinstance(resolved.cluster, DnsCluster)
    assert resolved.cluster.addresses == ("203.0.113.5",)
    [warning] = resolved.warnings
    assert warning.startswith("Service default/ext spec.externalIPs: [1] ::1 is a loopback")
    assert warning.endswith("; not used")
    # Without spec.externalIPs: nothing to warn of.
    plain = Store.from_objects(typed(external_service("ext", "api.example.com")))
    context = build_context(plain, BuildOptions())
    resolved = resolved_cluster(plain.services[("default", "ext")], 443, context)
    assert isinstance(resolved, ResolvedCluster) and resolved.warnings == ()
