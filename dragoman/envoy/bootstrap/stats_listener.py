"""A static listener that lets Prometheus and probes reach two read-only pages of Envoy's
admin interface, and nothing else of it.

The admin interface stays on its unix socket (a route can never reach it); this listener
forwards exactly `GET /stats/prometheus` and `GET /ready` to it through a static cluster
over that socket, and answers every other request 404 itself: `/config_dump` (which holds
every private key) and `/quitquitquit` are never forwarded.
"""

from __future__ import annotations

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.type.matcher.v3 import string_pb2
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.envoy.resources.common_messages import pack, seconds, socket_address

STATS_LISTENER = "dragoman-envoy-stats"
ADMIN_CLUSTER = "dragoman-envoy-admin"
# The only admin paths served: Prometheus' scrape and the readiness check.
EXPOSED_PATHS = ("/stats/prometheus", "/ready")
HTTP_CONNECTION_MANAGER = "envoy.filters.network.http_connection_manager"
ROUTER = "envoy.filters.http.router"


def admin_cluster(admin_socket: str) -> cluster_pb2.Cluster:
    """A static cluster whose one endpoint is the admin interface's unix socket."""
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(
            address=address_pb2.Address(pipe=address_pb2.Pipe(path=admin_socket))
        )
    )
    return cluster_pb2.Cluster(
        name=ADMIN_CLUSTER,
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=seconds(1),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name=ADMIN_CLUSTER,
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )


def stats_listener(host: str, port: int) -> listener_pb2.Listener:
    routes = [
        route_components_pb2.Route(
            match=route_components_pb2.RouteMatch(
                path=path,
                headers=[
                    route_components_pb2.HeaderMatcher(
                        name=":method",
                        string_match=string_pb2.StringMatcher(exact="GET"),
                    )
                ],
            ),
            route=route_components_pb2.RouteAction(cluster=ADMIN_CLUSTER, timeout=seconds(10)),
        )
        for path in EXPOSED_PATHS
    ]
    routes.append(
        route_components_pb2.Route(
            match=route_components_pb2.RouteMatch(prefix="/"),
            direct_response=route_components_pb2.DirectResponseAction(status=404),
        )
    )
    manager = hcm_pb2.HttpConnectionManager(
        stat_prefix="dragoman_envoy_stats",
        codec_type=hcm_pb2.HttpConnectionManager.AUTO,
        route_config=route_pb2.RouteConfiguration(
            name=STATS_LISTENER,
            virtual_hosts=[
                route_components_pb2.VirtualHost(name=STATS_LISTENER, domains=["*"], routes=routes)
            ],
        ),
        http_filters=[hcm_pb2.HttpFilter(name=ROUTER, typed_config=pack(router_pb2.Router()))],
        # Paths are matched as the admin will read them: no `/x/../config_dump`, no `//`,
        # and an escaped slash is refused outright.
        normalize_path=BoolValue(value=True),
        merge_slashes=True,
        path_with_escaped_slashes_action=hcm_pb2.HttpConnectionManager.REJECT_REQUEST,
    )
    return listener_pb2.Listener(
        name=STATS_LISTENER,
        address=socket_address(host, port),
        filter_chains=[
            listener_components_pb2.FilterChain(
                filters=[
                    listener_components_pb2.Filter(
                        name=HTTP_CONNECTION_MANAGER, typed_config=pack(manager)
                    )
                ]
            )
        ],
    )
