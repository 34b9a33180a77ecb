"""An XBackend (GEP-4894) to the cluster that reaches it, judged by the rules an ExternalName
Service's outside host is (unsafe names, the platform's allowed and denied domains, the DNS
check, DNS annotations), except that a name inside the cluster domain is refused, never
followed to a Service (GEP-4894: implementations MUST refuse them).

- `protocol` picks the upstream protocol; unset, the route's decides. MCP is not supported.
- `tls.mode` None: cleartext; ServerOnly: TLS, the SNI and the name verified from the
  hostname and the system CAs, unless `validation` says otherwise (as a BackendTLSPolicy's);
  ClientAndServer: also presents the `clientCertificateRef` Secret, to this backend alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dragoman.dag.backend_tls_policy import ValidationSpec, judge_validation
from dragoman.dag.certificate_refs import referenced_certificate
from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import DNS_CHECK_FAILED, DNS_CHECK_PENDING
from dragoman.dag.external_names import is_cluster_local, normalise, normalised_unsafe_reason
from dragoman.dag.model import (
    DEFAULT_DNS_SETTINGS,
    H1,
    H2,
    H2C,
    HTTP1,
    TCP,
    DnsCluster,
    DnsSettings,
    L4Protocol,
    UpstreamProtocol,
    UpstreamTls,
)
from dragoman.dag.reference_grants import Referrer
from dragoman.dag.upstreams.clusters import ResolvedCluster, Unresolved, external_host_refusal
from dragoman.dag.upstreams.dns_settings import service_dns_settings
from dragoman.objects.xbackend import XBACKEND_GROUP, XBackend

HOSTNAME_FIELD = "spec.externalHostname.hostname"
PROTOCOL_FIELD = "spec.protocol"
TLS_FIELD = "spec.tls"
UNSAFE_HOSTNAME = "UnsafeHostname"
UNSUPPORTED_VALUE = "UnsupportedValue"
INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"
# The DNS check's reasons: the XBackend is Accepted, its name not (yet) served.
_DNS_REASONS = frozenset({DNS_CHECK_PENDING, DNS_CHECK_FAILED})

# spec.protocol (unset: the route's) -> the upstream protocol, in cleartext and over TLS.
_HTTP_PROTOCOLS: dict[str | None, tuple[UpstreamProtocol, UpstreamProtocol]] = {
    None: (HTTP1, HTTP1),
    "HTTP": (HTTP1, HTTP1),
    "HTTP11": (HTTP1, H1),  # over TLS: ALPN http/1.1 alone
    "HTTP2": (H2C, H2),
    "H2C": (H2C, H2),
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an XBackend (or its use by a route) is not served: a condition reason, the
    XBackend's field at fault, and a message."""

    reason: str
    field: str
    message: str


@dataclass(frozen=True, slots=True)
class XBackendVerdict:
    """One XBackend judged on its own (not for a route): its outside host, the TLS it asks
    for, and what keeps it from being served or is served otherwise than it asks."""

    backend: XBackend
    hostname: str  # normalised
    tls: UpstreamTls | None = None
    refusal: Refusal | None = None  # Accepted=False
    unresolved: Refusal | None = None  # ResolvedRefs=False (a refusal too when it is)
    dns_refusal: Refusal | None = None  # the DNS check has not allowed the name
    dns: DnsSettings = DEFAULT_DNS_SETTINGS  # from its dragoman.dev/dns-* annotations
    warnings: tuple[str, ...] = ()  # bad DNS annotations (served with defaults)


def judge_xbackend(backend: XBackend, context: BuildContext) -> XBackendVerdict:
    hostname = normalise(backend.hostname)
    refused = host_refusal(backend, hostname, context)
    if refused is not None:
        return XBackendVerdict(backend, hostname, refusal=refused)
    tls, unresolved, refused = _tls(backend, context)
    dns = service_dns_settings(backend, context.options.dns_check)
    warnings = dns.problems
    verdict = XBackendVerdict(
        backend,
        hostname,
        tls=tls,
        refusal=refused,
        unresolved=unresolved,
        dns=dns.settings,
        warnings=warnings,
    )
    found = external_host_refusal(hostname, context, field="hostname")
    if found is None:
        return verdict
    reason, message = found
    refusal = Refusal(reason, HOSTNAME_FIELD, message)
    if reason in _DNS_REASONS:
        return dataclasses.replace(verdict, dns_refusal=refusal)
    return dataclasses.replace(verdict, refusal=verdict.refusal or refusal)


