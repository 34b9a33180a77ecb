"""DNS building blocks shared by clusters and the bootstrap, none using deprecated fields."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2, extension_pb2, resolver_pb2
from envoy.extensions.clusters.common.dns.v3 import dns_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2

from dragoman.envoy.resources.common_messages import pack, seconds, socket_address

DNS_CLUSTER_EXTENSION = "envoy.cluster.dns"
CARES_RESOLVER = "envoy.network.dns_resolver.cares"


def dns_cluster_type(
    *,
    refresh_s: float,
    respect_ttl: bool,
    lookup_family: str,
    resolver: extension_pb2.TypedExtensionConfig | None = None,
    failure_refresh_s: tuple[float, float] | None = None,
    jitter_s: float | None = None,
    logical: bool = False,
    min_refresh_s: float | None = None,
) -> cluster_pb2.Cluster.CustomClusterType:
    """STRICT_DNS (or LOGICAL_DNS) through the extension: with STRICT every address the name
    resolves to is a host; with LOGICAL one host connects to the first address of the latest
    answer (for names whose addresses rotate, such as cloud load balancers and CDNs).

    (Envoy deprecated the Cluster-level dns_* fields the built-in DNS types read.)
    `failure_refresh_s`: (base, max) of the backoff after a failed resolution; None retries
    at the refresh rate.
    """
    settings = dns_cluster_pb2.DnsCluster(
        dns_refresh_rate=seconds(refresh_s),
        respect_dns_ttl=respect_ttl,
        dns_lookup_family=dns_pb2.DnsLookupFamily.Value(lookup_family),
        typed_dns_resolver_config=resolver,
        all_addresses_in_single_endpoint=logical,
    )
    if failure_refresh_s is not None:
        base, maximum = failure_refresh_s
        settings.dns_failure_refresh_rate.CopyFrom(
            dns_cluster_pb2.DnsCluster.RefreshRate(
                base_interval=seconds(base), max_interval=seconds(maximum)
            )
        )
    if jitter_s:
        settings.dns_jitter.CopyFrom(seconds(jitter_s))
    packed = pack(settings)
    if min_refresh_s is not None:
        packed.value += dns_min_refresh_rate_bytes(min_refresh_s)
    return cluster_pb2.Cluster.CustomClusterType(name=DNS_CLUSTER_EXTENSION, typed_config=packed)


# DnsCluster.dns_min_refresh_rate (a Duration, at least 1 s), which Envoy 1.40 reads but the
# generated Python protos do not have yet: written as its field number and bytes.
DNS_MIN_REFRESH_RATE_FIELD = 10


def dns_min_refresh_rate_bytes(value_s: float) -> bytes:
    """The encoded field: appended to a serialized DnsCluster, it is one of its fields."""
    duration = seconds(value_s).SerializeToString(deterministic=True)
    return _varint(DNS_MIN_REFRESH_RATE_FIELD << 3 | 2) + _varint(len(duration)) + duration


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def cares_resolver(
    resolvers: Sequence[tuple[str, int]], *, use_tcp: bool = False, search_domains: bool = False
) -> extension_pb2.TypedExtensionConfig:
    """c-ares at these `(ip, port)` servers; with none it reads the system's resolv.conf.

    Backend names are absolute, so by default the host's search domains are never appended.
    """
    config = cares_dns_resolver_pb2.CaresDnsResolverConfig(
        resolvers=[
            socket_address(host, port, protocol=address_pb2.SocketAddress.UDP)
            for host, port in resolvers
        ],
        dns_resolver_options=resolver_pb2.DnsResolverOptions(
            use_tcp_for_dns_lookups=use_tcp,
            no_default_search_domain=not search_domains,
        ),
    )
    return extension_pb2.TypedExtensionConfig(name=CARES_RESOLVER, typed_config=pack(config))
