"""What a DAG build produces. Plain values: no protobuf, no I/O.

The envoy package translates these into xDS resources; tests compare them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.objects import ObjectKey

# Node group served to an Envoy whose `node.cluster` names no Gateway: every Gateway.
ALL_GATEWAYS = ""


@dataclass(frozen=True, slots=True)
class EdsCluster:
    """A pod-backed Service port; endpoints arrive separately through EDS."""

    name: str
    service: ObjectKey
    port: int  # the Service port
    # The ServicePort's targetPort (number or name) and name, for matching EndpointSlice ports.
    target_port: int | str
    port_name: str = ""


@dataclass(frozen=True, slots=True)
class DnsCluster:
    """An ExternalName Service port: Envoy resolves `hostname` itself (STRICT_DNS)."""

    name: str
    service: ObjectKey
    hostname: str
    port: int


Cluster = EdsCluster | DnsCluster


@dataclass(frozen=True, slots=True)
class LbEndpoint:
    address: str
    port: int


@dataclass(frozen=True, slots=True)
class Locality:
    zone: str
    endpoints: tuple[LbEndpoint, ...]
    weight: int = 1  # every locality carries a weight (gRPC clients skip those without)


@dataclass(frozen=True, slots=True)
class LoadAssignment:
    cluster: str
    localities: tuple[Locality, ...] = ()


@dataclass(frozen=True, slots=True)
class Backend:
    """One weighted backend of a route. `cluster` None: the reference is invalid (answers 500)."""

    cluster: str | None
    weight: int


@dataclass(frozen=True, slots=True)
class RouteMatch:
    path_type: str  # "Exact" or "PathPrefix"
    path: str


@dataclass(frozen=True, slots=True)
class Forward:
    backends: tuple[Backend, ...]
    # Rewrite Host to the upstream host's DNS name (set when any backend is external).
    auto_host_rewrite: bool = False


@dataclass(frozen=True, slots=True)
class DirectResponse:
    status: int
    body: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    match: RouteMatch
    action: Forward | DirectResponse
    source: ObjectKey  # the HTTPRoute this came from
    rule_index: int = 0


@dataclass(frozen=True, slots=True)
class VirtualHost:
    name: str
    domains: tuple[str, ...]
    routes: tuple[Route, ...]  # in match precedence order


@dataclass(frozen=True, slots=True)
class RouteTable:
    name: str
    virtual_hosts: tuple[VirtualHost, ...]


@dataclass(frozen=True, slots=True)
class HttpListener:
    name: str
    port: int
    route_table: str  # RouteTable.name


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """What one group of Envoys receives: a Gateway's listeners, or every Gateway's."""

    name: str  # "<namespace>/<gateway>" or ALL_GATEWAYS
    listeners: tuple[HttpListener, ...]
    route_tables: tuple[RouteTable, ...]
    clusters: tuple[str, ...]  # names of the clusters its routes reference, sorted


@dataclass(frozen=True, slots=True)
class Problem:
    """Something wrong with one object, for status and logs."""

    object: ObjectKey
    field: str  # path inside the object, e.g. "spec.rules[0].backendRefs[1]"
    reason: str  # a Gateway API-style reason, e.g. "BackendNotFound"
    message: str

    def __str__(self) -> str:
        return f"{self.object} {self.field}: {self.message} ({self.reason})"


@dataclass(frozen=True, slots=True)
class ObjectStatus:
    """The `status` stanza dragoman computes for one object, as the API server stores it.

    Conditions carry no `lastTransitionTime`: the core has no clock. Whoever writes the
    status (the Kubernetes status writer, `dragoman status`) stamps it, keeping the time of
    a condition whose status did not change. For route kinds, `status["parents"]` holds only
    the entries whose `controllerName` is dragoman's; a writer must keep other controllers'.
    """

    key: ObjectKey
    api_version: str  # e.g. "gateway.networking.k8s.io/v1"
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Dag:
    groups: Mapping[str, NodeGroup] = field(default_factory=dict)
    clusters: Mapping[str, Cluster] = field(default_factory=dict)
    load_assignments: Mapping[str, LoadAssignment] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    statuses: Mapping[ObjectKey, ObjectStatus] = field(default_factory=dict)