def xbackend_cluster(
    backend: XBackend, context: BuildContext, l4: L4Protocol | None = None
) -> ResolvedCluster | Unresolved:
    """The DNS cluster a route's backendRef to `backend` is served by (`l4`: for a TCPRoute
    or TLSRoute), or why there is none."""
    verdict = judge_xbackend(backend, context)
    key = backend.key
    named = f"XBackend {key.namespace}/{key.name}"
    refusal = verdict.refusal or verdict.dns_refusal
    if refusal is not None:
        return Unresolved(refusal.reason, f"{named}: {refusal.field}: {refusal.message}")
    protocol = _protocol(backend, verdict.tls, l4)
    if isinstance(protocol, Refusal):
        return Unresolved(protocol.reason, f"{named}: {protocol.field}: {protocol.message}")
    suffix = "" if protocol == HTTP1 else f"/{protocol}"
    # Named by spec.port.name when set, as an ExternalName Service's cluster is by its port's
    # name: a new port number updates the cluster in place, and Envoy keeps the old one
    # serving until the new one is warm (a new name would be routed to before it resolved).
    port = backend.port_name or str(backend.port)
    cluster = DnsCluster(
        # Its own prefix: a Service of the same name and port has a cluster of its own.
        name=f"xbackend/{key.namespace}/{key.name}/{port}{suffix}",
        service=key,
        hostname=verdict.hostname,
        port=backend.port,
        protocol=protocol,
        tls=verdict.tls,
        dns=verdict.dns,
        checked=context.options.dns_check,
        traffic=context.upstream.traffic_policies.cluster_traffic(
            "XBackend", key.namespace, key.name
        ),
    )
    return ResolvedCluster(cluster, verdict.warnings)


def host_refusal(backend: XBackend, hostname: str, context: BuildContext) -> Refusal | None:
    """Why the XBackend is refused before its name is looked at by the platform's domains or
    the DNS check: an unsupported protocol, an unsafe name, a name inside the cluster."""
    if backend.protocol == "MCP":
        return Refusal(
            UNSUPPORTED_VALUE,
            PROTOCOL_FIELD,
            "protocol 'MCP' is not supported (supported: HTTP, HTTP11, HTTP2, H2C, TCP)",
        )
    unsafe = normalised_unsafe_reason(hostname, "hostname")
    if unsafe is not None:
        return Refusal(UNSAFE_HOSTNAME, HOSTNAME_FIELD, unsafe)
    domain = context.options.cluster_domain
    if is_cluster_local(hostname, domain):
        return Refusal(
            UNSAFE_HOSTNAME,
            HOSTNAME_FIELD,
            f"{hostname!r} is inside the cluster domain ({domain}); an XBackend names an "
            "outside host (name a Service as the backendRef instead)",
        )
    return None


def _tls(
    backend: XBackend, context: BuildContext
) -> tuple[UpstreamTls | None, Refusal | None, Refusal | None]:
    """(the TLS, why a reference does not resolve, why the XBackend cannot be served)."""
    tls = backend.tls
    if tls is None or tls.mode == "None":
        if tls is not None and tls.validation is not None:
            refusal = Refusal(
                UNSUPPORTED_VALUE,
                f"{TLS_FIELD}.validation",
                "validation is set but mode is None (no TLS); set mode ServerOnly to use it",
            )
            return None, None, refusal
        return None, None, None
    namespace = backend.meta.namespace
    upstream = UpstreamTls(policy=backend.key)  # SNI and name from the hostname, system CAs
    unresolved: Refusal | None = None
    validation = tls.validation
    if validation is not None:
        spec = ValidationSpec(
            namespace,
            backend.key,
            validation.hostname,
            validation.ca_certificate_refs,
            validation.well_known_ca_certificates,
            validation.subject_alt_names,
            field=f"{TLS_FIELD}.validation",
        )
        store = context.store
        judged, invalid, problem = judge_validation(spec, store.config_maps, store.secrets)
        if problem is not None:
            unresolved = Refusal(problem[0], spec.field, problem[1])
        if judged is None:
            assert invalid is not None  # judge_validation says why it made no TLS
            return None, unresolved, Refusal(invalid[0], spec.field, invalid[1])
        upstream = judged
    ref = tls.client_certificate_ref
    if ref is not None:
        referrer = Referrer(XBACKEND_GROUP, XBackend.kind, namespace)
        found = referenced_certificate(ref, referrer, context)
        if isinstance(found, tuple):
            field = f"{TLS_FIELD}.clientCertificateRef"
            refusal = Refusal(found[0], field, f"clientCertificateRef: {found[1]}")
            # Never sent without the certificate the backend asks for.
            return None, refusal, refusal
        upstream = dataclasses.replace(upstream, client_certificate=found)
    return upstream, unresolved, None


def _protocol(
    backend: XBackend, tls: UpstreamTls | None, l4: L4Protocol | None
) -> UpstreamProtocol | Refusal:
    protocol = backend.protocol
    if l4 is not None:
        if protocol not in (None, "TCP"):
            return Refusal(
                "UnsupportedProtocol",
                PROTOCOL_FIELD,
                f"protocol {protocol!r} cannot carry a route's whole connections (use TCP)",
            )
        return TCP
    if protocol == "TCP":
        return Refusal(
            "UnsupportedProtocol",
            PROTOCOL_FIELD,
            "protocol 'TCP' cannot carry an HTTPRoute's or GRPCRoute's requests",
        )
    cleartext, secure = _HTTP_PROTOCOLS[protocol]
    return secure if tls is not None else cleartext
