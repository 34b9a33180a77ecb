"""InjectedCredential → Envoy's credential injector: one HTTP filter per credential in the
connection manager of the listeners whose routes inject it, disabled there and enabled by
those routes alone; the generic credential names the value for SDS, where it travels as a
generic secret (never inline in a listener or route). An OAuth2 credential names its client
secret the same way, and Envoy fetches the token it sends from the token endpoint."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2, extension_pb2, http_uri_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.extensions.filters.http.credential_injector.v3 import credential_injector_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.http.injected_credentials.generic.v3 import generic_pb2
from envoy.extensions.http.injected_credentials.oauth2.v3 import oauth2_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf.any_pb2 import Any

from dragoman.dag.model import InjectedCredential, OAuth2Grant
from dragoman.envoy.resources.common_messages import pack, seconds

CREDENTIAL_INJECTOR = "envoy.filters.http.credential_injector"
GENERIC_CREDENTIAL = "envoy.http.injected_credentials.generic"
OAUTH2_CREDENTIAL = "envoy.http.injected_credentials.oauth2"
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
    secret = secret_pb2.SdsSecretConfig(name=credential_sds_name(value), sds_config=source)
    if value.oauth2 is not None:
        credential = extension_pb2.TypedExtensionConfig(
            name=OAUTH2_CREDENTIAL, typed_config=pack(_oauth2(value.oauth2, secret))
        )
    else:
        generic = generic_pb2.Generic(credential=secret, header=value.header)
        credential = extension_pb2.TypedExtensionConfig(
            name=GENERIC_CREDENTIAL, typed_config=pack(generic)
        )
    injector = credential_injector_pb2.CredentialInjector(
        overwrite=value.overwrite,
        # Without its credential (not yet fetched) a request is refused, never sent bare.
        allow_request_without_credential=False,
        credential=credential,
    )
    return hcm_pb2.HttpFilter(
        name=credential_filter_name(value), typed_config=pack(injector), disabled=True
    )


def _oauth2(grant: OAuth2Grant, client_secret: secret_pb2.SdsSecretConfig) -> oauth2_pb2.OAuth2:
    """Envoy's OAuth2 credential: the client credentials grant against the token endpoint."""
    message = oauth2_pb2.OAuth2(
        token_endpoint=http_uri_pb2.HttpUri(
            uri=grant.token_uri, cluster=grant.cluster, timeout=seconds(grant.timeout_ms / 1000)
        ),
        scopes=grant.scopes,
        client_credentials=oauth2_pb2.OAuth2.ClientCredentials(
            client_id=grant.client_id,
            client_secret=client_secret,
            # What Envoy does whatever this says (it sends no Basic authentication yet):
            # the client's id and secret in the form body, said so.
            auth_type=oauth2_pb2.OAuth2.URL_ENCODED_BODY,
        ),
    )
    if grant.retry_interval_ms is not None:
        message.token_fetch_retry_interval.CopyFrom(seconds(grant.retry_interval_ms / 1000))
    return message


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
