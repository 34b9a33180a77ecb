"""Upstream clusters to Envoy messages: TLS origination, per-backend DNS, aggregates; and the
real Envoy accepts them (`envoy --mode validate`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from envoy.config.cluster.v3 import cluster_pb2
from envoy.extensions.clusters.aggregate.v3 import cluster_pb2 as aggregate_pb2
from envoy.extensions.clusters.common.dns.v3 import dns_pb2
from envoy.extensions.clusters.dns.v3 import dns_cluster_pb2
from envoy.extensions.network.dns_resolver.cares.v3 import cares_dns_resolver_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2 as http_pb2

from dragoman.dag.model import DnsCluster, HappyEyeballs
from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.resources.cluster_messages import HTTP_PROTOCOL_OPTIONS
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import CLUSTER
from tests.support.certificates import certificate_authority
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.upstream_dags import INLINE_CA, upstream_kinds_dag

SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"


@pytest.fixture(scope="module")
def clusters() -> dict[str, cluster_pb2.Cluster]:
    [snapshot] = translate(upstream_kinds_dag()).values()
    return {c.name: c for c in messages(snapshot, CLUSTER)}


def tls_context(cluster: cluster_pb2.Cluster) -> tls_pb2.UpstreamTlsContext:
    assert cluster.transport_socket.name == "envoy.transport_sockets.tls"
    context = tls_pb2.UpstreamTlsContext()
    assert cluster.transport_socket.typed_config.Unpack(context)
    return context


def protocol_options(cluster: cluster_pb2.Cluster) -> http_pb2.HttpProtocolOptions | None:
    if HTTP_PROTOCOL_OPTIONS not in cluster.typed_extension_protocol_options:
        return None
    options = http_pb2.HttpProtocolOptions()
    assert cluster.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS].Unpack(options)
    return options


def dns_settings(cluster: cluster_pb2.Cluster) -> dns_cluster_pb2.DnsCluster:
    assert cluster.cluster_type.name == "envoy.cluster.dns"
    settings = dns_cluster_pb2.DnsCluster()
    assert cluster.cluster_type.typed_config.Unpack(settings)
    return settings


def test_automatic_tls_takes_sni_and_the_verified_name_from_the_endpoint(
    clusters: dict[str, cluster_pb2.Cluster],
) -> None:
    context = tls_context(clusters["default/api/443"])

    assert context.auto_host_sni and context.auto_sni_san_validation
    assert context.sni == ""
    validation = context.common_tls_context.validation_context
    assert validation.trusted_ca.filename == SYSTEM_CA
    assert list(validation.match_typed_subject_alt_names) == []
    assert list(context.common_tls_context.alpn_protocols) == []
    # The endpoint's hostname is what auto_host_sni sends.
    endpoint = clusters["default/api/443"].load_assignment.endpoints[0].lb_endpoints[0].endpoint
    assert endpoint.hostname == "api.example.com"
    # HTTP/2 when the upstream offers it by ALPN, else HTTP/1.1.
    options = protocol_options(clusters["default/api/443"])
    assert options is not None and options.HasField("auto_config")


def test_a_policy_sets_sni_names_and_inline_cas(clusters: dict[str, cluster_pb2.Cluster]) -> None:
    cluster = clusters["default/api/8443/h2"]
    context = tls_context(cluster)

    assert context.sni == "secure.example.com"
    assert not context.auto_host_sni and not context.auto_sni_san_validation
    validation = context.common_tls_context.validation_context
    assert validation.trusted_ca.inline_bytes == INLINE_CA
    assert [(m.san_type, m.matcher.exact) for m in validation.match_typed_subject_alt_names] == [
        (common_pb2.SubjectAltNameMatcher.DNS, "secure.example.com"),
        (common_pb2.SubjectAltNameMatcher.URI, "spiffe://example.com/ns/default/sa/api"),
    ]
    # HTTP/2 only (gRPC over TLS): ALPN h2 and explicit HTTP/2.
    assert list(context.common_tls_context.alpn_protocols) == ["h2"]
    options = protocol_options(cluster)
    assert options is not None
    assert options.explicit_http_config.HasField("http2_protocol_options")


def test_http11_over_tls_offers_http11_alone_by_alpn(
    clusters: dict[str, cluster_pb2.Cluster],
) -> None:
    cluster = clusters["xbackend/default/partner/443/h1"]

    assert list(tls_context(cluster).common_tls_context.alpn_protocols) == ["http/1.1"]
    options = protocol_options(cluster)
    assert options is not None
    assert options.explicit_http_config.HasField("http_protocol_options")
    assert not options.HasField("auto_config")


def test_tls_to_pods_by_policy(clusters: dict[str, cluster_pb2.Cluster]) -> None:
    cluster = clusters["default/web/443"]

    assert cluster.type == cluster_pb2.Cluster.EDS
    assert tls_context(cluster).sni == "web.example.com"


def test_cleartext_clusters_have_no_transport_socket(
    clusters: dict[str, cluster_pb2.Cluster],
) -> None:
    assert not clusters["default/api/80"].HasField("transport_socket")
    h2c = clusters["default/api/80/h2c"]
    assert not h2c.HasField("transport_socket")
    options = protocol_options(h2c)
    assert options is not None and options.explicit_http_config.HasField("http2_protocol_options")
    assert protocol_options(clusters["default/api/80"]) is None  # HTTP/1.1: Envoy's default


def test_per_backend_dns_settings(clusters: dict[str, cluster_pb2.Cluster]) -> None:
    settings = dns_settings(clusters["default/api/80"])

    assert settings.dns_refresh_rate.seconds == 10
    assert settings.respect_dns_ttl is False
    assert settings.dns_lookup_family == dns_pb2.DnsLookupFamily.Value("ALL")
    assert settings.dns_failure_refresh_rate.base_interval.seconds == 2
    assert settings.dns_failure_refresh_rate.max_interval.seconds == 20
    assert settings.dns_jitter.nanos == 500_000_000
    assert settings.all_addresses_in_single_endpoint is True  # LOGICAL
    assert settings.typed_dns_resolver_config.name == "envoy.network.dns_resolver.cares"
    cares = cares_dns_resolver_pb2.CaresDnsResolverConfig()
    assert settings.typed_dns_resolver_config.typed_config.Unpack(cares)
    assert [(r.socket_address.address, r.socket_address.port_value) for r in cares.resolvers] == [
        ("127.0.0.1", 5353),
        ("::1", 53),
    ]
    assert cares.dns_resolver_options.no_default_search_domain is True
    # Its one host races its IPv6 addresses first, two of them before an IPv4 one.
    happy = clusters["default/api/80"].upstream_connection_options.happy_eyeballs_config
    assert happy.first_address_family_version == cluster_pb2.UpstreamConnectionOptions.V6
    assert happy.first_address_family_count.value == 2


def test_default_dns_settings_come_from_the_options(
    clusters: dict[str, cluster_pb2.Cluster],
) -> None:
    defaults = dns_settings(clusters["default/api/443"])
    assert defaults.dns_refresh_rate.seconds == 30
    assert defaults.respect_dns_ttl is True
    assert not defaults.HasField("dns_failure_refresh_rate")
    assert not defaults.HasField("dns_jitter")
    assert not defaults.HasField("typed_dns_resolver_config")  # the bootstrap's resolver
    assert defaults.all_addresses_in_single_endpoint is False  # STRICT
    assert not clusters["default/api/443"].HasField("upstream_connection_options")

    [snapshot] = translate(
        upstream_kinds_dag(),
        TranslateOptions(dns_refresh_s=7, dns_respect_ttl=False, system_ca_file="/ca.pem"),
    ).values()
    changed = {c.name: c for c in messages(snapshot, CLUSTER)}["default/api/443"]
    assert dns_settings(changed).dns_refresh_rate.seconds == 7
    assert dns_settings(changed).respect_dns_ttl is False
    ca = tls_context(changed).common_tls_context.validation_context.trusted_ca
    assert ca.filename == "/ca.pem"


def test_the_servers_happy_eyeballs_order_reaches_logical_clusters_that_look_up_both() -> None:
    dag = upstream_kinds_dag()
    logical = dag.clusters["default/api/80"]
    assert isinstance(logical, DnsCluster)
    own_order = dataclasses.replace(logical.dns, happy_eyeballs=None)
    looked_up_by_server = dataclasses.replace(own_order, lookup_family=None)
    clusters_of = {
        "own-order": dataclasses.replace(logical, name="own-order", dns=own_order),
        "server-family": dataclasses.replace(
            logical, name="server-family", dns=looked_up_by_server
        ),
    }
    clusters_all = {**dag.clusters, **clusters_of}
    groups = {
        name: dataclasses.replace(group, clusters=tuple(sorted(clusters_all)))
        for name, group in dag.groups.items()
    }
    dag = dataclasses.replace(dag, clusters=clusters_all, groups=groups)
    server = HappyEyeballs("V4", 3)
    for family, named in (("ALL", {"default/api/80", "own-order", "server-family"}),
                          ("V4_PREFERRED", {"default/api/80", "own-order"})):  # fmt: skip
        options = TranslateOptions(dns_happy_eyeballs=server, dns_lookup_family=family)
        [snapshot] = translate(dag, options).values()
        found = {c.name: c for c in messages(snapshot, CLUSTER)}
        ordered = {n for n, c in found.items() if c.HasField("upstream_connection_options")}
        assert ordered == named
        config = found["own-order"].upstream_connection_options.happy_eyeballs_config
        assert config.first_address_family_version == cluster_pb2.UpstreamConnectionOptions.V4
        assert config.first_address_family_count.value == 3
        # The backend's own order wins over the server's.
        config = found["default/api/80"].upstream_connection_options.happy_eyeballs_config
        assert config.first_address_family_version == cluster_pb2.UpstreamConnectionOptions.V6


def test_an_aggregate_lists_the_in_cluster_cluster_first(
    clusters: dict[str, cluster_pb2.Cluster],
) -> None:
    cluster = clusters["default/legacy/443"]

    assert cluster.cluster_type.name == "envoy.clusters.aggregate"
    assert cluster.lb_policy == cluster_pb2.Cluster.CLUSTER_PROVIDED
    config = aggregate_pb2.ClusterConfig()
    assert cluster.cluster_type.typed_config.Unpack(config)
    assert list(config.clusters) == ["default/web/443", "default/legacy/443/external"]
    assert not cluster.HasField("transport_socket")  # TLS is each child's own
    assert {"default/web/443", "default/legacy/443/external"} <= set(clusters)


def test_system_ca_file_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="absolute path"):
        TranslateOptions(system_ca_file="certs/ca.pem")


def test_envoy_accepts_every_upstream_kind(tmp_path: Path) -> None:
    ca = certificate_authority()
    bundle = tmp_path / "system-ca.pem"
    bundle.write_bytes(ca.pem)
    options = TranslateOptions(system_ca_file=str(bundle))
    [snapshot] = translate(upstream_kinds_dag(with_ca=ca.pem), options).values()
    config: dict[str, Any] = translated_bootstrap(snapshot, tmp_path / "admin.sock")
    names = {c["name"] for c in config["static_resources"]["clusters"]}
    assert {"default/legacy/443", "default/api/8443/h2", "default/api/80"} <= names
    assert "xbackend/default/partner/443/h1" in names
    path = tmp_path / "upstreams.yaml"
    path.write_text(dump_yaml(config))

    validate(envoy_binary(), path)


def test_envoy_rejects_a_policy_ca_that_is_not_pem(tmp_path: Path) -> None:
    """A negative control: validation reads the inline CA of a policy."""
    bundle = tmp_path / "system-ca.pem"
    bundle.write_bytes(certificate_authority().pem)
    options = TranslateOptions(system_ca_file=str(bundle))
    [snapshot] = translate(upstream_kinds_dag(with_ca=b"not a certificate\n"), options).values()
    path = tmp_path / "broken.yaml"
    path.write_text(dump_yaml(translated_bootstrap(snapshot, tmp_path / "admin.sock")))

    with pytest.raises(AssertionError, match=r"(?i)certificate"):
        validate(envoy_binary(), path)


def test_json_mapping_shows_the_tls_context() -> None:
    [snapshot] = translate(upstream_kinds_dag()).values()
    cluster = {c.name: c for c in messages(snapshot, CLUSTER)}["default/api/443"]
    mapped = to_json_mapping(cluster)
    assert mapped["transport_socket"]["typed_config"]["auto_sni_san_validation"] is True
