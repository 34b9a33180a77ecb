"""Certificates travel over SDS only, across every feature (HTTPS listeners, TLS listeners in
Terminate mode, client certificates to backends, credentials routes inject): no key or
credential inside any other resource, every
Secret a group's resources name is served to that group, and no group gets a Secret it does
not use. Per-type clients get the same names pointed at SecretDiscoveryService streams."""

from __future__ import annotations

from collections.abc import Iterator

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.injected_credentials.generic.v3 import generic_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2
from google.protobuf.message import Message

from dragoman.envoy import translate
from dragoman.envoy.translation.per_type import PerTypeConfigSources
from dragoman.snapshots.resources import CLUSTER, LISTENER, SECRET, Snapshot
from tests.support.envoy_dags import messages
from tests.support.feature_manifests import every_feature_dag


def sds_configs(message: Message) -> Iterator[tuple[str, str]]:
    """(name, config source kind) of every SDS certificate config in a listener or cluster,
    and of every credential its connection managers' filters inject."""
    sockets = []
    if isinstance(message, listener_pb2.Listener):
        sockets = [chain.transport_socket for chain in message.filter_chains]
        yield from _credential_configs(message)
    elif isinstance(message, cluster_pb2.Cluster) and message.HasField("transport_socket"):
        sockets = [message.transport_socket]
    for socket in sockets:
        for context_type in (tls_pb2.DownstreamTlsContext, tls_pb2.UpstreamTlsContext):
            context = context_type()
            if socket.HasField("typed_config") and socket.typed_config.Unpack(context):
                assert not context.common_tls_context.tls_certificates  # never inline
                for config in context.common_tls_context.tls_certificate_sds_secret_configs:
                    yield config.name, config.sds_config.WhichOneof("config_source_specifier")


def _credential_configs(listener: listener_pb2.Listener) -> Iterator[tuple[str, str]]:
    for chain in listener.filter_chains:
        for network_filter in chain.filters:
            manager = hcm_pb2.HttpConnectionManager()
            if not network_filter.typed_config.Unpack(manager):
                continue
            for http_filter in manager.http_filters:
                injector = credential_injector_pb2.CredentialInjector()
                if http_filter.typed_config.Unpack(injector):
                    generic = generic_pb2.Generic()
                    assert injector.credential.typed_config.Unpack(generic)
                    config = generic.credential
                    yield config.name, config.sds_config.WhichOneof("config_source_specifier")


def test_every_certificate_is_named_and_served_to_its_group_alone() -> None:
    snapshots = translate(every_feature_dag())
    kinds = set()
    for group, snapshot in snapshots.items():
        named = set()
        for type_url in (LISTENER, CLUSTER):
            for resource in snapshot.of_type(type_url).resources.values():
                assert b"PRIVATE KEY" not in resource.body, (group, resource.name)
                assert b"feature-token" not in resource.body, (group, resource.name)
            for message in messages(snapshot, type_url):
                for name, source in sds_configs(message):
                    assert source == "ads"
                    named.add(name)
                    kinds.add(type_url)
        assert snapshot.of_type(SECRET).names == named, group
        for secret in messages(snapshot, SECRET):
            assert (
                secret.tls_certificate.private_key.inline_bytes
                or secret.generic_secret.secret.inline_bytes
            )
            if secret.HasField("generic_secret"):
                kinds.add(SECRET)  # a credential, named by a listener's filter
    # The feature set has listeners terminating TLS, clusters presenting certificates, and
    # a credential injected.
    assert kinds == {LISTENER, CLUSTER, SECRET}


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
