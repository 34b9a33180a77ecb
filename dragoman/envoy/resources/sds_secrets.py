"""TlsCertificate → envoy.extensions.transport_sockets.tls.v3.Secret, served over SDS.

Listeners name their certificates by SDS resource name only; the chain and key travel in a
Secret resource sent to the node groups whose listeners use it. Rotating a certificate then
changes that Secret alone: the Listener's bytes, and so its version, stay the same, and Envoy
drains no connection.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2

from dragoman.dag.model import TlsCertificate
from dragoman.objects import ObjectKey


def secret_name(secret: ObjectKey) -> str:
    """The SDS name of the certificate in Kubernetes Secret `secret`: `namespace/name`."""
    return f"{secret.namespace}/{secret.name}"


def sds_secret_config(
    certificate: TlsCertificate, source: config_source_pb2.ConfigSource
) -> secret_pb2.SdsSecretConfig:
    """The certificate named for SDS, fetched through `source`."""
    return secret_pb2.SdsSecretConfig(name=secret_name(certificate.secret), sds_config=source)


def secret(certificate: TlsCertificate) -> secret_pb2.Secret:
    return secret_pb2.Secret(
        name=secret_name(certificate.secret),
        tls_certificate=common_pb2.TlsCertificate(
            certificate_chain=base_pb2.DataSource(inline_bytes=certificate.certificate_chain),
            private_key=base_pb2.DataSource(inline_bytes=certificate.private_key),
        ),
    )
