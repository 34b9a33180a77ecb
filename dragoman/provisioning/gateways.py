"""Plans for every Gateway dragoman accepted: the build's verdict (its status) decides which
Gateways and listeners get Envoys; the plans say what they get."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dragoman.dag.model import Dag
from dragoman.objects import Gateway, GatewayListener, ObjectKey
from dragoman.provisioning.plan import DEFAULT_PROVISION, GatewayPlan, OwnerRef, plan_gateway
from dragoman.provisioning.resolve import ParametersByKey, resolve_settings
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.store import Store


def plan_gateways(
    store: Store,
    dag: Dag,
    parameters: ParametersByKey,
    provision: ProvisionSettings = DEFAULT_PROVISION,
    existing: Mapping[ObjectKey, tuple[OwnerRef, ...]] | None = None,
) -> list[GatewayPlan]:
    """One plan per accepted Gateway, in namespace/name order: `store` as read (its
    parametersRefs in place), `dag` the build of it with them claimed."""
    plans = []
    for key in sorted(store.gateways):
        gateway = store.gateways[key]
        status = dag.statuses.get(gateway.key)
        if status is None or not _is_true(status.status.get("conditions", ()), "Accepted"):
            continue  # not dragoman's, or refused: its status says why
        gateway_class = store.gateway_classes.get(("", gateway.gateway_class_name))
        settings, problems = resolve_settings(gateway, gateway_class, parameters)
        listeners = accepted_listeners(gateway, status.status.get("listeners", ()))
        listeners += attached_listeners(store, dag, gateway)
        plans.append(
            plan_gateway(
                gateway, listeners, settings, provision, existing=existing, problems=problems
            )
        )
    return plans


def accepted_listeners(gateway: Gateway, listener_statuses: Any) -> tuple[GatewayListener, ...]:
    """The Gateway's listeners its status says are accepted."""
    accepted = {
        entry["name"]
        for entry in listener_statuses
        if _is_true(entry.get("conditions", ()), "Accepted")
    }
    return tuple(listener for listener in gateway.listeners if listener.name in accepted)


def attached_listeners(store: Store, dag: Dag, gateway: Gateway) -> tuple[GatewayListener, ...]:
    """The accepted listeners of the ListenerSets accepted on `gateway`: its Envoys serve
    them too, so its Service exposes their ports."""
    found: list[GatewayListener] = []
    for key in sorted(store.listener_sets):
        listener_set = store.listener_sets[key]
        parent = listener_set.parent_ref
        namespace = parent.namespace or listener_set.meta.namespace
        if (parent.kind, namespace, parent.name) != (
            "Gateway",
            gateway.meta.namespace,
            gateway.meta.name,
        ):
            continue
        status = dag.statuses.get(listener_set.key)
        if status is None or not _is_true(status.status.get("conditions", ()), "Accepted"):
            continue
        accepted = {
            entry["name"]
            for entry in status.status.get("listeners", ())
            if _is_true(entry.get("conditions", ()), "Accepted")
        }
        found += [listener for listener in listener_set.listeners if listener.name in accepted]
    return tuple(found)


def _is_true(conditions: Any, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)
