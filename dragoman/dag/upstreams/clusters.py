"""A Service port to the cluster that serves it: EDS, a DNS host, an ExternalName alias, or an
in-cluster-first aggregate; with the TLS, DNS settings and platform policy that apply."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import NOT_ALLOWED_BY_POLICY, dns_refusal
from dragoman.dag.external_name_policy import ExternalNamePolicy
from dragoman.dag.external_names import (
    in_cluster_target,
    is_cluster_local,
    normalise,
    normalised_unsafe_reason,
)
from dragoman.dag.model import (
    H2,
    H2C,
    HTTP1,
    UDP,
    AggregateCluster,
    Cluster,
    DnsCluster,
    EdsCluster,
    L4Protocol,
    UpstreamProtocol,
    UpstreamTls,
)
from dragoman.dag.reference_grants import (
    Referrer,
    not_permitted_message,
    service_target,
)
from dragoman.dag.upstream_inputs import UpstreamInputs
from dragoman.dag.upstreams.dns_settings import service_dns_settings
from dragoman.dag.upstreams.in_cluster_first import PREFER_SERVICE, preferred_service
from dragoman.dag.upstreams.tls import TlsRefusal, upstream_tls
from dragoman.objects import Service, ServicePort
from dragoman.objects.meta import DRAGOMAN_GROUP

# ExternalName aliases followed before giving up: enough for a rename or two, and ends loops.
MAX_ALIAS_HOPS = 3

# ServicePort appProtocol values that choose the upstream protocol (anything else: HTTP/1.1).
APP_PROTOCOLS: dict[str, UpstreamProtocol] = {"kubernetes.io/h2c": H2C}

# Suffix of a Service's own cluster inside a failover aggregate: its external name's, its pods'.
FALLBACK_SUFFIX = "external"
PODS_SUFFIX = "pods"


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why a Service port yields no cluster."""

    reason: str
    message: str
    # True when the backendRef's own port is at fault (the port of the Service it names).
    port_at_fault: bool = False


@dataclass(frozen=True, slots=True)
class ResolvedCluster:
    """The cluster a Service port resolves to, and what of the Service was not served as it
    asks (bad DNS annotations, refused spec.externalIPs, a preferred Service that cannot be
    used): the cluster is served with defaults instead."""

    cluster: Cluster
    warnings: tuple[str, ...] = ()


def cluster_name(service: Service, port: int, protocol: UpstreamProtocol = HTTP1) -> str:
    """`ns/svc/port`, with `/<protocol>` appended for any protocol but HTTP/1.1."""
    base = f"{service.meta.namespace}/{service.meta.name}/{port}"
    return base if protocol == HTTP1 else f"{base}/{protocol}"


def _dns_cluster_name(
    service: Service, port: int, declared: ServicePort | None, protocol: UpstreamProtocol
) -> str:
    """`ns/svc/<port name>` when the Service names the port: the name survives a change of
    the port's number, so Envoy updates the cluster in place and keeps the old one serving
    until the new one has resolved (a new name would be routed to before it resolved)."""
    if declared is None or not declared.name:
        return cluster_name(service, port, protocol)
    base = f"{service.meta.namespace}/{service.meta.name}/{declared.name}"
    return base if protocol == HTTP1 else f"{base}/{protocol}"


def service_cluster(
    service: Service, port: int, context: BuildContext, l4: L4Protocol | None = None
) -> Cluster | Unresolved:
    """The cluster of resolved_cluster, for those that have no use for its warnings."""
    resolved = resolved_cluster(service, port, context, l4)
    return resolved if isinstance(resolved, Unresolved) else resolved.cluster


def resolved_cluster(
    service: Service, port: int, context: BuildContext, l4: L4Protocol | None = None
) -> ResolvedCluster | Unresolved:
    """The cluster for `port` of `service`, following in-cluster ExternalName aliases
    (into another namespace only where a ReferenceGrant there allows it), with its warnings.

    `l4` (TCP or UDP): the cluster carries whole connections or datagrams, not HTTP: the
    Service port must use that protocol, and TLS is originated only where a
    BackendTLSPolicy asks for it (never over UDP)."""
    resolved = _with_failover(service, port, context, l4)
    if l4 is None:
        key = service.key, port  # (the key each object carries: no new tuple of names)
        context.resolved_ports[key] = None if isinstance(resolved, Unresolved) else resolved.cluster
    return resolved


