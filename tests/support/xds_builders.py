"""Small real xDS resources, snapshots and requests for the xDS protocol tests."""

from __future__ import annotations

from collections.abc import Iterable

from envoy.config.cluster.v3.cluster_pb2 import Cluster
from envoy.config.core.v3.address_pb2 import Address, SocketAddress
from envoy.config.core.v3.base_pb2 import Node
from envoy.config.endpoint.v3.endpoint_components_pb2 import (
    Endpoint,
    LbEndpoint,
    LocalityLbEndpoints,
)
from envoy.config.endpoint.v3.endpoint_pb2 import ClusterLoadAssignment
from envoy.config.listener.v3.listener_components_pb2 import Filter, FilterChain
from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.config.route.v3.route_components_pb2 import (
    Route,
    RouteAction,
    RouteMatch,
    VirtualHost,
)
from envoy.config.route.v3.route_pb2 import RouteConfiguration
from envoy.config.route.v3.scoped_route_pb2 import ScopedRouteConfiguration
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm,
)
from envoy.extensions.transport_sockets.tls.v3.secret_pb2 import Secret
from envoy.service.discovery.v3.discovery_pb2 import (
    DeltaDiscoveryRequest,
    DiscoveryRequest,
    DiscoveryResponse,
)
from google.protobuf.any_pb2 import Any
from google.rpc.status_pb2 import Status

from dragoman.envoy.resources.config_sources import config_source
from dragoman.envoy.translate_options import DEFAULT_OPTIONS, TranslateOptions
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.envoy.translation.translated import Translated
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
    Resource,
    Snapshot,
    TypeSnapshot,
)
from dragoman.xds.protocol.wire import DeltaResponse, SotwResponse
from dragoman.xds.server.snapshot_variants import ConfigSources

# The xDS tests' resources are translated from small values, as dragoman's are: the per-type
# variant of a snapshot is translated from the same values with per-type config sources.


def eds_cluster(name: str, service_name: str = "", timeout_s: int = 1) -> Resource:
    references = (service_name or name,)
    source = (name, service_name, timeout_s)
    return Translated.made(name, source, _eds_cluster, DEFAULT_OPTIONS, references)


def _eds_cluster(source: tuple[str, str, int], options: TranslateOptions) -> Cluster:
    name, service_name, timeout_s = source
    cluster = Cluster(name=name, type=Cluster.EDS)
    cluster.connect_timeout.seconds = timeout_s
    cluster.eds_cluster_config.eds_config.CopyFrom(config_source(options))
    if service_name:
        cluster.eds_cluster_config.service_name = service_name
    return cluster


def dns_cluster(name: str, hostname: str) -> Resource:
    cluster = Cluster(name=name, type=Cluster.STRICT_DNS)
    cluster.load_assignment.cluster_name = name
    cluster.load_assignment.endpoints.add().lb_endpoints.add().endpoint.address.socket_address.CopyFrom(
        SocketAddress(address=hostname, port_value=443)
    )
    return Resource.of(name, cluster)


def socket(address: str, port: int) -> SocketAddress:
    return SocketAddress(address=address, port_value=port)


def endpoints(name: str, *ips: str) -> Resource:
    lb_endpoints = [
        LbEndpoint(
            endpoint=Endpoint(
                address=Address(socket_address=SocketAddress(address=ip, port_value=80))
            )
        )
        for ip in ips
    ]
    locality = LocalityLbEndpoints(lb_endpoints=lb_endpoints)
    locality.load_balancing_weight.value = 1
    assignment = ClusterLoadAssignment(cluster_name=name, endpoints=[locality])
    return Resource.of(name, assignment)


def listener(name: str, route_config: str, port: int = 8080) -> Resource:
    references = (route_config,)
    source = (name, route_config, port)
    return Translated.made(name, source, _listener, DEFAULT_OPTIONS, references)


def _listener(source: tuple[str, str, int], options: TranslateOptions) -> Listener:
    name, route_config, port = source
    manager = hcm.HttpConnectionManager(stat_prefix=name)
    manager.rds.route_config_name = route_config
    manager.rds.config_source.CopyFrom(config_source(options))
    config = Any()
    config.Pack(manager, deterministic=True)
    message = Listener(
        name=name,
        address=Address(socket_address=SocketAddress(address="0.0.0.0", port_value=port)),
        filter_chains=[FilterChain(filters=[Filter(name="hcm", typed_config=config)])],
    )
    return message


