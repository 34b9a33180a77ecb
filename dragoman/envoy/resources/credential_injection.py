"""InjectedCredential → Envoy's credential injector: one HTTP filter per credential in the
connection manager of the listeners whose routes inject it, disabled there and enabled by
those routes alone; the generic credential names the value for SDS, where it travels as a
generic secret (never inline in a listener or route)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2, extension_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.injected_credentials.generic.v3 import generic_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf.any_pb2 import Any

from dragoman.dag.model import InjectedCredential
from dragoman.envoy.resources.common_messages import pack

CREDENTIAL_INJECTOR = "envoy.filters.http.credential_injector"
GENERIC_CREDENTIAL = "envoy.http.injected_credentials.generic"
# SDS names of credentials, apart from certificates' "<namespace>/<name>".
SDS_PREFIX = "credential/"


def credential_sds_name(value: InjectedCredential) -> str:
    return SDS_PREFIX + value.name


def credential_filter_name(value: InjectedCredential) -> str:
    """The HTTP filter's name: what a route's typed_per_filter_config enables."""
    return f"{CREDENTIAL_INJECTOR}/{value.name}"


def credential_filter(
    value: InjectedCredential, source: config_source_pb2.ConfigSource
) -> hcm_pb2.HttpFilter:
    """The filter adding `value`'s header, disabled until a route enables it."""
    generic = generic_pb2.Generic(
        credential=secret_pb2.SdsSecretConfig(name=credential_sds_name(value), sds_config=source),
        header=value.header,
    )
    injector = credential_injector_pb2.CredentialInjector(
        overwrite=value.overwrite,
        # Without its credential (not yet fetched) a request is refused, never sent bare.
        allow_request_without_credential=False,
        credential=extension_pb2.TypedExtensionConfig(
            name=GENERIC_CREDENTIAL, typed_config=pack(generic)
        ),
    )
    return hcm_pb2.HttpFilter(
        name=credential_filter_name(value), typed_config=pack(injector), disabled=True
    )


def enabled_on_route(route: rc_pb2.Route, value: InjectedCredential) -> None:
    """Enable `value`'s filter (disabled in the connection manager) for `route`."""
    # A FilterConfig with `config` set (empty: the filter has no per-route settings) and
    # `disabled` false turns on a filter the connection manager disables.
    route.typed_per_filter_config[credential_filter_name(value)].CopyFrom(
        pack(rc_pb2.FilterConfig(config=Any()))
    )


def credential_secret(value: InjectedCredential) -> secret_pb2.Secret:
    return secret_pb2.Secret(
        name=credential_sds_name(value),
        generic_secret=secret_pb2.GenericSecret(
            secret=base_pb2.DataSource(inline_bytes=value.value)
        ),
    )