def _with_failover(
    service: Service, port: int, context: BuildContext, l4: L4Protocol | None
) -> ResolvedCluster | Unresolved:
    """The Service's own cluster, then (when its BackendPolicy names a `failover`) the same
    port of each Service that takes its traffic when it has no healthy host, in order."""
    resolved = _resolved_cluster(service, port, context, l4)
    namespace, name = service.meta.namespace, service.meta.name
    chain = context.upstream.backend_policies.failover_of(namespace, name)
    if isinstance(resolved, Unresolved) or not chain:
        return resolved
    own = resolved.cluster
    warnings = list(resolved.warnings)
    referrer = Referrer(DRAGOMAN_GROUP, "BackendPolicy", namespace)
    members: list[EdsCluster | DnsCluster] = []
    for key in chain:
        member = context.services.get(key)
        where = f"Service {namespace}/{name} failover to Service {key[0]}/{key[1]}"
        # (Asked again here, so a change of the grant reaches the routes that read it.)
        if member is None or not context.grants.permits(referrer, service_target(*key)):
            warnings.append(f"{where}: no such Service, or not permitted; skipped")
            continue
        found = _resolved_cluster(member, port, context, l4)
        if isinstance(found, Unresolved):
            warnings.append(f"{where}: {found.message}; skipped")
            continue
        leaves = _leaves(found.cluster)
        if context.upstream.backend_policies.failover_of(*key) and len(leaves) == 1:
            # Its own name is its failover aggregate's: its hosts are under its child's.
            leaves = (_as_child(leaves[0]),)
        members.extend(_same_protocol(child, own.protocol) for child in leaves)
    if not members:
        return ResolvedCluster(own, tuple(warnings))
    if isinstance(own, AggregateCluster):
        children = (*own.children, *members)
        aggregate = dataclasses.replace(own, children=_distinct(children))
    else:
        aggregate = failover_aggregate(own, service, (), members)
    return ResolvedCluster(aggregate, tuple(warnings))


def failover_aggregate(
    own: EdsCluster | DnsCluster,
    service: Service,
    before: Sequence[EdsCluster | DnsCluster],
    after: Sequence[EdsCluster | DnsCluster],
) -> AggregateCluster:
    """Failover, the one way it is served: an aggregate named like the Service's own
    cluster (so routes keep naming it), over `before`, the own cluster (renamed
    `.../external` for an external name, `.../pods` for pods), then `after`.

    In-cluster first is a pod-backed Service `before` an ExternalName; a BackendPolicy's
    failover the Services `after` its target."""
    children = _distinct((*before, _as_child(own), *after))
    return AggregateCluster(own.name, service.key, children, own.protocol)


def _as_child(own: EdsCluster | DnsCluster) -> EdsCluster | DnsCluster:
    """A Service's own cluster as a child of its failover aggregate, which takes its name."""
    suffix = FALLBACK_SUFFIX if isinstance(own, DnsCluster) else PODS_SUFFIX
    base = _renamed(own.name, own.protocol, HTTP1) + f"/{suffix}"
    return dataclasses.replace(own, name=_renamed(base, HTTP1, own.protocol))


def _leaves(cluster: Cluster) -> tuple[EdsCluster | DnsCluster, ...]:
    return cluster.children if isinstance(cluster, AggregateCluster) else (cluster,)


def _same_protocol(
    cluster: EdsCluster | DnsCluster, protocol: UpstreamProtocol
) -> EdsCluster | DnsCluster:
    spoken = with_protocol(cluster, protocol)
    assert not isinstance(spoken, AggregateCluster)  # a leaf stays a leaf
    return spoken


def _distinct(
    children: Sequence[EdsCluster | DnsCluster],
) -> tuple[EdsCluster | DnsCluster, ...]:
    """Each cluster once (the first time it comes), in order."""
    seen: dict[str, EdsCluster | DnsCluster] = {}
    for child in children:
        seen.setdefault(child.name, child)
    return tuple(seen.values())


