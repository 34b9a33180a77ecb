"""A Service port to the cluster that serves it: EDS, a DNS host, or an ExternalName alias."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.externalname import (
    in_cluster_target,
    is_cluster_local,
    normalise,
    unsafe_reason,
)
from dragoman.dag.grants import (
    NO_GRANTS,
    ReferenceGrants,
    Referrer,
    not_permitted_message,
    service_target,
)
from dragoman.dag.model import H2C, HTTP1, Cluster, DnsCluster, EdsCluster
from dragoman.dag.options import BuildOptions
from dragoman.objects import Service, ServicePort
from dragoman.store import NamespacedName

# ExternalName aliases followed before giving up: enough for a rename or two, and ends loops.
MAX_ALIAS_HOPS = 3

# ServicePort appProtocol values that choose the upstream protocol (anything else: HTTP/1.1).
APP_PROTOCOLS = {"kubernetes.io/h2c": H2C}


@dataclass(frozen=True, slots=True)
class Unresolved:
    """Why a Service port yields no cluster."""

    reason: str
    message: str
    # True when the backendRef's own port is at fault (the port of the Service it names).
    port_at_fault: bool = False


def cluster_name(service: Service, port: int, protocol: str = HTTP1) -> str:
    """`ns/svc/port`, with `/<protocol>` appended for any protocol but HTTP/1.1."""
    base = f"{service.meta.namespace}/{service.meta.name}/{port}"
    return base if protocol == HTTP1 else f"{base}/{protocol}"


def service_cluster(
    service: Service,
    port: int,
    services: Mapping[NamespacedName, Service],
    options: BuildOptions,
    grants: ReferenceGrants = NO_GRANTS,
) -> Cluster | Unresolved:
    """The cluster for `port` of `service`, following in-cluster ExternalName aliases
    (into another namespace only where a ReferenceGrant there allows it)."""
    path = [service]
    protocol = HTTP1
    while True:
        current = path[-1]
        # A bare CNAME (an ExternalName that declares no ports) takes the backendRef's port.
        if current.ports or not current.is_external_name:
            declared = _declared_port(path, port)
            if isinstance(declared, Unresolved):
                return declared
            protocol = APP_PROTOCOLS.get(declared.app_protocol, HTTP1)
            if not current.is_external_name:
                return EdsCluster(
                    name=cluster_name(current, port, protocol),
                    service=current.key,
                    port=port,
                    target_port=port if declared.target_port is None else declared.target_port,
                    port_name=declared.name,
                    protocol=protocol,
                )
        step = _external_name_step(path, port, services, options, grants)
        if isinstance(step, DnsCluster):
            return with_protocol(step, protocol)
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


def with_protocol(cluster: Cluster, protocol: str) -> Cluster:
    """The same Service port spoken in `protocol`: a cluster of its own, named for it."""
    if cluster.protocol == protocol:
        return cluster
    base = cluster.name.removesuffix(f"/{cluster.protocol}")
    name = base if protocol == HTTP1 else f"{base}/{protocol}"
    return dataclasses.replace(cluster, name=name, protocol=protocol)


def _declared_port(path: list[Service], port: int) -> ServicePort | Unresolved:
    """The last Service's TCP port numbered `port`."""
    service = path[-1]
    numbered = [p for p in service.ports if p.port == port]
    tcp = next((p for p in numbered if p.protocol == "TCP"), None)
    if tcp is not None:
        return tcp
    # Only the first Service's port is the backendRef's; later ones are an alias's.
    first_hop = len(path) == 1
    if numbered:
        return Unresolved(
            "UnsupportedProtocol",
            f"{_describe(path)}: port {port} is {numbered[0].protocol}; HTTP needs TCP",
            port_at_fault=first_hop,
        )
    declared = sorted(p.port for p in service.ports)
    return Unresolved(
        "BackendNotFound",
        f"{_describe(path)} does not declare port {port} (it declares {declared})",
        port_at_fault=first_hop,
    )


def _external_name_step(
    path: list[Service],
    port: int,
    services: Mapping[NamespacedName, Service],
    options: BuildOptions,
    grants: ReferenceGrants,
) -> DnsCluster | Service | Unresolved:
    """A DNS cluster for an outside host, the Service an in-cluster name aliases, or why not."""
    service = path[-1]
    reason = unsafe_reason(service.external_name)
    if reason is not None:
        return Unresolved("UnsafeExternalName", f"{_describe(path)}: {reason}")

    target = in_cluster_target(service.external_name, options.cluster_domain)
    if target is not None:
        namespace, name = target
        # The alias is a reference from this Service to one in the target's namespace.
        referrer = Referrer("", "Service", service.meta.namespace)
        aliased_ref = service_target(namespace, name)
        if not grants.permits(referrer, aliased_ref):
            return Unresolved(
                "RefNotPermitted",
                f"{_describe(path)}: externalName aliases Service {namespace}/{name}: "
                f"{not_permitted_message(referrer, aliased_ref)}",
            )
        aliased = services.get(target)
        if aliased is None:
            return Unresolved(
                "BackendNotFound",
                f"{_describe(path)}: externalName aliases Service {namespace}/{name}, "
                "which does not exist",
            )
        return aliased

    hostname = normalise(service.external_name)
    if is_cluster_local(hostname, options.cluster_domain):
        # Never let Envoy resolve cluster DNS itself: that would bypass namespace checks.
        return Unresolved(
            "UnsafeExternalName",
            f"{_describe(path)}: externalName {hostname!r} is inside the cluster domain but is "
            f"not a Service name (<service>.<namespace>.svc.{options.cluster_domain})",
        )
    return DnsCluster(
        name=cluster_name(service, port), service=service.key, hostname=hostname, port=port
    )


def _describe(path: list[Service]) -> str:
    names = " -> ".join(f"{s.meta.namespace}/{s.meta.name}" for s in path)
    return f"Service {names}"
