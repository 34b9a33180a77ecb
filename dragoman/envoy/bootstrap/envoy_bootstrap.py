"""An Envoy bootstrap that fetches everything else from dragoman over gRPC xDS.

Four transports: ADS (one stream for every type) or one stream per type, each either
state of the world or incremental (delta). The default is ADS, state of the world. With
`XdsClientTls`, the connection to dragoman is mutual TLS: Envoy checks dragoman's certificate
name and presents its own certificate. Given an SDS directory, the certificate and the CA
reach Envoy through file-based SDS (two Secret files there, `xds_tls_secret_files`), the only
way Envoy re-reads them when they rotate on disk; otherwise they are read once, at start.
"""

from __future__ import annotations

import functools
import ipaddress
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2, config_source_pb2, extension_pb2, protocol_pb2
from envoy.config.overload.v3 import overload_pb2
from envoy.extensions.resource_monitors.downstream_connections.v3 import (
    downstream_connections_pb2,
)
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2, tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.type.matcher.v3 import string_pb2

from dragoman.envoy.bootstrap.stats_listener import admin_cluster, stats_listener
from dragoman.envoy.resources.common_messages import pack, seconds
from dragoman.envoy.resources.config_sources import (
    ads_config_source,
    per_type_config_source,
    xds_api_config_source,
)
from dragoman.envoy.resources.dns_cluster_type import cares_resolver, dns_cluster_type
from dragoman.envoy.resources.endpoint_messages import single_host_assignment
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml

XDS_CLUSTER = "dragoman-xds"
DEFAULT_ADMIN_SOCKET = "/tmp/dragoman-envoy-admin.sock"
HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
DNS_PORT = 53
# Envoy's own edge guidance: a global cap on downstream connections keeps a connection flood
# from exhausting file descriptors and memory (and Envoy warns at every start without one).
DEFAULT_MAX_DOWNSTREAM_CONNECTIONS = 50_000
DOWNSTREAM_CONNECTIONS_MONITOR = "envoy.resource_monitors.global_downstream_max_connections"

TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"

XdsTransport = Literal["ads", "per-type"]
XDS_TRANSPORTS: tuple[XdsTransport, ...] = ("ads", "per-type")


@dataclass(frozen=True, slots=True)
class XdsClientTls:
    """Files on Envoy's machine (paths, never read here) for mutual TLS to dragoman.

    `server_name`: the name dragoman's certificate must carry (DNS name or IP address);
    empty: the host of the xDS address.
    """

    trusted_ca: str
    certificate: str
    private_key: str
    server_name: str = ""
    sds_directory: str = ""


# File-based SDS: one Secret per file, each file watched through its directory (a mounted
# ConfigMap is swapped as a whole, like a Secret).
XDS_CERTIFICATE_SECRET = "dragoman-xds-client-certificate"
XDS_VALIDATION_SECRET = "dragoman-xds-validation-context"
XDS_CERTIFICATE_SDS_FILE = "xds-client-certificate.yaml"
XDS_VALIDATION_SDS_FILE = "xds-validation-context.yaml"


def xds_cluster_name_problem(name: str) -> str | None:
    """Why `name` cannot name the bootstrap's cluster for dragoman (None: it can)."""
    if not 1 <= len(name) <= 255:
        return "must be 1 to 255 characters long"
    if not all("!" <= character <= "~" for character in name):
        return "must be printable ASCII without spaces"
    return None


