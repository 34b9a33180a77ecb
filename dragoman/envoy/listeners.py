"""HttpListener → envoy.config.listener.v3.Listener with one HTTP connection manager."""

from __future__ import annotations

from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.dag.model import HttpListener
from dragoman.envoy.core import ads_config_source, pack, socket_address
from dragoman.envoy.options import TranslateOptions

HTTP_CONNECTION_MANAGER = "envoy.filters.network.http_connection_manager"
ROUTER = "envoy.filters.http.router"


def listener(value: HttpListener, options: TranslateOptions) -> listener_pb2.Listener:
    manager = listener_components_pb2.Filter(
        name=HTTP_CONNECTION_MANAGER, typed_config=pack(http_connection_manager(value))
    )
    return listener_pb2.Listener(
        name=value.name,
        address=socket_address(options.listener_address, value.port),
        filter_chains=[listener_components_pb2.FilterChain(filters=[manager])],
    )


def http_connection_manager(value: HttpListener) -> hcm_pb2.HttpConnectionManager:
    return hcm_pb2.HttpConnectionManager(
        stat_prefix=value.name,
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        rds=hcm_pb2.Rds(config_source=ads_config_source(), route_config_name=value.route_table),
        # The router must be the last (here the only) filter; gRPC clients insist on it too.
        http_filters=[hcm_pb2.HttpFilter(name=ROUTER, typed_config=pack(router_pb2.Router()))],
        # Gateway API hostnames carry no port: match `example.com:8080` as `example.com`.
        strip_any_host_port=True,
        # Match routes on the path the upstream will see, not on `/a/../b` or `//b` spellings.
        normalize_path=BoolValue(value=True),
        merge_slashes=True,
    )
