"""TlsCertificate and ClientValidation → envoy.extensions.transport_sockets.tls.v3.Secret,
served over SDS.

Listeners name their certificates by SDS resource name only; the chain and key travel in a
Secret resource sent to the node groups whose listeners use it. Rotating a certificate then
changes that Secret alone: the Listener's bytes, and so its version, stay the same, and Envoy
drains no connection. The CA certificates a listener validates clients' certificates with
travel the same way, as a validation context.
"""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2, config_source_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2

from dragoman.dag.model import ClientValidation, InjectedCredential, TlsCertificate
from dragoman.envoy.resources.credential_injection import credential_sds_name, credential_secret
from dragoman.objects import ObjectKey


def secret_name(secret: ObjectKey) -> str:
    """The SDS name of the certificate in Kubernetes Secret `secret`: `namespace/name`."""
    return f"{secret.namespace}/{secret.name}"


# What travels as an SDS Secret: a certificate and its key, a validation context, or a
# credential a listener's routes inject (a generic secret).
SdsValue = TlsCertificate | ClientValidation | InjectedCredential


def sds_name(value: SdsValue) -> str:
    """The SDS name a listener or cluster gives the value."""
    if isinstance(value, ClientValidation):
        return value.name
    if isinstance(value, InjectedCredential):
        return credential_sds_name(value)
    return secret_name(value.secret)


def sds_secret_config(
    value: SdsValue, source: config_source_pb2.ConfigSource
) -> secret_pb2.SdsSecretConfig:
    """The value named for SDS, fetched through `source`."""
    return secret_pb2.SdsSecretConfig(name=sds_name(value), sds_config=source)


def secret(value: SdsValue) -> secret_pb2.Secret:
    if isinstance(value, InjectedCredential):
        return credential_secret(value)
    if isinstance(value, ClientValidation):
        return secret_pb2.Secret(
            name=value.name,
            validation_context=common_pb2.CertificateValidationContext(
                trusted_ca=base_pb2.DataSource(inline_bytes=value.trusted_ca)
            ),
        )
    return secret_pb2.Secret(
        name=secret_name(value.secret),
        tls_certificate=common_pb2.TlsCertificate(
            certificate_chain=base_pb2.DataSource(inline_bytes=value.certificate_chain),
            private_key=base_pb2.DataSource(inline_bytes=value.private_key),
        ),
    )
