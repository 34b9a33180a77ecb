"""v1 Service."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dragoman.objects.meta import KindObject, ObjectMeta

ServiceType = Literal["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]
SERVICE_TYPES: tuple[ServiceType, ...] = get_args(ServiceType)
SessionAffinity = Literal["None", "ClientIP"]
SESSION_AFFINITIES: tuple[SessionAffinity, ...] = get_args(SessionAffinity)
# A Service's or an EndpointSlice's port.
PortProtocol = Literal["TCP", "UDP", "SCTP"]
PORT_PROTOCOLS: tuple[PortProtocol, ...] = get_args(PortProtocol)


@dataclass(frozen=True, slots=True)
class ServicePort:
    port: int
    name: str = ""
    protocol: PortProtocol = "TCP"
    # A number, a container port name, or None (the API server defaults it to `port`).
    target_port: int | str | None = None
    app_protocol: str = ""


@dataclass(frozen=True, slots=True)
class Service(KindObject):
    kind: ClassVar[str] = "Service"

    meta: ObjectMeta
    type: ServiceType = "ClusterIP"
    ports: tuple[ServicePort, ...] = ()
    selector: Mapping[str, str] | None = None
    external_name: str = ""
    # spec.sessionAffinity: "None" or "ClientIP"; and sessionAffinityConfig.clientIP
    # .timeoutSeconds, None when absent.
    session_affinity: SessionAffinity = "None"
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
