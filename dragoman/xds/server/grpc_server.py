"""The xDS gRPC server, on grpc.aio.

Serves ADS (StreamAggregatedResources, DeltaAggregatedResources), the per-type services for
clusters, endpoints, listeners, routes and secrets (Stream* and Delta*) and CSDS on one
server; each xDS stream runs the loop of `stream_loop`. Responses are pre-encoded
(`dragoman.xds.protocol.wire`): the handlers are registered with a serializer that writes
those bytes as they are.
"""

from __future__ import annotations

import ipaddress
import logging
import weakref

import grpc
from envoy.service.discovery.v3.discovery_pb2 import DeltaDiscoveryRequest, DiscoveryRequest

from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    SECRET,
)
from dragoman.xds.csds import csds_service
from dragoman.xds.protocol.wire import serialize
from dragoman.xds.server import dependent_streams
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from dragoman.xds.server.stream_io import quiet_client_gone_in_core
from dragoman.xds.server.stream_loop import XdsCallbacks, XdsStreams
from dragoman.xds.server.stream_registry import StreamRegistry, XdsService
from dragoman.xds.transport.credentials import RotatingServerCredentials

logger = logging.getLogger("dragoman.xds")

FETCH_UNIMPLEMENTED = "REST-style Fetch* xDS is not implemented by dragoman; use a stream"

SERVER_OPTIONS: list[tuple[str, int]] = [
    # No SO_REUSEPORT: a second control plane on the same port must fail, not share it.
    ("grpc.so_reuseport", 0),
    # xDS streams are long and often quiet. gRPC's default answers a client's keepalive
    # pings (Envoy bootstraps commonly send one every 30 s) with a "too_many_pings" GOAWAY
    # once the server has sent no data for a few pings; accept up to one per second.
    ("grpc.http2.min_ping_interval_without_data_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    # Ping clients too, so the streams of a vanished proxy end and leave the registry.
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    # Each connection's read buffer grows to the largest request read (a SotW EDS request
    # names every CLA: 30 KiB for 1,000) and stays that size while the stream idles. Small
    # reads cost a few more syscalls for the rare large request and save tens of KiB per
    # connected client.
    ("grpc.experimental.tcp_max_read_buffer_size", 8192),
]

# The per-type services: gRPC service name, type served, the stream's service as logged and
# reported, and the names of its three methods.
PER_TYPE_SERVICES: tuple[tuple[str, str, XdsService, str, str, str], ...] = (
    (
        "envoy.service.cluster.v3.ClusterDiscoveryService",
        CLUSTER,
        "CDS",
        "StreamClusters",
        "DeltaClusters",
        "FetchClusters",
    ),
    (
        "envoy.service.endpoint.v3.EndpointDiscoveryService",
        ENDPOINT,
        "EDS",
        "StreamEndpoints",
        "DeltaEndpoints",
        "FetchEndpoints",
    ),
    (
        "envoy.service.listener.v3.ListenerDiscoveryService",
        LISTENER,
        "LDS",
        "StreamListeners",
        "DeltaListeners",
        "FetchListeners",
    ),
    (
        "envoy.service.route.v3.RouteDiscoveryService",
        ROUTE,
        "RDS",
        "StreamRoutes",
        "DeltaRoutes",
        "FetchRoutes",
    ),
    (
        "envoy.service.route.v3.ScopedRoutesDiscoveryService",
        SCOPED_ROUTE,
        "SRDS",
        "StreamScopedRoutes",
        "DeltaScopedRoutes",
        "FetchScopedRoutes",
    ),
    (
        "envoy.service.secret.v3.SecretDiscoveryService",
        SECRET,
        "SDS",
        "StreamSecrets",
        "DeltaSecrets",
        "FetchSecrets",
    ),
)
ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"


class XdsAddressError(OSError):
    """The xDS server could not listen on the address it was given."""


class XdsInsecureError(XdsAddressError):
    """Plaintext xDS asked for on an address other than loopback, without saying it is meant."""


async def _fetch_unimplemented(
    request: DiscoveryRequest, context: grpc.aio.ServicerContext
) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, FETCH_UNIMPLEMENTED)


def _stream_handler(
    streams: XdsStreams, service: XdsService, type_url: str | None, *, delta: bool
) -> grpc.RpcMethodHandler:
    request_type = DeltaDiscoveryRequest if delta else DiscoveryRequest
    return grpc.stream_stream_rpc_method_handler(
        streams.handler(service, type_url, delta=delta),
        request_deserializer=request_type.FromString,
        response_serializer=serialize,
    )


