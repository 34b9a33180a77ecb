"""UpstreamTls → the `envoy.transport_sockets.tls` transport socket of a cluster.

Every context verifies the certificate chain *and* the name: explicit SAN matchers, or
auto_sni_san_validation against the SNI Envoy sent (auto_host_sni: the endpoint's hostname).
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2
from envoy.type.matcher.v3 import string_pb2

from dragoman.dag.model import H1, H2, SubjectAltNameMatch, TlsParameters, UpstreamTls
from dragoman.envoy.resources.common_messages import pack
from dragoman.envoy.resources.sds_secrets import sds_secret_config

TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls"
SAN_TYPES = {
    "DNS": common_pb2.SubjectAltNameMatcher.DNS,
    "URI": common_pb2.SubjectAltNameMatcher.URI,
}


def upstream_tls_context(
    tls: UpstreamTls,
    protocol: str,
    system_ca_file: str,
    sds_source: config_source_pb2.ConfigSource,
) -> tls_pb2.UpstreamTlsContext:
    if tls.trusted_ca is not None:
        trusted_ca = base_pb2.DataSource(inline_bytes=tls.trusted_ca)
    else:
        trusted_ca = base_pb2.DataSource(filename=system_ca_file)
    validation = common_pb2.CertificateValidationContext(
        trusted_ca=trusted_ca,
        match_typed_subject_alt_names=[_san_matcher(san) for san in tls.subject_alt_names],
    )
    common = tls_pb2.CommonTlsContext(validation_context=validation)
    if tls.client_certificate is not None:
        # Presented when the upstream asks for a client certificate (mutual TLS); named for
        # SDS, so the key never travels inside a Cluster.
        common.tls_certificate_sds_secret_configs.append(
            sds_secret_config(tls.client_certificate, sds_source)
        )
    if tls.parameters is not None:
        common.tls_params.CopyFrom(_tls_parameters(tls.parameters))
    if protocol == H2:
        # HTTP/2 only (gRPC): offer nothing else. Otherwise the HTTP protocol options'
        # auto_config offers h2 and http/1.1 and speaks what the upstream picks.
        common.alpn_protocols.append("h2")
    elif protocol == H1:
        # HTTP/1.1 only (an XBackend's HTTP11): a backend that would pick h2 is not offered it.
        common.alpn_protocols.append("http/1.1")
    automatic = tls.sni is None
    return tls_pb2.UpstreamTlsContext(
        common_tls_context=common,
        sni=tls.sni or "",
        auto_host_sni=automatic,
        auto_sni_san_validation=automatic,
    )


def upstream_tls_socket(
    tls: UpstreamTls,
    protocol: str,
    system_ca_file: str,
    sds_source: config_source_pb2.ConfigSource,
) -> base_pb2.TransportSocket:
    return base_pb2.TransportSocket(
        name=TLS_TRANSPORT_SOCKET,
        typed_config=pack(upstream_tls_context(tls, protocol, system_ca_file, sds_source)),
    )


def _san_matcher(san: SubjectAltNameMatch) -> common_pb2.SubjectAltNameMatcher:
    return common_pb2.SubjectAltNameMatcher(
        san_type=SAN_TYPES[san.san_type], matcher=string_pb2.StringMatcher(exact=san.value)
    )


def _tls_parameters(parameters: TlsParameters) -> common_pb2.TlsParameters:
    """The versions, suites and groups a BackendTLSPolicy's options name (checked there
    against what Envoy accepts); what they leave unset stays Envoy's default."""
    message = common_pb2.TlsParameters(
        cipher_suites=list(parameters.cipher_suites), ecdh_curves=list(parameters.ecdh_curves)
    )
    if parameters.min_version is not None:
        message.tls_minimum_protocol_version = common_pb2.TlsParameters.TlsProtocol.Value(
            parameters.min_version
        )
    if parameters.max_version is not None:
        message.tls_maximum_protocol_version = common_pb2.TlsParameters.TlsProtocol.Value(
            parameters.max_version
        )
    return message