def routes(name: str, *clusters: str) -> Resource:
    message = RouteConfiguration(
        name=name,
        virtual_hosts=[
            VirtualHost(
                name="all",
                domains=["*"],
                routes=[
                    Route(match=RouteMatch(prefix=f"/{c}"), route=RouteAction(cluster=c))
                    for c in clusters
                ],
            )
        ],
    )
    return Resource.of(name, message)


def snapshot(
    clusters: Iterable[Resource] = (),
    assignments: Iterable[Resource] = (),
    listeners: Iterable[Resource] = (),
    route_configs: Iterable[Resource] = (),
) -> Snapshot:
    return Snapshot(
        types={
            CLUSTER: TypeSnapshot.of(clusters),
            ENDPOINT: TypeSnapshot.of(assignments),
            LISTENER: TypeSnapshot.of(listeners),
            ROUTE: TypeSnapshot.of(route_configs),
        }
    )


def request(
    type_url: str,
    names: Iterable[str] = (),
    *,
    version: str = "",
    nonce: str = "",
    error: str | None = None,
    node: Node | None = None,
) -> DiscoveryRequest:
    message = DiscoveryRequest(
        type_url=type_url, resource_names=list(names), version_info=version, response_nonce=nonce
    )
    if node is not None:
        message.node.CopyFrom(node)
    if error is not None:
        message.error_detail.CopyFrom(Status(code=3, message=error))
    return message


def ack(response: SotwResponse | DiscoveryResponse, names: Iterable[str] = ()) -> DiscoveryRequest:
    return request(response.type_url, names, version=response.version_info, nonce=response.nonce)


def nack(
    response: SotwResponse | DiscoveryResponse,
    error: str,
    names: Iterable[str] = (),
    kept_version: str = "",
) -> DiscoveryRequest:
    return request(
        response.type_url, names, version=kept_version, nonce=response.nonce, error=error
    )


def message_of(response: SotwResponse | DiscoveryResponse) -> DiscoveryResponse:
    """The protobuf message of a response, decoded from the very bytes a stream would write."""
    return response.message() if isinstance(response, SotwResponse) else response


def names_in(response: SotwResponse | DiscoveryResponse | DeltaResponse) -> list[str]:
    """Resource names carried by a response, decoded from the payloads, in order."""
    if isinstance(response, DeltaResponse):
        return [packed_name(wrapper.resource) for wrapper in response.message().resources]
    return [packed_name(packed) for packed in message_of(response).resources]


def packed_name(packed: Any) -> str:
    decoders = {
        CLUSTER: Cluster,
        ENDPOINT: ClusterLoadAssignment,
        LISTENER: Listener,
        ROUTE: RouteConfiguration,
        SCOPED_ROUTE: ScopedRouteConfiguration,
        SECRET: Secret,
    }
    message = decoders[packed.type_url].FromString(packed.value)
    return message.cluster_name if packed.type_url == ENDPOINT else message.name


def delta_request(
    type_url: str,
    subscribe: Iterable[str] = (),
    unsubscribe: Iterable[str] = (),
    *,
    nonce: str = "",
    initial: dict[str, str] | None = None,
    error: str | None = None,
    node: Node | None = None,
) -> DeltaDiscoveryRequest:
    message = DeltaDiscoveryRequest(
        type_url=type_url,
        resource_names_subscribe=list(subscribe),
        resource_names_unsubscribe=list(unsubscribe),
        response_nonce=nonce,
        initial_resource_versions=initial or {},
    )
    if node is not None:
        message.node.CopyFrom(node)
    if error is not None:
        message.error_detail.CopyFrom(Status(code=3, message=error))
    return message


def delta_ack(response: DeltaResponse) -> DeltaDiscoveryRequest:
    return delta_request(response.type_url, nonce=response.nonce)


def delta_nack(response: DeltaResponse, error: str) -> DeltaDiscoveryRequest:
    return delta_request(response.type_url, nonce=response.nonce, error=error)


def versions_in(response: DeltaResponse) -> dict[str, str]:
    """name -> version of the resources a delta response carries, from its bytes."""
    return {r.name: r.version for r in response.message().resources}


# One per test process, as one per server: the per-type rewrites it remembers are shared.
_PER_TYPE = PerTypeConfigSources()


def per_type_snapshot(snapshot: Snapshot, sources: ConfigSources) -> Snapshot:
    """`snapshot` as a client whose streams fetch through `sources` is served it."""
    if sources is ConfigSources.ADS:
        return snapshot
    return _PER_TYPE.per_type(snapshot, delta=sources is ConfigSources.PER_TYPE_DELTA)
