"""Listeners → envoy.config.listener.v3.Listener: plain HTTP with one HTTP connection manager,
or HTTPS with one TLS filter chain per server name (SNI), each with its own route table and
its certificates fetched over SDS (`dragoman.envoy.resources.sds_secrets`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envoy.config.core.v3 import config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.dag.model import (
    HttpsListener,
    InjectedCredential,
    Listener,
    TcpListener,
    TlsFilterChain,
    UdpListener,
)
from dragoman.envoy.resources.access_log import access_logs
from dragoman.envoy.resources.common_messages import pack, socket_address
from dragoman.envoy.resources.config_sources import config_source
from dragoman.envoy.resources.cors import CORS_FILTER, cors_filter
from dragoman.envoy.resources.credential_injection import credential_filter
from dragoman.envoy.resources.downstream_tls import (
    downstream_tls_socket,
    tls_inspector,
)
from dragoman.envoy.resources.l4_listener_messages import tcp_listener, udp_listener
from dragoman.envoy.resources.traffic_policy_messages import (
    STATEFUL_SESSION_FILTER,
    stateful_session_filter,
)
from dragoman.envoy.translate_options import AccessLogFormat, TranslateOptions

HTTP_CONNECTION_MANAGER = "envoy.filters.network.http_connection_manager"
ROUTER = "envoy.filters.http.router"
# HTTP/2 first, so gRPC clients (and browsers) get it; the connection manager speaks both.
ALPN_PROTOCOLS = ("h2", "http/1.1")
WEBSOCKET = "websocket"


def listener(value: Listener, options: TranslateOptions) -> listener_pb2.Listener:
    if isinstance(value, HttpsListener):
        return https_listener(value, options)
    if isinstance(value, TcpListener):
        return tcp_listener(value, options)
    if isinstance(value, UdpListener):
        return udp_listener(value, options)
    return listener_pb2.Listener(
        name=value.name,
        address=socket_address(options.listener_address, value.port),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    _manager(
                        value.name,
                        value.route_table,
                        options,
                        value.stateful_sessions,
                        value.credentials,
                        value.scoped,
                    )
                ]
            )
        ],
    )


def https_listener(value: HttpsListener, options: TranslateOptions) -> listener_pb2.Listener:
    return listener_pb2.Listener(
        name=value.name,
        address=socket_address(options.listener_address, value.port),
        # Reads the SNI from the ClientHello so filter chains can match on it.
        listener_filters=[tls_inspector()],
        filter_chains=[_tls_chain(value.name, chain, options) for chain in value.filter_chains],
    )


def http_connection_manager(
    stat_prefix: str,
    route_table: str,
    access_log: AccessLogFormat,
    rds_source: config_source_pb2.ConfigSource,
    stateful_sessions: bool = False,
    credentials: Sequence[InjectedCredential] = (),
    scoped: bool = False,
) -> hcm_pb2.HttpConnectionManager:
    """The connection manager of `route_table`, fetched over RDS through `rds_source`
    (`scoped`: its scopes, one per Host, over scoped RDS through it); `stateful_sessions`:
    some route of the table keeps sessions; a filter for each credential its routes inject
    (fetched over SDS through the same source)."""
    sessions = (
        [
            hcm_pb2.HttpFilter(
                name=STATEFUL_SESSION_FILTER, typed_config=pack(stateful_session_filter())
            )
        ]
        if stateful_sessions
        else []
    )
    routes: dict[str, Any] = (
        {"scoped_routes": scoped_routes(route_table, rds_source)}
        if scoped
        else {"rds": hcm_pb2.Rds(config_source=rds_source, route_config_name=route_table)}
    )
    return hcm_pb2.HttpConnectionManager(
        access_log=access_logs(access_log),
        stat_prefix=stat_prefix,
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        **routes,
        # CORS acts only on routes that carry a policy; the router must be the last filter.
        http_filters=[
            hcm_pb2.HttpFilter(name=CORS_FILTER, typed_config=pack(cors_filter())),
            *sessions,
            *(credential_filter(credential, rds_source) for credential in credentials),
            hcm_pb2.HttpFilter(name=ROUTER, typed_config=pack(router_pb2.Router())),
        ],
        # WebSocket upgrades pass to whatever backend a route picks: the Gateway API expects
        # them for ports with appProtocol kubernetes.io/ws (and others may speak it too).
        upgrade_configs=[hcm_pb2.HttpConnectionManager.UpgradeConfig(upgrade_type=WEBSOCKET)],
        # Gateway API hostnames carry no port: match `example.com:8080` as `example.com`.
        # (Redirects rely on it too: Envoy writes into Location only the port it is told.)
        strip_any_host_port=True,
        # Match routes on the path the upstream will see, not on `/a/../b` or `//b` spellings.
        normalize_path=BoolValue(value=True),
        merge_slashes=True,
    )


def scoped_routes(route_table: str, source: config_source_pb2.ConfigSource) -> hcm_pb2.ScopedRoutes:
    """The scopes of `route_table`, fetched over scoped RDS through `source`: one per Host,
    keyed on the `:authority` header without its port (element 0 split on ":"), as the
    virtual hosts' domains match it with strip_any_host_port."""
    builder = hcm_pb2.ScopedRoutes.ScopeKeyBuilder
    extractor = builder.FragmentBuilder.HeaderValueExtractor(
        name=":authority", element_separator=":", index=0
    )
    return hcm_pb2.ScopedRoutes(
        name=route_table,
        scope_key_builder=builder(
            fragments=[builder.FragmentBuilder(header_value_extractor=extractor)]
        ),
        # Required, though every scope carries its route table inline.
        rds_config_source=source,
        scoped_rds=hcm_pb2.ScopedRds(scoped_rds_config_source=source),
    )


def _manager(
    stat_prefix: str,
    route_table: str,
    options: TranslateOptions,
    stateful_sessions: bool,
    credentials: Sequence[InjectedCredential],
    scoped: bool = False,
) -> listener_components_pb2.Filter:
    return listener_components_pb2.Filter(
        name=HTTP_CONNECTION_MANAGER,
        typed_config=pack(
            http_connection_manager(
                stat_prefix,
                route_table,
                options.access_log,
                config_source(options),
                stateful_sessions,
                credentials,
                scoped,
            )
        ),
    )


def _tls_chain(
    listener_name: str, chain: TlsFilterChain, options: TranslateOptions
) -> listener_components_pb2.FilterChain:
    match = None
    if chain.server_names:
        match = listener_components_pb2.FilterChainMatch(server_names=list(chain.server_names))
    return listener_components_pb2.FilterChain(
        name=chain.route_table,
        filter_chain_match=match,
        filters=[
            _manager(
                listener_name,
                chain.route_table,
                options,
                chain.stateful_sessions,
                chain.credentials,
            )
        ],
        transport_socket=downstream_tls_socket(
            chain.certificates, ALPN_PROTOCOLS, config_source(options), chain.client_validation
        ),
    )
