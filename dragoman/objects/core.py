"""Core Kubernetes kinds: v1 Service and discovery.k8s.io/v1 EndpointSlice."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True, slots=True)
class ServicePort:
    port: int
    name: str = ""
    protocol: str = "TCP"
    # A number, a container port name, or None (the API server defaults it to `port`).
    target_port: int | str | None = None
    app_protocol: str = ""


@dataclass(frozen=True, slots=True)
class Service(KindObject):
    kind: ClassVar[str] = "Service"

    meta: ObjectMeta
    type: str = "ClusterIP"  # ClusterIP, NodePort, LoadBalancer or ExternalName
    ports: tuple[ServicePort, ...] = ()
    selector: Mapping[str, str] | None = None
    external_name: str = ""
    # spec.sessionAffinity: "None" or "ClientIP"; and sessionAffinityConfig.clientIP
    # .timeoutSeconds, None when absent.
    session_affinity: str = "None"
    session_affinity_timeout_s: int | None = None
    # spec.externalIPs, as written.
    external_ips: tuple[str, ...] = ()
    # status.loadBalancer.ingress: each entry's IP, else its hostname (a Gateway's addresses
    # may be taken from the Service in front of Envoy).
    load_balancer_ingress: tuple[str, ...] = ()

    @property
    def is_external_name(self) -> bool:
        return self.type == "ExternalName"

    @property
    def client_ip_affinity(self) -> bool:
        return self.session_affinity == "ClientIP"


@dataclass(frozen=True, slots=True)
class EndpointPort:
    port: int
    name: str = ""
    protocol: str = "TCP"
    app_protocol: str = ""


@dataclass(frozen=True, slots=True)
class Endpoint:
    addresses: tuple[str, ...]
    # conditions.ready; the API says an absent value means ready.
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    hostname: str = ""
    node_name: str = ""
    zone: str = ""


@dataclass(frozen=True, slots=True)
class EndpointSlice(KindObject):
    kind: ClassVar[str] = "EndpointSlice"

    meta: ObjectMeta
    address_type: str = "IPv4"  # IPv4, IPv6 or FQDN
    endpoints: tuple[Endpoint, ...] = ()
    ports: tuple[EndpointPort, ...] = ()

    @property
    def service_name(self) -> str:
        """The owning Service, from the `kubernetes.io/service-name` label ("" if none)."""
        return self.meta.labels.get(SERVICE_NAME_LABEL, "")