def bootstrap_message(
    xds_address: str,
    *,
    node_id: str,
    node_cluster: str,
    admin_socket: str | None = DEFAULT_ADMIN_SOCKET,
    dns_resolvers: Sequence[str] = (),
    dns_use_tcp: bool = False,
    xds_transport: XdsTransport = "ads",
    delta: bool = False,
    xds_cluster_name: str = XDS_CLUSTER,
    max_downstream_connections: int = DEFAULT_MAX_DOWNSTREAM_CONNECTIONS,
    xds_tls: XdsClientTls | None = None,
    stats_address: str | None = None,
) -> bootstrap_pb2.Bootstrap:
    """`node_cluster` names the Gateway (`namespace/name`) whose configuration this Envoy gets.

    `dns_resolvers` ("ip" or "ip:port") become Envoy's default resolver for every DNS
    cluster; the connection to dragoman keeps using the system resolver.

    `xds_transport` "ads" fetches every type over one stream; "per-type" opens a stream per
    type (dragoman then points the EDS and RDS config sources it serves at per-type streams
    through the `dragoman-xds` cluster, or `xds_cluster_name`: serve with the same
    `--xds-cluster-name`). `delta` selects incremental xDS for either.

    `max_downstream_connections` caps the connections Envoy accepts on all its listeners
    together (the overload manager's downstream connections monitor).
    `stats_address` ("host:port") adds a listener exposing only the admin interface's
    `/stats/prometheus` and `/ready` (the admin itself stays on `admin_socket`).
    """
    _check_arguments(xds_cluster_name, max_downstream_connections, xds_transport, node_cluster)
    host, port = split_host_port(xds_address, default_port=None)
    bootstrap = bootstrap_pb2.Bootstrap(
        node=base_pb2.Node(id=node_id, cluster=node_cluster),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            clusters=[
                xds_cluster(
                    host,
                    port,
                    system_resolver=bool(dns_resolvers),
                    name=xds_cluster_name,
                    tls=xds_tls,
                )
            ]
        ),
        dynamic_resources=_dynamic_resources(xds_transport, delta, xds_cluster_name),
        overload_manager=_overload_manager(max_downstream_connections),
    )
    # Envoy's periodic stats flush walks every stat (about 100 per cluster) even with no
    # sink configured: every 5 s, some 95 ms of the main thread at 10,000 clusters, which
    # then also delays xDS updates. Nothing here reads the stats but the admin interface (and
    # the stats listener forwarding to it), which flushes when it is read.
    bootstrap.stats_flush_on_admin = True
    if stats_address is not None:
        if admin_socket is None:
            raise ValueError("the stats listener forwards to the admin socket: name one")
        stats_host, stats_port = split_host_port(stats_address, default_port=None)
        bootstrap.static_resources.clusters.append(admin_cluster(admin_socket))
        bootstrap.static_resources.listeners.append(stats_listener(stats_host, stats_port))
    if admin_socket is not None:
        # A UNIX socket, never TCP: no route or upstream can ever reach the admin interface.
        bootstrap.admin.address.pipe.path = admin_socket
    if dns_resolvers:
        bootstrap.typed_dns_resolver_config.CopyFrom(_dns_resolver(dns_resolvers, dns_use_tcp))
    return bootstrap


def _check_arguments(
    xds_cluster_name: str,
    max_downstream_connections: int,
    xds_transport: XdsTransport,
    node_cluster: str,
) -> None:
    problem = xds_cluster_name_problem(xds_cluster_name)
    if problem is not None:
        raise ValueError(f"xds_cluster_name {problem}, got {xds_cluster_name!r}")
    if max_downstream_connections < 1:
        raise ValueError(
            f"max_downstream_connections must be at least 1, got {max_downstream_connections}"
        )
    if xds_transport not in XDS_TRANSPORTS:
        raise ValueError(f"xds_transport must be one of {XDS_TRANSPORTS}, got {xds_transport!r}")
    if xds_transport == "per-type" and not node_cluster:
        # Envoy refuses non-ADS subscriptions from a node without a cluster.
        raise ValueError("per-type xDS needs a node cluster (Envoy requires node.cluster)")


def _dynamic_resources(
    xds_transport: XdsTransport, delta: bool, cluster_name: str
) -> bootstrap_pb2.Bootstrap.DynamicResources:
    if xds_transport == "ads":
        return bootstrap_pb2.Bootstrap.DynamicResources(
            ads_config=xds_api_config_source(delta=delta, cluster_name=cluster_name),
            cds_config=ads_config_source(),
            lds_config=ads_config_source(),
        )
    return bootstrap_pb2.Bootstrap.DynamicResources(
        cds_config=per_type_config_source(delta=delta, cluster_name=cluster_name),
        lds_config=per_type_config_source(delta=delta, cluster_name=cluster_name),
    )


