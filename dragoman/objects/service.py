"""v1 Service."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from dragoman.objects.meta import KindObject, ObjectMeta


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