def _resolved_cluster(
    service: Service, port: int, context: BuildContext, l4: L4Protocol | None
) -> ResolvedCluster | Unresolved:
    path = [service]
    declared: ServicePort | None = None
    while True:
        current = path[-1]
        external = current.is_external_name
        # A bare CNAME (an ExternalName that declares no ports) takes the backendRef's port.
        if current.ports or not external:
            found = _declared_port(path, port, l4)
            if isinstance(found, Unresolved):
                return found
            declared = found
            if not external:
                eds = _eds_cluster(
                    path, port, declared, context.upstream, context.options.cluster_domain, l4
                )
                return eds if isinstance(eds, Unresolved) else ResolvedCluster(eds)
        step = _external_name_step(path, context)
        if isinstance(step, str):
            own = declared if current.ports else None
            return _external_cluster(path, step, port, own, declared, context, l4)
        if not isinstance(step, Service):
            return step
        if any(step.key == seen.key for seen in path):
            return Unresolved("BackendNotFound", f"{_describe([*path, step])}: aliases form a loop")
        if len(path) > MAX_ALIAS_HOPS:
            return Unresolved(
                "BackendNotFound",
                f"{_describe([*path, step])}: more than {MAX_ALIAS_HOPS} ExternalName aliases",
            )
        path.append(step)


def with_protocol(cluster: Cluster, protocol: UpstreamProtocol) -> Cluster:
    """The same Service port spoken in `protocol`: a cluster of its own, named for it.

    Over TLS, HTTP/2 is negotiated by ALPN: h2c becomes h2."""
    if cluster.protocol == protocol:
        return cluster
    if isinstance(cluster, AggregateCluster):
        return dataclasses.replace(
            cluster,
            name=_renamed(cluster.name, cluster.protocol, protocol),
            protocol=protocol,
            children=tuple(_same_protocol(child, protocol) for child in cluster.children),
        )
    if cluster.tls is not None and protocol == H2C:
        protocol = H2
        if cluster.protocol == protocol:
            return cluster
    return dataclasses.replace(
        cluster, name=_renamed(cluster.name, cluster.protocol, protocol), protocol=protocol
    )


def _renamed(name: str, old: str, new: str) -> str:
    # HTTP/1.1 names carry no suffix: a port named "http1" is not one.
    base = name if old == HTTP1 else name.removesuffix(f"/{old}")
    return base if new == HTTP1 else f"{base}/{new}"


def _protocol(
    declared: ServicePort | None, tls: UpstreamTls | None, l4: L4Protocol | None
) -> UpstreamProtocol:
    if l4 is not None:
        return l4
    protocol = APP_PROTOCOLS.get(declared.app_protocol, HTTP1) if declared else HTTP1
    return H2 if tls is not None and protocol == H2C else protocol


def _eds_cluster(
    path: list[Service],
    port: int,
    declared: ServicePort,
    upstream: UpstreamInputs,
    cluster_domain: str,
    l4: L4Protocol | None = None,
) -> EdsCluster | Unresolved:
    service = path[-1]
    tls = _tls(service, port, declared.name, declared.app_protocol, upstream, l4)
    if isinstance(tls, TlsRefusal):
        return Unresolved(tls.reason, f"{_describe(path)}: {tls.message}")
    protocol = _protocol(declared, tls, l4)
    return EdsCluster(
        name=cluster_name(service, port, protocol),
        service=service.key,
        port=port,
        target_port=port if declared.target_port is None else declared.target_port,
        port_name=declared.name,
        protocol=protocol,
        tls=tls,
        client_ip_affinity=service.client_ip_affinity,
        policy=upstream.backend_policies.cluster_policy(
            service, f"{service.meta.name}.{service.meta.namespace}.svc.{cluster_domain}"
        ),
        traffic=upstream.traffic_policies.cluster_traffic(
            "Service", service.meta.namespace, service.meta.name
        ),
    )