def _overload_manager(max_downstream_connections: int) -> overload_pb2.OverloadManager:
    return overload_pb2.OverloadManager(
        resource_monitors=[
            overload_pb2.ResourceMonitor(
                name=DOWNSTREAM_CONNECTIONS_MONITOR,
                typed_config=pack(
                    downstream_connections_pb2.DownstreamConnectionsConfig(
                        max_active_downstream_connections=max_downstream_connections
                    )
                ),
            )
        ]
    )


def _dns_resolver(
    dns_resolvers: Sequence[str], use_tcp: bool
) -> extension_pb2.TypedExtensionConfig:
    servers = [split_host_port(r, default_port=DNS_PORT) for r in dns_resolvers]
    for server, _ in servers:
        if not _is_ip(server):
            raise ValueError(f"a DNS resolver must be an IP address, got {server!r}")
    return cares_resolver(servers, use_tcp=use_tcp)


def xds_cluster(
    host: str,
    port: int,
    *,
    system_resolver: bool,
    name: str = XDS_CLUSTER,
    tls: XdsClientTls | None = None,
) -> cluster_pb2.Cluster:
    http2 = http_protocol_options_pb2.HttpProtocolOptions(
        explicit_http_config=http_protocol_options_pb2.HttpProtocolOptions.ExplicitHttpConfig(
            http2_protocol_options=protocol_pb2.Http2ProtocolOptions(
                # Notice a control plane that vanished without closing the connection.
                connection_keepalive=protocol_pb2.KeepaliveSettings(
                    interval=seconds(30), timeout=seconds(5)
                )
            )
        )
    )
    cluster = cluster_pb2.Cluster(
        name=name,
        connect_timeout=seconds(5),
        typed_extension_protocol_options={HTTP_PROTOCOL_OPTIONS: pack(http2)},
        load_assignment=single_host_assignment(name, host, port),
    )
    if tls is not None:
        cluster.transport_socket.CopyFrom(
            base_pb2.TransportSocket(
                name=TLS_TRANSPORT_SOCKET, typed_config=pack(xds_tls_context(tls, host))
            )
        )
    if _is_ip(host):
        cluster.type = cluster_pb2.Cluster.STATIC
        # A STATIC host is an address, not a name.
        cluster.load_assignment.endpoints[0].lb_endpoints[0].endpoint.ClearField("hostname")
    else:
        # A name such as `dragoman` in docker-compose. Short refresh, TTL ignored: after a
        # restart the control plane may come back on another address.
        cluster.cluster_type.CopyFrom(
            dns_cluster_type(
                refresh_s=5,
                respect_ttl=False,
                lookup_family="V4_PREFERRED",
                # With a default resolver configured for backends, still find the control
                # plane the way the host does (a short Service name needs search domains).
                resolver=cares_resolver([], search_domains=True) if system_resolver else None,
            )
        )
    return cluster


def xds_tls_context(tls: XdsClientTls, host: str) -> tls_pb2.UpstreamTlsContext:
    """Mutual TLS to dragoman: its certificate must carry `server_name` (or `host`).

    With `tls.sds_directory`, the certificate and the CA come from the SDS files there:
    Envoy applies `watched_directory` (how a mounted Kubernetes Secret is updated, an atomic
    swap of the directory's contents) only to secrets delivered by SDS. Without it, the files
    are inline: read at start, never again.
    """
    name = tls.server_name or host
    san_type = (
        common_pb2.SubjectAltNameMatcher.IP_ADDRESS
        if _is_ip(name)
        else common_pb2.SubjectAltNameMatcher.DNS
    )
    names = [
        common_pb2.SubjectAltNameMatcher(
            san_type=san_type, matcher=string_pb2.StringMatcher(exact=name)
        )
    ]
    # gRPC is HTTP/2; dragoman's server speaks nothing else.
    context = tls_pb2.CommonTlsContext(alpn_protocols=["h2"])
    if tls.sds_directory:
        context.tls_certificate_sds_secret_configs.append(
            _sds_secret(tls.sds_directory, XDS_CERTIFICATE_SECRET, XDS_CERTIFICATE_SDS_FILE)
        )
        context.combined_validation_context.CopyFrom(
            tls_pb2.CommonTlsContext.CombinedCertificateValidationContext(
                default_validation_context=common_pb2.CertificateValidationContext(
                    match_typed_subject_alt_names=names
                ),
                validation_context_sds_secret_config=_sds_secret(
                    tls.sds_directory, XDS_VALIDATION_SECRET, XDS_VALIDATION_SDS_FILE
                ),
            )
        )
    else:
        context.tls_certificates.append(_tls_certificate(tls, watched=False))
        context.validation_context.CopyFrom(_validation_context(tls, watched=False))
        context.validation_context.match_typed_subject_alt_names.extend(names)
    return tls_pb2.UpstreamTlsContext(common_tls_context=context, sni="" if _is_ip(name) else name)


