"""Settings that shape a DAG build but come from the operator, not from Kubernetes objects."""

from __future__ import annotations

from dataclasses import dataclass

from dragoman.dag.external_name_policy import NO_POLICY, ExternalNamePolicy, Network
from dragoman.dag.model import DEFAULT_LOOKUP_FAMILY

# The GatewayClass spec.controllerName that names dragoman, unless configured otherwise.
DEFAULT_CONTROLLER_NAME = "dragoman.dev/gateway-controller"


@dataclass(frozen=True, slots=True)
class BuildOptions:
    # The DNS suffix of in-cluster names, `<svc>.<ns>.svc.<cluster_domain>`.
    cluster_domain: str = "cluster.local"
    # Gateways are served when their GatewayClass names this controller.
    controller_name: str = DEFAULT_CONTROLLER_NAME
    # False (manifest directories, which often omit the GatewayClass): a Gateway whose class
    # object is absent is served, and its status says so. True (Kubernetes): it is not.
    require_gateway_class: bool = False
    # Which external domains (and, with dns_check, resolved addresses) ExternalNames may reach.
    external_names: ExternalNamePolicy = NO_POLICY
    # True: an external name is served only once the DNS check resolved it and every address
    # passed `external_names` (the results are an input of the build).
    dns_check: bool = False
    # EndpointSlice addresses inside the always-denied ranges (loopback, link-local, ...)
    # that may still be endpoints: a lab whose pods are processes on 127.0.0.x.
    endpoint_networks: tuple[Network, ...] = ()
    # The lookup family for Services that name none (the server's dnsDefaults): which of
    # the DNS check's addresses are served, as Envoy would pick them resolving the name.
    dns_lookup_family: str = DEFAULT_LOOKUP_FAMILY
    # Where clients reach the Gateways (IP addresses or hostnames), written to every served
    # Gateway's status.addresses: the operator's list, then the load balancer addresses of
    # `address_service` (namespace, name), the Service in front of Envoy, when one is named.
    gateway_addresses: tuple[str, ...] = ()
    address_service: tuple[str, str] | None = None
