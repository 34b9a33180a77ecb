"""What listeners that read or terminate clients' TLS share: the TLS inspector (it reads the
SNI so filter chains can match on it) and the downstream TLS transport socket, which names
its certificates for SDS (`dragoman.envoy.resources.sds_secrets`) and never holds a key.

With a ClientValidation the socket asks clients for a certificate, checked against CA
certificates it names for SDS too: required and trusted (AllowValidOnly), or asked for and
checked but neither required nor trusted (AllowInsecureFallback, where Envoy accepts an
untrusted chain and a client without one)."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from google.protobuf.wrappers_pb2 import BoolValue

from dragoman.dag.model import ClientValidation, TlsCertificate
from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.resources.sds_secrets import sds_secret_config

TLS_INSPECTOR = "envoy.filters.listener.tls_inspector"
TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"


def tls_inspector() -> listener_components_pb2.ListenerFilter:
    return listener_components_pb2.ListenerFilter(
        name=TLS_INSPECTOR, typed_config=pack(tls_inspector_pb2.TlsInspector())
    )


def downstream_tls_socket(
    certificates: Sequence[TlsCertificate],
    alpn: Sequence[str],
    sds_source: config_source_pb2.ConfigSource,
    client_validation: ClientValidation | None = None,
) -> base_pb2.TransportSocket:
    """Certificates (and, with `client_validation`, the CA certificates clients' are checked
    against) named for SDS, fetched through `sds_source`."""
    common = tls_pb2.CommonTlsContext(
        tls_certificate_sds_secret_configs=[
            sds_secret_config(certificate, sds_source) for certificate in certificates
        ],
        alpn_protocols=list(alpn),
    )
    context = tls_pb2.DownstreamTlsContext(common_tls_context=common)
    if client_validation is not None:
        _validate_clients(context, client_validation, sds_source)
    return base_pb2.TransportSocket(name=TLS_TRANSPORT_SOCKET, typed_config=pack(context))


def _validate_clients(
    context: tls_pb2.DownstreamTlsContext,
    validation: ClientValidation,
    sds_source: config_source_pb2.ConfigSource,
) -> None:
    common = context.common_tls_context
    config = sds_secret_config(validation, sds_source)
    if not validation.insecure_fallback:
        context.require_client_certificate.CopyFrom(BoolValue(value=True))
        common.validation_context_sds_secret_config.CopyFrom(config)
        return
    # Said in the Listener itself, where a reader of `render` sees it beside the chain.
    context.require_client_certificate.CopyFrom(BoolValue(value=False))
    combined = common.combined_validation_context
    combined.default_validation_context.trust_chain_verification = (
        common_pb2.CertificateValidationContext.ACCEPT_UNTRUSTED
    )
    combined.validation_context_sds_secret_config.CopyFrom(config)
