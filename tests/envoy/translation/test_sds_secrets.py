"""Certificates travel over SDS only, across every feature (HTTPS listeners, TLS listeners in
Terminate mode, client certificates to backends): no key inside any other resource, every
Secret a group's resources name is served to that group, and no group gets a Secret it does
not use. Per-type clients get the same names pointed at SecretDiscoveryService streams."""

from __future__ import annotations

from collections.abc import Iterator

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf.message import Message

from dragoman.envoy import translate
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, LISTENER, SECRET, Snapshot
from tests.support.envoy_dags import messages
from tests.support.feature_manifests import every_feature_dag


def sds_configs(message: Message) -> Iterator[tuple[str, str]]:
    """(name, config source kind) of every SDS certificate config in a listener or cluster."""
    sockets = []
    if isinstance(message, listener_pb2.Listener):
        sockets = [chain.transport_socket for chain in message.filter_chains]
    elif isinstance(message, cluster_pb2.Cluster) and message.HasField("transport_socket"):
        sockets = [message.transport_socket]
    for socket in sockets:
        for context_type in (tls_pb2.DownstreamTlsContext, tls_pb2.UpstreamTlsContext):
            context = context_type()
            if socket.HasField("typed_config") and socket.typed_config.Unpack(context):
                assert not context.common_tls_context.tls_certificates  # never inline
                for config in context.common_tls_context.tls_certificate_sds_secret_configs:
                    yield config.name, config.sds_config.WhichOneof("config_source_specifier")


def test_every_certificate_is_named_and_served_to_its_group_alone() -> None:
    snapshots = translate(every_feature_dag())
    kinds = set()
    for group, snapshot in snapshots.items():
        named = set()
        for type_url in (LISTENER, CLUSTER):
            for resource in snapshot.of_type(type_url).resources.values():
                assert b"PRIVATE KEY" not in resource.body, (group, resource.name)
            for message in messages(snapshot, type_url):
                for name, source in sds_configs(message):
                    assert source == "ads"
                    named.add(name)
                    kinds.add(type_url)
        assert snapshot.of_type(SECRET).names == named, group
        for secret in messages(snapshot, SECRET):
            assert secret.tls_certificate.private_key.inline_bytes
    # The feature set has listeners terminating TLS and clusters presenting certificates.
    assert kinds == {LISTENER, CLUSTER}


def _per_type(snapshot: Snapshot, delta: bool) -> Snapshot:
    return PerTypeConfigSources().per_type(snapshot, delta=delta)


def test_per_type_clients_fetch_every_certificate_over_sds_streams() -> None:
    for snapshot in translate(every_feature_dag()).values():
        for delta in (False, True):
            variant = _per_type(snapshot, delta)
            for type_url in (LISTENER, CLUSTER):
                for message in messages(variant, type_url):
                    for _, source in sds_configs(message):
                        assert source == "api_config_source"
            assert variant.of_type(SECRET).version == snapshot.of_type(SECRET).version