def _external_cluster(
    path: list[Service],
    hostname: str,
    port: int,
    own_port: ServicePort | None,
    declared: ServicePort | None,
    context: BuildContext,
    l4: L4Protocol | None = None,
) -> ResolvedCluster | Unresolved:
    """The DNS cluster for an outside host, once the platform policy allows it; wrapped in an
    aggregate when the Service prefers an in-cluster one."""
    service = path[-1]
    options, upstream = context.options, context.upstream
    policy = options.external_names
    # With spec.externalIPs the Service names the addresses itself: they are judged like
    # resolved ones, and the name is never resolved (Host, SNI and the certificate still
    # use it).
    refusal = external_host_refusal(hostname, context, resolved=not service.external_ips)
    if refusal is not None:
        return Unresolved(refusal[0], f"{_describe(path)}: {refusal[1]}")
    fixed: tuple[str, ...] = ()
    refused: list[str] = []
    if service.external_ips:
        fixed, refused = external_ip_verdicts(service.external_ips, policy)
        if not fixed:
            return Unresolved(
                NOT_ALLOWED_BY_POLICY,
                f"{_describe(path)}: no usable spec.externalIPs: {'; '.join(refused)}",
            )
    tls = _tls(
        service,
        port,
        own_port.name if own_port else "",
        declared.app_protocol if declared else "",
        upstream,
        l4,
    )
    if isinstance(tls, TlsRefusal):
        return Unresolved(tls.reason, f"{_describe(path)}: {tls.message}")
    protocol = _protocol(declared, tls, l4)
    dns = service_dns_settings(service, options.dns_check)
    external = DnsCluster(
        name=_dns_cluster_name(service, port, own_port, protocol),
        service=service.key,
        hostname=hostname,
        port=port,
        protocol=protocol,
        tls=tls,
        dns=dns.settings,
        checked=options.dns_check,
        client_ip_affinity=service.client_ip_affinity,
        addresses=fixed,
        policy=upstream.backend_policies.cluster_policy(service, hostname),
        traffic=upstream.traffic_policies.cluster_traffic(
            "Service", service.meta.namespace, service.meta.name
        ),
    )
    warnings = [
        *dns.problems,
        *(
            f"Service {service.meta.namespace}/{service.meta.name} spec.externalIPs: {message}; "
            "not used"
            for message in refused
        ),
    ]
    preferred = _preferred_cluster(service, port, context, l4)
    if not isinstance(preferred, EdsCluster):
        if preferred is not None:
            warnings.append(preferred)
        return ResolvedCluster(external, tuple(warnings))
    aggregate = failover_aggregate(external, service, (preferred,), ())
    return ResolvedCluster(aggregate, tuple(warnings))


def external_host_refusal(
    hostname: str, context: BuildContext, *, resolved: bool = True, field: str = "externalName"
) -> tuple[str, str] | None:
    """Why Envoy may not be sent to `hostname` (normalised, literally safe, outside the
    cluster), as (reason, message): the platform's allowed and denied domains, then, when
    the name is `resolved` and the DNS check is on, what the check observed. None: it may.
    The one judgement of an outside host, for ExternalName Services and XBackends alike."""
    options = context.options
    policy = options.external_names
    refusal = policy.domain_refusal(hostname)
    if refusal is not None:
        return NOT_ALLOWED_BY_POLICY, refusal
    if resolved and options.dns_check:
        checked = dns_refusal(hostname, context.upstream.dns.get(hostname), policy, field)
        if checked is not None:
            return checked.reason, checked.message
    return None


def _preferred_cluster(
    service: Service, port: int, context: BuildContext, l4: L4Protocol | None = None
) -> EdsCluster | str | None:
    """The in-cluster Service's EDS cluster an ExternalName prefers; a message when the
    preference cannot be followed; None when it asks for none."""
    preference = preferred_service(service, context.services)
    if preference is None:
        return None
    if preference.service is None:
        return preference.problem
    resolved = _resolved_cluster(preference.service, port, context, l4)
    if isinstance(resolved, Unresolved):
        return (
            f"Service {service.meta.namespace}/{service.meta.name} annotation "
            f"{PREFER_SERVICE}: {resolved.message}; serving the external name only"
        )
    preferred = resolved.cluster
    assert isinstance(preferred, EdsCluster)  # a pod-backed Service yields EDS
    key = preference.service.meta.namespace, preference.service.meta.name
    if context.upstream.backend_policies.failover_of(*key):
        # Its own name is its failover aggregate's: its pods are under its child's.
        preferred = _as_child(preferred)
        assert isinstance(preferred, EdsCluster)
    return preferred


