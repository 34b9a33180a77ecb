"""HTTPRoute parentRefs to the Gateway listeners (ports and domains) that accept the route."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.hostnames import intersect
from dragoman.dag.listeners import is_served
from dragoman.dag.model import Problem
from dragoman.objects import Gateway, GatewayListener, HTTPRoute, ObjectKey, ParentRef
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.store import NamespacedName


@dataclass(frozen=True, slots=True)
class Attachment:
    """A route accepted by one listener: served on the listener's port under these domains."""

    gateway: ObjectKey
    port: int
    domains: tuple[str, ...]


def attach(
    route: HTTPRoute, gateways: Mapping[NamespacedName, Gateway]
) -> tuple[list[Attachment], list[Problem]]:
    attachments: list[Attachment] = []
    problems: list[Problem] = []
    for index, parent_ref in enumerate(route.parent_refs):
        field = f"spec.parentRefs[{index}]"
        accepted = _attach_one(route, parent_ref, field, gateways)
        if isinstance(accepted, Problem):
            problems.append(accepted)
        else:
            attachments.extend(accepted)
    return attachments, problems


def _attach_one(
    route: HTTPRoute,
    parent_ref: ParentRef,
    field: str,
    gateways: Mapping[NamespacedName, Gateway],
) -> list[Attachment] | Problem:
    def problem(reason: str, message: str, at: str = field) -> Problem:
        return Problem(object=route.key, field=at, reason=reason, message=message)

    if parent_ref.group != GATEWAY_GROUP:
        return problem(
            "UnsupportedValue",
            f"parentRef group {parent_ref.group!r} is not supported; use {GATEWAY_GROUP!r}",
            f"{field}.group",
        )
    if parent_ref.kind != "Gateway":
        return problem(
            "UnsupportedValue",
            f"parentRef kind {parent_ref.kind!r} is not supported; use 'Gateway'",
            f"{field}.kind",
        )
    namespace = parent_ref.namespace or route.meta.namespace
    gateway = gateways.get((namespace, parent_ref.name))
    if gateway is None:
        return problem("NoMatchingParent", f"Gateway {namespace}/{parent_ref.name} not found")

    selected = _selected_listeners(gateway, parent_ref)
    if isinstance(selected, tuple):
        at, message = selected
        return problem("NoMatchingParent", message, f"{field}{at}")

    allowed = [
        listener
        for listener in selected
        if _allows_namespace(listener, route.meta.namespace, gateway.meta.namespace)
    ]
    if not allowed:
        return problem(
            "NotAllowedByListeners",
            f"no listener of Gateway {namespace}/{gateway.meta.name} that this parentRef "
            f"selects allows routes from namespace {route.meta.namespace!r}",
        )

    attachments = [
        Attachment(gateway=gateway.key, port=listener.port, domains=domains)
        for listener in allowed
        if (domains := intersect(listener.hostname, route.hostnames))
    ]
    if not attachments:
        listener_hostnames = sorted({str(listener.hostname) for listener in allowed})
        return problem(
            "NoMatchingListenerHostname",
            f"{field}: no route hostname intersects the listener hostnames "
            f"{listener_hostnames} of Gateway {namespace}/{gateway.meta.name}",
            "spec.hostnames",
        )
    return attachments


def _selected_listeners(
    gateway: Gateway, parent_ref: ParentRef
) -> list[GatewayListener] | tuple[str, str]:
    """The served listeners a parentRef selects, or (field suffix, message) when there are none."""
    gateway_name = f"{gateway.meta.namespace}/{gateway.meta.name}"
    section, port = parent_ref.section_name, parent_ref.port
    selected = list(gateway.listeners)
    if section is not None:
        selected = [listener for listener in selected if listener.name == section]
        if not selected:
            return ".sectionName", f"Gateway {gateway_name} has no listener named {section!r}"
    if port is not None:
        selected = [listener for listener in selected if listener.port == port]
        if not selected:
            named = f" named {section!r}" if section is not None else ""
            return ".port", f"Gateway {gateway_name} has no listener{named} on port {port}"
    served = [listener for listener in selected if is_served(listener)]
    if not served:
        if not selected:
            return "", f"Gateway {gateway_name} has no listeners"
        protocols = sorted({listener.protocol for listener in selected})
        return "", (
            f"the listeners of Gateway {gateway_name} that this parentRef selects use "
            f"unsupported protocols {protocols}"
        )
    return served


def _allows_namespace(
    listener: GatewayListener, route_namespace: str, gateway_namespace: str
) -> bool:
    if listener.allowed_namespaces == "All":
        return True
    if listener.allowed_namespaces == "Same":
        return route_namespace == gateway_namespace
    return False  # Selector is not supported yet: allow nothing rather than everything
