"""The typed objects a DAG build reads, by kind and `namespace/name`: one field per row of
the table of kinds (`dragoman.objects.kinds`)."""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from dragoman.objects import (
    BackendPolicy,
    BackendTLSPolicy,
    ConfigMap,
    CredentialInjector,
    EndpointSlice,
    Gateway,
    GatewayClass,
    GRPCRoute,
    HTTPRoute,
    KubeObject,
    ListenerSet,
    Namespace,
    ReferenceGrant,
    Secret,
    Service,
    TCPRoute,
    TLSRoute,
    UDPRoute,
    XBackend,
)
from dragoman.objects.kinds import KINDS
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy

NamespacedName = tuple[str, str]


@dataclass(frozen=True, slots=True)
class MadeFrom:
    """What with_object made a store from: the store, weakly (a chain of stores must not keep
    old objects alive), and the field and the key it changed."""

    store: weakref.ref[Store]
    store_field: str
    key: NamespacedName


@dataclass(frozen=True, slots=True, weakref_slot=True)
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
    tcp_routes: Mapping[NamespacedName, TCPRoute] = field(default_factory=dict)
    tls_routes: Mapping[NamespacedName, TLSRoute] = field(default_factory=dict)
    udp_routes: Mapping[NamespacedName, UDPRoute] = field(default_factory=dict)
    listener_sets: Mapping[NamespacedName, ListenerSet] = field(default_factory=dict)
    xbackends: Mapping[NamespacedName, XBackend] = field(default_factory=dict)
    backend_policies: Mapping[NamespacedName, BackendPolicy] = field(default_factory=dict)
    xbackend_traffic_policies: Mapping[NamespacedName, XBackendTrafficPolicy] = field(
        default_factory=dict
    )
    credential_injectors: Mapping[NamespacedName, CredentialInjector] = field(default_factory=dict)
    # Set by with_object alone: not an argument, so a store made any other way (including
    # dataclasses.replace of a store with_object made) claims no provenance.
    made_from: MadeFrom | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_objects(cls, objects: Iterable[KubeObject]) -> Store:
        """Index objects by kind; a later object with the same key replaces an earlier one."""
        by_field: dict[str, dict[NamespacedName, KubeObject]] = {
            name: {} for name in _FIELD_OF_KIND.values()
        }
        for obj in objects:
            by_field[_FIELD_OF_KIND[type(obj)]][(obj.meta.namespace, obj.meta.name)] = obj
        # One mapping per field, each of the kind its field declares (by the table of kinds).
        return cls(**by_field)  # type: ignore[arg-type]

    def with_object(self, kind: type, key: NamespacedName, obj: KubeObject | None) -> Store:
        """This store with one object of `kind` (a type) put at `key`, or removed (None).
        Copies one kind's mapping, not every object."""
        name = _FIELD_OF_KIND[kind]
        objects = dict(getattr(self, name))
        if obj is None:
            objects.pop(key, None)
        else:
            objects[key] = obj
        changed: dict[str, Any] = {name: objects}  # one of the fields OBJECT_FIELDS names
        made = dataclasses.replace(self, **changed)
        object.__setattr__(made, "made_from", MadeFrom(weakref.ref(self), name, key))
        return made

    def keys_changed_since(
        self, earlier: Store, limit: int = 256
    ) -> dict[str, set[NamespacedName]] | None:
        """The fields and keys with_object put or removed on the way from `earlier` to this
        store (some may hold an equal object again), or None when this store was not made
        from `earlier` that way (or too many steps ago): compare the fields then."""
        found: dict[str, set[NamespacedName]] = {}
        store: Store | None = self
        for _ in range(limit):
            if store is earlier:
                return found
            made_from = store.made_from if store is not None else None
            if made_from is None:
                return None
            found.setdefault(made_from.store_field, set()).add(made_from.key)
            store = made_from.store()
        return None


# The Store field that holds each kind, from the table of kinds.
_FIELD_OF_KIND: dict[type, str] = {kind.type: kind.store_field for kind in KINDS}
# The fields that hold objects: every field but the provenance.
OBJECT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Store) if f.init)
_missing = set(_FIELD_OF_KIND.values()) ^ set(OBJECT_FIELDS)
assert not _missing, f"Store fields and dragoman.objects.kinds rows differ: {sorted(_missing)}"