def external_ip_verdicts(
    external_ips: tuple[str, ...], policy: ExternalNamePolicy
) -> tuple[tuple[str, ...], list[str]]:
    """(the externalIPs that may be used, in order and once each, canonical; why each other
    one may not)."""
    usable: list[str] = []
    refused: list[str] = []
    for index, text in enumerate(external_ips):
        try:
            address = str(ipaddress.ip_address(text.strip()))
        except ValueError:
            refused.append(f"[{index}] {text!r} is not an IP address")
            continue
        reason = policy.address_reason(address)
        if reason is not None:
            refused.append(f"[{index}] {address} is {reason}")
        elif address not in usable:
            usable.append(address)
    return tuple(usable), refused


def _declared_port(
    path: list[Service], port: int, l4: L4Protocol | None
) -> ServicePort | Unresolved:
    """The last Service's port numbered `port`, of protocol TCP (UDP for UDP clusters)."""
    service = path[-1]
    wanted = "UDP" if l4 == UDP else "TCP"
    for declared in service.ports:
        if declared.port == port and declared.protocol == wanted:
            return declared
    numbered = [p for p in service.ports if p.port == port]
    # Only the first Service's port is the backendRef's; later ones are an alias's.
    first_hop = len(path) == 1
    if numbered:
        carried = {None: "HTTP", UDP: "UDP"}.get(l4, "TCP")
        return Unresolved(
            "UnsupportedProtocol",
            f"{_describe(path)}: port {port} is {numbered[0].protocol}; {carried} needs {wanted}",
            port_at_fault=first_hop,
        )
    ports = sorted(p.port for p in service.ports)
    return Unresolved(
        "BackendNotFound",
        f"{_describe(path)} does not declare port {port} (it declares {ports})",
        port_at_fault=first_hop,
    )


def _external_name_step(path: list[Service], context: BuildContext) -> str | Service | Unresolved:
    """The outside host to resolve (normalised), the Service an in-cluster name aliases, or
    why neither."""
    service = path[-1]
    options = context.options
    hostname = normalise(service.external_name)
    reason = normalised_unsafe_reason(hostname)
    if reason is not None:
        return Unresolved("UnsafeExternalName", f"{_describe(path)}: {reason}")

    target = in_cluster_target(hostname, options.cluster_domain)
    if target is not None:
        namespace, name = target
        # The alias is a reference from this Service to one in the target's namespace.
        referrer = Referrer("", "Service", service.meta.namespace)
        aliased_ref = service_target(namespace, name)
        if not context.grants.permits(referrer, aliased_ref):
            return Unresolved(
                "RefNotPermitted",
                f"{_describe(path)}: externalName aliases Service {namespace}/{name}: "
                f"{not_permitted_message(referrer, aliased_ref)}",
            )
        aliased = context.services.get(target)
        if aliased is None:
            return Unresolved(
                "BackendNotFound",
                f"{_describe(path)}: externalName aliases Service {namespace}/{name}, "
                "which does not exist",
            )
        return aliased

    if is_cluster_local(hostname, options.cluster_domain):
        # Never let Envoy resolve cluster DNS itself: that would bypass namespace checks.
        return Unresolved(
            "UnsafeExternalName",
            f"{_describe(path)}: externalName {hostname!r} is inside the cluster domain but is "
            f"not a Service name (<service>.<namespace>.svc.{options.cluster_domain})",
        )
    return hostname


def _tls(
    service: Service,
    port: int,
    port_name: str,
    app_protocol: str,
    upstream: UpstreamInputs,
    l4: L4Protocol | None,
) -> UpstreamTls | TlsRefusal | None:
    """HTTP: the policy or dragoman's TLS defaults. TCP: the policy alone (the bytes are the
    client's own, perhaps TLS already). UDP: never; a policy on the port is refused."""
    tls = upstream_tls(
        service, port, port_name, app_protocol, upstream.tls_policies, automatic=l4 is None
    )
    if l4 == UDP and isinstance(tls, UpstreamTls):
        return TlsRefusal(
            "UnsupportedProtocol",
            f"port {port} is governed by a BackendTLSPolicy, but UDP datagrams cannot be "
            "sent over TLS",
        )
    return tls


def _describe(path: list[Service]) -> str:
    names = " -> ".join(f"{s.meta.namespace}/{s.meta.name}" for s in path)
    return f"Service {names}"
