"""No emitted message sets a field, enum value or message type that Envoy deprecated.

Walks every message dragoman emits (translated resources and bootstraps), unpacking Any
values, and reads deprecation from the descriptors: protobuf's own `deprecated` option and
Envoy's `envoy.annotations.deprecated_at_minor_version` / `disallowed_by_default` annotations.
It also refuses APIs Envoy marks work-in-progress (xds/udpa status annotations).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from envoy.api.v2 import cluster_pb2 as v2_cluster_pb2
from envoy.config.cluster.v3 import cluster_pb2
from google.protobuf.any_pb2 import Any
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message

from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_message
from dragoman.envoy.text.snapshot_yaml import SECTIONS
from tests.support.envoy_checks import (
    problems_in,
    walk,
)
from tests.support.envoy_dags import every_kind_of_dag
from tests.support.feature_manifests import every_feature_dag, every_feature_dag_with_dns_check
from tests.support.upstream_dags import upstream_kinds_dag


def emitted_messages() -> Iterator[tuple[str, Message]]:
    classes = {type_url: message_class for _, type_url, message_class in SECTIONS}
    for options in (TranslateOptions(), TranslateOptions(dns_respect_ttl=False)):
        dags = (
            every_kind_of_dag(),
            upstream_kinds_dag(),
            # Built from manifests, as users' configurations are.
            every_feature_dag(),
            every_feature_dag_with_dns_check(),
        )
        for dag in dags:
            for snapshot in translate(dag, options).values():
                for type_url, type_snapshot in snapshot.types.items():
                    for name, resource in type_snapshot.resources.items():
                        yield name, classes[type_url].FromString(resource.body)
    for xds in ("127.0.0.1:18000", "dragoman:18000"):
        yield (
            f"bootstrap {xds}",
            bootstrap_message(
                xds,
                node_id="n",
                node_cluster="default/demo",
                dns_resolvers=["127.0.0.1:5353"],
                dns_use_tcp=True,
            ),
        )


@pytest.mark.parametrize(("name", "message"), list(emitted_messages()))
def test_nothing_deprecated_is_set(name: str, message: Message) -> None:
    assert list(problems_in(message, name)) == []


def test_the_check_finds_deprecated_fields() -> None:
    """The Cluster-level DNS settings Envoy deprecated in favour of the dns extension."""
    legacy = cluster_pb2.Cluster(
        name="legacy",
        type=cluster_pb2.Cluster.STRICT_DNS,
        dns_refresh_rate=Duration(seconds=30),
        respect_dns_ttl=True,
    )
    wrapped = Any()
    wrapped.Pack(legacy)

    problems = list(problems_in(wrapped, "x"))

    assert "x<envoy.config.cluster.v3.Cluster>.dns_refresh_rate: deprecated" in problems
    assert any(p.startswith("x<envoy.config.cluster.v3.Cluster>.respect_dns_ttl") for p in problems)


def test_the_walk_reaches_inside_every_any() -> None:
    reached = {
        inner.DESCRIPTOR.full_name
        for name, message in emitted_messages()
        for _, inner in walk(message, name)
    }

    assert {
        "envoy.extensions.clusters.dns.v3.DnsCluster",
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "envoy.extensions.filters.http.router.v3.Router",
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig",
        "envoy.config.route.v3.WeightedCluster",
        "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "envoy.extensions.clusters.aggregate.v3.ClusterConfig",
    } <= reached


def test_the_feature_manifests_reach_every_kind_of_message() -> None:
    """The manifest build walked above exercises what dragoman can emit, not a subset."""
    reached = {
        inner.DESCRIPTOR.full_name
        for dag in (every_feature_dag(), every_feature_dag_with_dns_check())
        for snapshot in translate(dag).values()
        for type_url, type_snapshot in snapshot.types.items()
        for name, resource in type_snapshot.resources.items()
        for _, inner in walk(
            {t: c for _, t, c in SECTIONS}[type_url].FromString(resource.body), name
        )
    }

    assert {
        "envoy.extensions.clusters.dns.v3.DnsCluster",
        "envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig",
        "envoy.extensions.clusters.aggregate.v3.ClusterConfig",
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
        "envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager."
        "UpgradeConfig",
        "envoy.config.route.v3.WeightedCluster",
        "envoy.config.route.v3.RedirectAction",
        "envoy.config.route.v3.DirectResponseAction",
        "envoy.config.route.v3.RouteAction.RequestMirrorPolicy",
        "envoy.config.route.v3.QueryParameterMatcher",
        "envoy.config.route.v3.HeaderMatcher",
        "envoy.type.matcher.v3.RegexMatchAndSubstitute",
        "envoy.config.core.v3.HeaderValueOption",
        "envoy.config.endpoint.v3.LocalityLbEndpoints",
    } <= reached


def test_the_check_finds_deprecated_enum_values_and_frozen_packages() -> None:
    # Envoy's only non-zero deprecated enum value lives in the frozen v2 API.
    legacy = v2_cluster_pb2.Cluster(lb_policy=v2_cluster_pb2.Cluster.ORIGINAL_DST_LB)

    problems = list(problems_in(legacy, "x"))

    assert "x.lb_policy=ORIGINAL_DST_LB: deprecated" in problems
    assert "x (envoy.api.v2.Cluster): package FROZEN" in problems
