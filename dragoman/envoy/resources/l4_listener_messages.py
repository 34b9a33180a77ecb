"""TcpListener and UdpListener → envoy.config.listener.v3.Listener: Envoy's TCP proxy per
filter chain (chains chosen by SNI on TLS ports, TLS terminated first where the chain has
certificates), and the UDP proxy on a UDP socket."""

from __future__ import annotations

from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.listener.v3 import udp_listener_config_pb2 as udp_config_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import route_pb2 as udp_route_pb2
from envoy.extensions.filters.udp.udp_proxy.v3 import udp_proxy_pb2
from xds.core.v3 import extension_pb2
from xds.type.matcher.v3 import matcher_pb2

from dragoman.dag.model import L4Forward, TcpFilterChain, TcpListener, UdpListener
from dragoman.envoy.resources.access_log import L4_JSON_FIELDS, access_logs
from dragoman.envoy.resources.common_messages import pack, socket_address
from dragoman.envoy.resources.config_sources import config_source
from dragoman.envoy.resources.downstream_tls import downstream_tls_socket, tls_inspector
from dragoman.envoy.resources.route_messages import INVALID_BACKEND_CLUSTER
from dragoman.envoy.translate_options import AccessLogFormat, TranslateOptions

TCP_PROXY = "envoy.filters.network.tcp_proxy"
UDP_PROXY = "envoy.filters.udp_listener.udp_proxy"
# A cluster no configuration defines (the one HTTP routes name for the same purpose): the
# share of connections (or datagrams) of a backend whose reference is invalid goes here, and
# Envoy closes (or drops) it.
NO_BACKEND = INVALID_BACKEND_CLUSTER


def tcp_listener(value: TcpListener, options: TranslateOptions) -> listener_pb2.Listener:
    message = listener_pb2.Listener(
        name=value.name,
        address=socket_address(options.listener_address, value.port),
        filter_chains=[_tcp_chain(value.name, chain, options) for chain in value.filter_chains],
    )
    if value.inspect_tls:
        message.listener_filters.append(tls_inspector())
    return message


def udp_listener(value: UdpListener, options: TranslateOptions) -> listener_pb2.Listener:
    config = udp_proxy_pb2.UdpProxyConfig(
        stat_prefix=value.name,
        matcher=matcher_pb2.Matcher(on_no_match=_udp_route(value.forward)),
        # One line per session (the datagrams of one client address and port).
        access_log=access_logs(options.access_log, L4_JSON_FIELDS),
    )
    return listener_pb2.Listener(
        name=value.name,
        address=socket_address(
            options.listener_address, value.port, protocol=address_pb2.SocketAddress.UDP
        ),
        udp_listener_config=udp_config_pb2.UdpListenerConfig(),
        listener_filters=[
            listener_components_pb2.ListenerFilter(name=UDP_PROXY, typed_config=pack(config))
        ],
    )


def _udp_route(forward: L4Forward) -> matcher_pb2.Matcher.OnMatch:
    # The UDP proxy sends to one cluster: the DAG keeps only the heaviest backend.
    backend = max(forward.backends, key=lambda b: b.weight, default=None)
    cluster = backend.cluster if backend is not None and backend.cluster else NO_BACKEND
    return matcher_pb2.Matcher.OnMatch(
        action=extension_pb2.TypedExtensionConfig(
            name="route", typed_config=pack(udp_route_pb2.Route(cluster=cluster))
        )
    )


def tcp_proxy(
    stat_prefix: str, forward: L4Forward, access_log: AccessLogFormat = "off"
) -> tcp_proxy_pb2.TcpProxy:
    # Two backendRefs may name one cluster (or both be invalid): one entry, weights summed.
    weights: dict[str, int] = {}
    for backend in forward.backends:
        name = backend.cluster or NO_BACKEND
        weights[name] = weights.get(name, 0) + backend.weight
    # One line per connection.
    logs = access_logs(access_log, L4_JSON_FIELDS)
    if len(weights) <= 1:
        return tcp_proxy_pb2.TcpProxy(
            stat_prefix=stat_prefix, cluster=next(iter(weights), NO_BACKEND), access_log=logs
        )
    weighted = tcp_proxy_pb2.TcpProxy.WeightedCluster(
        clusters=[
            tcp_proxy_pb2.TcpProxy.WeightedCluster.ClusterWeight(name=name, weight=weight)
            for name, weight in weights.items()
        ]
    )
    return tcp_proxy_pb2.TcpProxy(
        stat_prefix=stat_prefix, weighted_clusters=weighted, access_log=logs
    )


def _tcp_chain(
    listener_name: str, chain: TcpFilterChain, options: TranslateOptions
) -> listener_components_pb2.FilterChain:
    proxy = tcp_proxy(listener_name, chain.forward, options.access_log)
    message = listener_components_pb2.FilterChain(
        name=chain.name,
        filters=[listener_components_pb2.Filter(name=TCP_PROXY, typed_config=pack(proxy))],
    )
    if chain.server_names:
        message.filter_chain_match.CopyFrom(
            listener_components_pb2.FilterChainMatch(server_names=list(chain.server_names))
        )
    if chain.certificates:
        message.transport_socket.CopyFrom(
            downstream_tls_socket(
                chain.certificates, (), config_source(options), chain.client_validation
            )
        )
    return message
