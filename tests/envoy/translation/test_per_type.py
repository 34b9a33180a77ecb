"""Per-type clients' resources are translated from the values the ADS ones were made from,
with the same options but their own config source; each distinct resource once."""

from __future__ import annotations

from envoy.config.listener.v3.listener_pb2 import Listener
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import ALL_GATEWAYS, Dag, HttpListener, NodeGroup, RouteTable
from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import LISTENER, ROUTE, Resource, Snapshot

HTTP = HttpListener("http-80", 80, "http-80")


def translated(options: TranslateOptions) -> Snapshot:
    group = NodeGroup(
        name=ALL_GATEWAYS, listeners=(HTTP,), route_tables=(RouteTable("http-80", ()),), clusters=()
    )
    return translate(Dag(groups={ALL_GATEWAYS: group}), options)[ALL_GATEWAYS]


def manager(resource: Resource) -> hcm_pb2.HttpConnectionManager:
    message = hcm_pb2.HttpConnectionManager()
    assert (
        Listener.FromString(resource.body).filter_chains[0].filters[0].typed_config.Unpack(message)
    )
    return message


def test_a_variant_keeps_every_option_but_the_config_source() -> None:
    options = TranslateOptions(listener_address="127.0.0.1", access_log="off")
    snapshot = translated(options)
    variant = PerTypeConfigSources("xds").per_type(snapshot, delta=True)
    resource = variant.of_type(LISTENER).resources[HTTP.name]
    assert Listener.FromString(resource.body).address.socket_address.address == "127.0.0.1"
    rds = manager(resource).rds
    assert (
        rds.config_source.api_config_source.api_type
        == rds.config_source.api_config_source.DELTA_GRPC
    )
    assert not manager(resource).access_log
    # What per-type streams do not change is served as it is.
    assert variant.of_type(ROUTE) is snapshot.of_type(ROUTE)


def test_each_distinct_resource_is_translated_once_per_variant() -> None:
    variants = PerTypeConfigSources("xds")
    first = variants.per_type(translated(TranslateOptions()), delta=False)
    # Another translation of the same values: other objects, the same bytes.
    again = variants.per_type(translated(TranslateOptions()), delta=False)
    assert again.of_type(LISTENER) is first.of_type(LISTENER)
    sotw, delta = first, variants.per_type(translated(TranslateOptions()), delta=True)
    assert sotw.of_type(LISTENER).version != delta.of_type(LISTENER).version
