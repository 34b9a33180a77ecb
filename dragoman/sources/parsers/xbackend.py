"""XBackend (gateway.networking.x-k8s.io/v1alpha1) from decoded manifests, validated as the
CRD (OpenAPI schema and CEL rules) validates it.

What the CRD accepts but dragoman refuses (an IP address or `localhost` as the hostname, a
name inside the cluster domain, protocol MCP, a missing Secret) is not a parse error: the
build reports it in the XBackend's status and on the routes that name it.
"""

from __future__ import annotations

from dragoman.objects import ObjectMeta
from dragoman.objects.xbackend import (
    EXTERNAL_HOSTNAME,
    TLS_MODES,
    XBACKEND_PROTOCOLS,
    XBackend,
    XBackendTls,
    XBackendValidation,
)
from dragoman.sources.fields import Node
from dragoman.sources.formats import DNS1123_LABEL, DNS1123_SUBDOMAIN, or_empty
from dragoman.sources.parsers.backend_tls import parse_validation
from dragoman.sources.parsers.gateway import certificate_ref

# The CRD's own rule (hostname must not end with .cluster.local); the build refuses names
# in the configured cluster domain too.
_CLUSTER_LOCAL = ".cluster.local"
CLIENT_AND_SERVER = "ClientAndServer"


def parse_xbackend(root: Node, meta: ObjectMeta) -> XBackend:
    spec = root.mapping("spec", required=True)
    if spec is None:
        return XBackend(meta=meta)
    backend_type = spec.string("type", required=True, choices=(EXTERNAL_HOSTNAME,))
    external = spec.mapping("externalHostname")
    hostname = ""
    if backend_type == EXTERNAL_HOSTNAME and external is None:
        spec.report(spec.at("externalHostname"), "must be set when type is ExternalHostname")
    if external is not None:
        hostname = external.string(
            "hostname", required=True, format=DNS1123_SUBDOMAIN, min_length=1, max_length=253
        )
        if hostname.endswith(_CLUSTER_LOCAL):
            external.report(
                external.at("hostname"), "must not be an IP address or end with .cluster.local"
            )
    port_node = spec.mapping("port", required=True)
    port, port_name = 0, ""
    if port_node is not None:
        port = port_node.integer("port", required=True, minimum=1, maximum=65535)
        port_name = port_node.string("name", format=or_empty(DNS1123_LABEL), max_length=63)
    return XBackend(
        meta=meta,
        type=backend_type,
        hostname=hostname,
        port=port,
        port_name=port_name,
        protocol=spec.optional_choice("protocol", XBACKEND_PROTOCOLS),
        tls=_tls(spec),
    )


def _tls(spec: Node) -> XBackendTls | None:
    tls = spec.mapping("tls")
    if tls is None:
        return None
    mode = tls.optional_choice("mode", TLS_MODES, required=True) or "None"
    ref_node = tls.mapping("clientCertificateRef")
    if (mode == CLIENT_AND_SERVER) != (ref_node is not None):
        tls.report(
            tls.path, "clientCertificateRef must be set if and only if mode is ClientAndServer"
        )
    validation_node = tls.mapping("validation")
    validation = None
    if validation_node is not None:
        hostname, ca_refs, well_known, sans = parse_validation(validation_node)
        validation = XBackendValidation(hostname, ca_refs, well_known, sans)
    return XBackendTls(
        mode=mode,
        client_certificate_ref=certificate_ref(ref_node) if ref_node is not None else None,
        validation=validation,
    )
