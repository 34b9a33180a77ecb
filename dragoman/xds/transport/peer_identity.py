"""Who is at the other end of an xDS or CSDS call: the identity its client certificate names."""

from __future__ import annotations

import grpc

from dragoman.security.identities import Identity, identity_of


def peer_identity(context: grpc.aio.ServicerContext) -> tuple[bool, Identity | None]:
    """(whether the peer authenticated with a client certificate, the identity it names).

    The identity comes from the URI SANs of the verified peer certificate, parsed here
    rather than taken from grpcio's flattened SAN list, which mixes DNS names and URIs.
    """
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"]:
        return False, None
    pems = auth.get("x509_pem_cert")
    if not pems:
        return False, None  # TLS without a client certificate (never with this server's creds)
    from cryptography import x509  # here: a plaintext server never loads `cryptography`

    try:
        certificate = x509.load_pem_x509_certificate(pems[0])
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (ValueError, x509.ExtensionNotFound):
        return True, None
    uris = names.value.get_values_for_type(x509.UniformResourceIdentifier)
    return True, identity_of(list(uris))
