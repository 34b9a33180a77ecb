"""What listeners that read or terminate clients' TLS share: the TLS inspector (it reads the
SNI so filter chains can match on it) and the downstream TLS transport socket, which names
its certificates for SDS (`dragoman.envoy.resources.sds_secrets`) and never holds a key."""

from __future__ import annotations

from collections.abc import Sequence

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.config.listener.v3 import listener_components_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.transport_sockets.tls.v3 import tls_pb2

from dragoman.dag.model import TlsCertificate
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
) -> base_pb2.TransportSocket:
    context = tls_pb2.DownstreamTlsContext(
        common_tls_context=tls_pb2.CommonTlsContext(
            tls_certificate_sds_secret_configs=[
                sds_secret_config(certificate, sds_source) for certificate in certificates
            ],
            alpn_protocols=list(alpn),
        )
    )
    return base_pb2.TransportSocket(name=TLS_TRANSPORT_SOCKET, typed_config=pack(context))
