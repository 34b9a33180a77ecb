"""discovery.k8s.io/v1 EndpointSlice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from dragoman.objects.meta import KindObject, ObjectMeta
from dragoman.objects.service import PortProtocol

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
AddressType = Literal["IPv4", "IPv6", "FQDN"]
ADDRESS_TYPES: tuple[AddressType, ...] = get_args(AddressType)


@dataclass(frozen=True, slots=True)
class EndpointPort:
    port: int
    name: str = ""
    protocol: PortProtocol = "TCP"
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
    address_type: AddressType = "IPv4"
    endpoints: tuple[Endpoint, ...] = ()
    ports: tuple[EndpointPort, ...] = ()

    @property
    def service_name(self) -> str:
        """The owning Service, from the `kubernetes.io/service-name` label ("" if none)."""
        return self.meta.labels.get(SERVICE_NAME_LABEL, "")