def xds_handlers(streams: XdsStreams) -> list[grpc.GenericRpcHandler]:
    """ADS and the per-type services, SotW and delta, each writing pre-encoded responses."""
    handlers = [
        grpc.method_handlers_generic_handler(
            ADS_SERVICE,
            {
                "StreamAggregatedResources": _stream_handler(streams, "ADS", None, delta=False),
                "DeltaAggregatedResources": _stream_handler(streams, "ADS", None, delta=True),
            },
        )
    ]
    for service_name, type_url, short_name, stream, delta, fetch in PER_TYPE_SERVICES:
        handlers.append(
            grpc.method_handlers_generic_handler(
                service_name,
                {
                    stream: _stream_handler(streams, short_name, type_url, delta=False),
                    delta: _stream_handler(streams, short_name, type_url, delta=True),
                    fetch: grpc.unary_unary_rpc_method_handler(
                        _fetch_unimplemented,
                        request_deserializer=DiscoveryRequest.FromString,
                        response_serializer=serialize,
                    ),
                },
            )
        )
    return handlers


# The port each started server listens on (useful when it was started on port 0).
_bound_ports: weakref.WeakKeyDictionary[grpc.aio.Server, int] = weakref.WeakKeyDictionary()


async def start_xds_server(
    cache: SnapshotCache,
    address: str,
    *,
    registry: StreamRegistry | None = None,
    callbacks: XdsCallbacks | None = None,
    dependent_stream_timeout_s: float = dependent_streams.DEFAULT_TIMEOUT_S,
    tls: RotatingServerCredentials | None = None,
    insecure: bool = False,
    limits: XdsLimits | None = None,
) -> grpc.aio.Server:
    """Serve xDS (ADS and per-type, SotW and delta) and CSDS on `address` ("host:port").

    With `tls`, only over mutual TLS, each client receiving what its certificate's identity
    allows (`dragoman.xds.transport.access_rules`). Without it, plaintext on a loopback
    address only, unless `insecure` (then loudly logged).

    `registry` receives the connected streams (CSDS reports them). Raises XdsAddressError if
    the address is in use or cannot be bound, XdsInsecureError for plaintext elsewhere than
    on loopback without `insecure`. Stop the server with `await server.stop(grace)`.
    A per-type client that ACKs clusters (listeners) but opens no EDS (RDS) stream within
    `dependent_stream_timeout_s` is logged: its bootstrap names dragoman's cluster otherwise.
    `limits` bound what one client may make the server hold or do (`XdsLimits()` if None).
    """
    if tls is None:
        _check_plaintext(address, insecure)
    quiet_client_gone_in_core()
    limits = limits if limits is not None else XdsLimits()
    server = grpc.aio.server(options=SERVER_OPTIONS + limits.grpc_options())
    registry = registry if registry is not None else StreamRegistry()
    streams = XdsStreams(cache, registry, callbacks, dependent_stream_timeout_s, limits)
    server.add_generic_rpc_handlers(xds_handlers(streams))
    csds_service.add_to_server(server, registry)
    port = _bind(server, address, tls)
    await server.start()
    _bound_ports[server] = port
    logger.info(
        "xDS server listening on %s (port %d, %s)",
        address,
        port,
        "mutual TLS" if tls is not None else "plaintext",
    )
    return server


def _check_plaintext(address: str, insecure: bool) -> None:
    """Plaintext only on loopback, or when `insecure` says it is meant (then loudly)."""
    if is_loopback(address):
        return
    if not insecure:
        raise XdsInsecureError(
            f"refusing to serve xDS in plaintext on {address}: anyone who can connect "
            "would receive every private key served. Give --xds-tls-cert, --xds-tls-key "
            "and --xds-tls-client-ca, or --xds-insecure if this is really meant"
        )
    logger.warning(
        "INSECURE: serving xDS in plaintext on %s: any client that can connect receives "
        "every listener's private key and every Gateway's configuration",
        address,
    )


def _bind(server: grpc.aio.Server, address: str, tls: RotatingServerCredentials | None) -> int:
    """The port `server` listens on at `address`; XdsAddressError if it cannot."""
    try:
        if tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, tls.credentials)
    except RuntimeError as error:
        raise XdsAddressError(
            f"cannot serve xDS on {address}: the address is in use or cannot be bound"
        ) from error
    if port == 0:
        raise XdsAddressError(f"cannot serve xDS on {address}: the address could not be bound")
    return port


def is_loopback(address: str) -> bool:
    """Whether `address` ("host:port") binds a loopback address only."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bound_port(server: grpc.aio.Server) -> int:
    """The port a server from `start_xds_server` listens on."""
    return _bound_ports[server]
