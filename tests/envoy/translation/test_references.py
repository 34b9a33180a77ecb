"""Translated resources carry the names they make their client fetch, as translation had
them: an EDS cluster its CLA, a listener its route tables. Serving orders make-before-break
by them; nothing reads them back from the bytes. Per-type variants carry the same names."""

from __future__ import annotations

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import (
    ALL_GATEWAYS,
    AggregateCluster,
    Dag,
    DnsCluster,
    EdsCluster,
    HttpListener,
    HttpsListener,
    NodeGroup,
    RouteTable,
    TlsFilterChain,
)
from dragoman.envoy import translate
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.objects import ObjectKey
from dragoman.snapshots.resources import CLUSTER, LISTENER, Resource, Snapshot

WEB = ObjectKey("Service", "default", "web")
EDS = EdsCluster("default/web/80", WEB, port=80, target_port=8080)
DNS = DnsCluster("ext/default/ext/443", WEB, hostname="api.example.com", port=443)
CHECKED = DnsCluster(
    "ext/default/checked/443", WEB, hostname="checked.example.com", port=443, checked=True
)
FALLBACK = AggregateCluster("default/both/80", WEB, (EDS, DNS))
HTTP = HttpListener("http-80", 80, "http-80")
HTTPS = HttpsListener(
    "https-443",
    443,
    (
        TlsFilterChain(("a.example.com",), (), "https-443-a"),
        TlsFilterChain((), (), "https-443"),
    ),
)


def translated() -> Snapshot:
    clusters = (EDS, DNS, CHECKED, FALLBACK)
    tables = tuple(RouteTable(name, ()) for name in ("http-80", "https-443-a", "https-443"))
    group = NodeGroup(
        name=ALL_GATEWAYS,
        listeners=(HTTP, HTTPS),
        route_tables=tables,
        clusters=tuple(c.name for c in clusters),
    )
    dag = Dag(groups={ALL_GATEWAYS: group}, clusters={c.name: c for c in clusters})
    return translate(dag)[ALL_GATEWAYS]


def eds_service_names(resource: Resource) -> set[str]:
    """What an EDS cluster's bytes name (for the test only)."""
    message = Cluster.FromString(resource.body)
    if message.HasField("cluster_type") or message.type != Cluster.EDS:
        return set()
    return {message.eds_cluster_config.service_name or message.name}


def rds_names(resource: Resource) -> set[str]:
    """What a listener's connection managers fetch over RDS, from its bytes (for the test)."""
    names = set()
    for chain in Listener.FromString(resource.body).filter_chains:
        for item in chain.filters:
            manager = hcm_pb2.HttpConnectionManager()
            if item.typed_config.Unpack(manager) and manager.HasField("rds"):
                names.add(manager.rds.route_config_name)
    return names


def test_clusters_name_the_cla_they_read_over_eds() -> None:
    clusters = translated().of_type(CLUSTER).resources
    assert clusters[EDS.name].references == (EDS.name,)
    assert clusters[CHECKED.name].references == (CHECKED.name,)  # the checked addresses
    assert clusters[DNS.name].references == ()  # Envoy resolves it itself
    assert clusters[FALLBACK.name].references == ()  # its children read theirs
    for resource in clusters.values():
        assert set(resource.references) == eds_service_names(resource)


def test_listeners_name_the_route_tables_they_fetch() -> None:
    listeners = translated().of_type(LISTENER).resources
    assert listeners[HTTP.name].references == ("http-80",)
    assert sorted(listeners[HTTPS.name].references) == ["https-443", "https-443-a"]
    for resource in listeners.values():
        assert set(resource.references) == rds_names(resource)


def test_per_type_variants_name_the_same_resources_through_their_own_streams() -> None:
    snapshot = translated()
    for delta in (False, True):
        variant = PerTypeConfigSources("xds").per_type(snapshot, delta=delta)
        for type_url in (CLUSTER, LISTENER):
            before = snapshot.of_type(type_url).resources
            after = variant.of_type(type_url).resources
            assert {n: r.references for n, r in after.items()} == {
                n: r.references for n, r in before.items()
            }
        eds = Cluster.FromString(variant.of_type(CLUSTER).resources[EDS.name].body)
        source = eds.eds_cluster_config.eds_config.api_config_source
        assert [s.envoy_grpc.cluster_name for s in source.grpc_services] == ["xds"]
        # A cluster whose bytes name no config source is served as it is.
        dns = snapshot.of_type(CLUSTER).resources[DNS.name]
        assert variant.of_type(CLUSTER).resources[DNS.name] is dns