def xds_tls_secret_files(tls: XdsClientTls) -> dict[str, str]:
    """The SDS files `tls.sds_directory` must hold: file name -> YAML text.

    Each holds one Secret naming the files on Envoy's machine, watched through their
    directory: Envoy re-reads them whenever it changes.
    """
    certificate = secret_pb2.Secret(
        name=XDS_CERTIFICATE_SECRET, tls_certificate=_tls_certificate(tls, watched=True)
    )
    validation = secret_pb2.Secret(
        name=XDS_VALIDATION_SECRET, validation_context=_validation_context(tls, watched=True)
    )
    return {
        XDS_CERTIFICATE_SDS_FILE: _sds_file_text(certificate),
        XDS_VALIDATION_SDS_FILE: _sds_file_text(validation),
    }


def _tls_certificate(tls: XdsClientTls, *, watched: bool) -> common_pb2.TlsCertificate:
    certificate = common_pb2.TlsCertificate(
        certificate_chain=base_pb2.DataSource(filename=tls.certificate),
        private_key=base_pb2.DataSource(filename=tls.private_key),
    )
    if watched:
        certificate.watched_directory.path = _directory(tls.certificate)
    return certificate


def _validation_context(
    tls: XdsClientTls, *, watched: bool
) -> common_pb2.CertificateValidationContext:
    validation = common_pb2.CertificateValidationContext(
        trusted_ca=base_pb2.DataSource(filename=tls.trusted_ca)
    )
    if watched:
        validation.watched_directory.path = _directory(tls.trusted_ca)
    return validation


def _sds_secret(directory: str, secret: str, file: str) -> secret_pb2.SdsSecretConfig:
    source = config_source_pb2.ConfigSource(
        path_config_source=config_source_pb2.PathConfigSource(
            path=posixpath.join(directory, file),
            watched_directory=base_pb2.WatchedDirectory(path=directory),
        ),
        resource_api_version=config_source_pb2.V3,
    )
    return secret_pb2.SdsSecretConfig(name=secret, sds_config=source)


def _sds_file_text(secret: secret_pb2.Secret) -> str:
    # The file form of a DiscoveryResponse: its resources, each an Any.
    return dump_yaml({"resources": [to_json_mapping(pack(secret))]})


def _directory(path: str) -> str:
    return posixpath.dirname(path) or "."


def split_host_port(value: str, *, default_port: int | None) -> tuple[str, int]:
    """`host:port`, `[v6]:port`, or (with a default port) a bare host or IPv6 literal."""
    if default_port is not None and _is_ip(value.strip("[]")):
        return value.strip("[]"), default_port
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not host:
        if default_port is None:
            raise ValueError(f"expected host:port, got {value!r}")
        host, port = value, str(default_port)
    host = host.strip("[]")
    if not 0 < int(port) < 65536:
        raise ValueError(f"port out of range in {value!r}")
    return host, int(port)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _rendered(
    render: Callable[[bootstrap_pb2.Bootstrap], _T],
) -> Callable[[Callable[_P, Any]], Callable[_P, _T]]:
    """A variant of `bootstrap_message` with its exact parameters, returning `render(message)`."""

    def variant(make: Callable[_P, Any]) -> Callable[_P, _T]:
        @functools.wraps(make)
        def rendered(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            return render(make(*args, **kwargs))

        return rendered

    return variant


bootstrap_config = _rendered(to_json_mapping)(bootstrap_message)
bootstrap_config.__doc__ = "The bootstrap as plain data in Envoy's JSON mapping."
bootstrap_yaml = _rendered(lambda message: dump_yaml(to_json_mapping(message)))(bootstrap_message)
bootstrap_yaml.__doc__ = "The bootstrap as YAML that Envoy reads back exactly."
