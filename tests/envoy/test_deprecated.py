"""No emitted message sets a field, enum value or message type that Envoy deprecated.

Walks every message dragoman emits (translated resources and bootstraps), unpacking Any
values, and reads deprecation from the descriptors: protobuf's own `deprecated` option and
Envoy's `envoy.annotations.deprecated_at_minor_version` / `disallowed_by_default` annotations.
It also refuses APIs Envoy marks work-in-progress (xds/udpa status annotations).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from envoy.annotations import deprecation_pb2
from envoy.api.v2 import cluster_pb2 as v2_cluster_pb2
from envoy.config.cluster.v3 import cluster_pb2
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.any_pb2 import Any
from google.protobuf.descriptor import Descriptor, EnumValueDescriptor, FieldDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from udpa.annotations import status_pb2 as udpa_status_pb2
from xds.annotations.v3 import status_pb2 as xds_status_pb2

from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.bootstrap import bootstrap_message
from dragoman.envoy.render import SECTIONS
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


def unpack(value: Any) -> Message:
    type_name = value.type_url.rpartition("/")[2]
    # Fails when the type is not registered: render_yaml could not expand it either.
    message_type = descriptor_pool.Default().FindMessageTypeByName(type_name)
    message = message_factory.GetMessageClass(message_type)()
    assert value.Unpack(message)
    return message


def field_problems(field: FieldDescriptor) -> list[str]:
    options = field.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[deprecation_pb2.deprecated_at_minor_version]:
        problems.append("deprecated_at_minor_version")
    if options.Extensions[deprecation_pb2.disallowed_by_default]:
        problems.append("disallowed_by_default")
    wip = options.Extensions[xds_status_pb2.field_status].work_in_progress
    if wip and field.full_name not in WORK_IN_PROGRESS_REQUIRED:
        problems.append("work_in_progress")
    return problems


# Fields marked work-in-progress that are the only way left to configure something: the UDP
# proxy names its cluster through `matcher` alone, its `cluster` field being deprecated.
WORK_IN_PROGRESS_REQUIRED = frozenset(
    {"envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig.matcher"}
)


def enum_value_problems(value: EnumValueDescriptor) -> list[str]:
    options = value.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[deprecation_pb2.deprecated_at_minor_version_enum]:
        problems.append("deprecated_at_minor_version_enum")
    if options.Extensions[deprecation_pb2.disallowed_by_default_enum]:
        problems.append("disallowed_by_default_enum")
    return problems


def message_type_problems(message_type: Descriptor) -> list[str]:
    options = message_type.GetOptions()
    file_options = message_type.file.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[xds_status_pb2.message_status].work_in_progress:
        problems.append("work_in_progress")
    if file_options.Extensions[xds_status_pb2.file_status].work_in_progress:
        problems.append("file work_in_progress")
    udpa_status = file_options.Extensions[udpa_status_pb2.file_status]
    if udpa_status.work_in_progress:
        problems.append("file work_in_progress")
    if udpa_status.package_version_status in (
        udpa_status_pb2.FROZEN,
        udpa_status_pb2.NEXT_MAJOR_VERSION_CANDIDATE,
    ):
        problems.append(
            "package "
            + udpa_status_pb2.PackageVersionStatus.Name(udpa_status.package_version_status)
        )
    return problems


def walk(message: Message, path: str) -> Iterator[tuple[str, Message]]:
    """Every message inside this one, itself included, with Any values unpacked."""
    yield path, message
    if isinstance(message, Any):
        yield from walk(unpack(message), f"{path}<{message.type_url.rpartition('/')[2]}>")
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        where = f"{path}.{field.name}"
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for key, item in value.items():
                    yield from walk(item, f"{where}[{key}]")
        elif field.is_repeated:
            for index, item in enumerate(value):
                yield from walk(item, f"{where}[{index}]")
        else:
            yield from walk(value, where)


def problems_in(message: Message, path: str) -> Iterator[str]:
    """`path: problem` for every problem in this message and everything it contains."""
    for where, inner in walk(message, path):
        for problem in message_type_problems(inner.DESCRIPTOR):
            yield f"{where} ({inner.DESCRIPTOR.full_name}): {problem}"
        for field, value in inner.ListFields():
            for problem in field_problems(field):
                yield f"{where}.{field.name}: {problem}"
            if field.enum_type is not None:
                for number in value if field.is_repeated else [value]:
                    enum_value = field.enum_type.values_by_number[number]
                    for problem in enum_value_problems(enum_value):
                        yield f"{where}.{field.name}={enum_value.name}: {problem}"


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
