"""The typed objects a DAG build reads, by kind and `namespace/name`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dragoman.objects import (
    BackendTLSPolicy,
    ConfigMap,
    EndpointSlice,
    Gateway,
    GatewayClass,
    GRPCRoute,
    HTTPRoute,
    KubeObject,
    Namespace,
    ReferenceGrant,
    Secret,
    Service,
)

NamespacedName = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Store:
    """An immutable view of every object a source currently holds."""

    services: Mapping[NamespacedName, Service] = field(default_factory=dict)
    endpoint_slices: Mapping[NamespacedName, EndpointSlice] = field(default_factory=dict)
    gateways: Mapping[NamespacedName, Gateway] = field(default_factory=dict)
    http_routes: Mapping[NamespacedName, HTTPRoute] = field(default_factory=dict)
    grpc_routes: Mapping[NamespacedName, GRPCRoute] = field(default_factory=dict)
    # Cluster-scoped kinds are keyed ("", name).
    gateway_classes: Mapping[NamespacedName, GatewayClass] = field(default_factory=dict)
    reference_grants: Mapping[NamespacedName, ReferenceGrant] = field(default_factory=dict)
    namespaces: Mapping[NamespacedName, Namespace] = field(default_factory=dict)
    secrets: Mapping[NamespacedName, Secret] = field(default_factory=dict)
    config_maps: Mapping[NamespacedName, ConfigMap] = field(default_factory=dict)
    backend_tls_policies: Mapping[NamespacedName, BackendTLSPolicy] = field(default_factory=dict)

    @classmethod
    def from_objects(cls, objects: Iterable[KubeObject]) -> Store:
        """Index objects by kind; a later object with the same key replaces an earlier one."""
        by_type: dict[type, dict[NamespacedName, KubeObject]] = {
            Service: {},
            EndpointSlice: {},
            Gateway: {},
            HTTPRoute: {},
            GRPCRoute: {},
            GatewayClass: {},
            ReferenceGrant: {},
            Namespace: {},
            Secret: {},
            ConfigMap: {},
            BackendTLSPolicy: {},
        }
        for obj in objects:
            by_type[type(obj)][(obj.meta.namespace, obj.meta.name)] = obj
        return cls(
            services=by_type[Service],  # type: ignore[arg-type]
            endpoint_slices=by_type[EndpointSlice],  # type: ignore[arg-type]
            gateways=by_type[Gateway],  # type: ignore[arg-type]
            http_routes=by_type[HTTPRoute],  # type: ignore[arg-type]
            grpc_routes=by_type[GRPCRoute],  # type: ignore[arg-type]
            gateway_classes=by_type[GatewayClass],  # type: ignore[arg-type]
            reference_grants=by_type[ReferenceGrant],  # type: ignore[arg-type]
            namespaces=by_type[Namespace],  # type: ignore[arg-type]
            secrets=by_type[Secret],  # type: ignore[arg-type]
            config_maps=by_type[ConfigMap],  # type: ignore[arg-type]
            backend_tls_policies=by_type[BackendTLSPolicy],  # type: ignore[arg-type]
        )

    def slices_of(self, namespace: str, service_name: str) -> list[EndpointSlice]:
        """EndpointSlices labelled as belonging to one Service, in name order."""
        return sorted(
            (
                s
                for (ns, _), s in self.endpoint_slices.items()
                if ns == namespace and s.service_name == service_name
            ),
            key=lambda s: s.meta.name,
        )

    def differs_only_in_endpoints(self, other: Store) -> bool:
        """True when a change between two stores can take the EDS fast path."""
        return (
            self.services == other.services
            and self.gateways == other.gateways
            and self.http_routes == other.http_routes
            and self.grpc_routes == other.grpc_routes
            and self.gateway_classes == other.gateway_classes
            and self.reference_grants == other.reference_grants
            and self.namespaces == other.namespaces
            and self.secrets == other.secrets
            and self.config_maps == other.config_maps
            and self.backend_tls_policies == other.backend_tls_policies
        )
