"""Route parentRefs to the Gateway listeners that accept the route, one outcome per parentRef.

An outcome carries where the route attached (listener, port, domains) or the Gateway API
reason it did not, which both the served configuration and the route's status use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from dragoman.dag.frontends.hostnames import intersect
from dragoman.dag.frontends.listeners import Frontends, GatewayVerdict, ListenerVerdict
from dragoman.dag.model import Problem
from dragoman.objects import Namespace, ObjectKey, ObjectMeta, ParentRef, RouteGroupKind
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.objects.namespace import NAMESPACE_NAME_LABEL
from dragoman.store import NamespacedName


class Attachable(Protocol):
    """What attaching needs of a route kind (HTTPRoute, GRPCRoute)."""

    @property
    def kind(self) -> str: ...
    @property
    def key(self) -> ObjectKey: ...
    @property
    def meta(self) -> ObjectMeta: ...
    @property
    def parent_refs(self) -> tuple[ParentRef, ...]: ...
    @property
    def hostnames(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Attachment:
    """A route accepted by one listener: served on the listener's port under these domains."""

    gateway: ObjectKey
    port: int
    domains: tuple[str, ...]
    listener: str = ""  # the Gateway listener's name
    # False when the listener cannot be served (a conflict, no usable certificate): the
    # route still counts as attached there, as the Gateway API asks, but gets no traffic.
    programmed: bool = True


@dataclass(frozen=True, slots=True)
class ParentOutcome:
    """What became of one parentRef of a route."""

    index: int
    parent_ref: ParentRef
    attachments: tuple[Attachment, ...] = ()
    problem: Problem | None = None  # why it was not accepted; None when accepted
    # False for a Gateway of another controller: dragoman says nothing about that parent.
    ours: bool = True

    @property
    def accepted(self) -> bool:
        return self.problem is None and bool(self.attachments)


def attach(
    route: Attachable,
    frontends: Frontends,
    namespaces: Mapping[NamespacedName, Namespace],
    gateway_exists: Mapping[NamespacedName, object],
) -> list[ParentOutcome]:
    """One outcome per parentRef. `gateway_exists` holds every Gateway, dragoman's or not."""
    return [
        _attach_one(route, index, parent_ref, frontends, namespaces, gateway_exists)
        for index, parent_ref in enumerate(route.parent_refs)
    ]


def namespace_labels(
    namespaces: Mapping[NamespacedName, Namespace], name: str
) -> Mapping[str, str]:
    """A namespace's labels; the API server's name label even when the object is not known."""
    namespace = namespaces.get(("", name))
    return namespace.labels if namespace is not None else {NAMESPACE_NAME_LABEL: name}


def _attach_one(
    route: Attachable,
    index: int,
    parent_ref: ParentRef,
    frontends: Frontends,
    namespaces: Mapping[NamespacedName, Namespace],
    gateway_exists: Mapping[NamespacedName, object],
) -> ParentOutcome:
    # Field paths and parent names are made only for a message: ten thousand routes attach.
    def refused(
        reason: str, message: str, at: str = "", missing: ObjectKey | None = None
    ) -> ParentOutcome:
        field = f"spec.parentRefs[{index}]{at}"
        problem = Problem(route.key, field, reason, message, missing)
        return ParentOutcome(index, parent_ref, problem=problem)

    if parent_ref.group != GATEWAY_GROUP:
        return refused(
            "UnsupportedValue",
            f"parentRef group {parent_ref.group!r} is not supported; use {GATEWAY_GROUP!r}",
            ".group",
        )
    if parent_ref.kind not in ("Gateway", "ListenerSet"):
        return refused(
            "UnsupportedValue",
            f"parentRef kind {parent_ref.kind!r} is not supported; use 'Gateway' or 'ListenerSet'",
            ".kind",
        )
    namespace = parent_ref.namespace or route.meta.namespace
    kind = parent_ref.kind
    if kind == "ListenerSet":
        verdict = frontends.listener_sets.get((namespace, parent_ref.name))
        if verdict is None:
            # A ListenerSet of another controller's Gateway is not dragoman's to judge.
            return ParentOutcome(index, parent_ref, ours=False)
    else:
        verdict = frontends.gateways.get((namespace, parent_ref.name))
    if verdict is None:
        if (namespace, parent_ref.name) in gateway_exists:
            return ParentOutcome(index, parent_ref, ours=False)
        message = f"Gateway {namespace}/{parent_ref.name} not found"
        missing = refused(
            "NoMatchingParent", message, "", ObjectKey(kind, namespace, parent_ref.name)
        )
        return replace(missing, ours=frontends.owns_missing_gateways)
    if verdict.rejection is not None:
        return refused(
            "NoMatchingParent",
            f"{kind} {namespace}/{parent_ref.name} is not accepted: {verdict.rejection.message}",
        )

    route_kind = _ROUTE_GROUP_KINDS.get(route.kind) or RouteGroupKind(route.kind)
    selected: Sequence[ListenerVerdict]
    if parent_ref.section_name is None and parent_ref.port is None and verdict.listeners:
        selected = verdict.listeners
        admitting: Sequence[ListenerVerdict] = verdict.admitting(route_kind)  # indexed
    else:
        found = _selected_listeners(verdict, parent_ref)
        if isinstance(found, tuple):
            at, message = found
            return refused("NoMatchingParent", message, at)
        selected = found
        admitting = [v for v in selected if v.attachable and route_kind in v.supported_kinds]
    if not admitting:
        return refused(
            "NotAllowedByListeners",
            _kind_refusal(route.kind, f"{kind} {namespace}/{parent_ref.name}", selected),
        )
    route_namespace = route.meta.namespace
    allowed = [v for v in admitting if _allows_namespace(v, route_namespace, namespaces)]
    if not allowed:
        return refused(
            "NotAllowedByListeners",
            f"no listener of {kind} {namespace}/{parent_ref.name} that this parentRef selects "
            f"allows {route.kind}s from namespace {route_namespace!r} "
            f"({_allowances(admitting)})",
        )
    return _attached(route, index, parent_ref, allowed, f"{kind} {namespace}/{parent_ref.name}")


def _attached(
    route: Attachable,
    index: int,
    parent_ref: ParentRef,
    allowed: Sequence[ListenerVerdict],
    parent: str,
) -> ParentOutcome:
    """The parentRef attached to the `allowed` listeners of `parent` whose hostnames
    intersect the route's, or why none."""
    attachments = tuple(
        Attachment(
            gateway=v.gateway,  # the key of the parent's Gateway (or ListenerSet)
            port=v.listener.port,
            domains=domains,
            listener=v.name,
            programmed=v.programmed,
        )
        for v in allowed
        if (domains := intersect(v.listener.hostname, route.hostnames))
    )
    if not attachments:
        listener_hostnames = sorted({str(v.listener.hostname) for v in allowed})
        problem = Problem(
            object=route.key,
            field="spec.hostnames",
            reason="NoMatchingListenerHostname",
            message=f"spec.parentRefs[{index}]: no route hostname intersects the listener "
            f"hostnames {listener_hostnames} of {parent}",
        )
        return ParentOutcome(index, parent_ref, problem=problem)
    return ParentOutcome(index, parent_ref, attachments=attachments)


# The route kinds that attach, made once (looked up for every route attaching).
_ROUTE_GROUP_KINDS = {
    kind: RouteGroupKind(kind)
    for kind in ("HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute")
}


def _selected_listeners(
    verdict: GatewayVerdict, parent_ref: ParentRef
) -> list[ListenerVerdict] | tuple[str, str]:
    """The listeners a parentRef names, or (field suffix, message) when it names none."""
    gateway = verdict.gateway

    def gateway_name() -> str:  # only for a message: made once per route otherwise
        return f"{gateway.kind} {gateway.meta.namespace}/{gateway.meta.name}"

    section, port = parent_ref.section_name, parent_ref.port
    selected = list(verdict.listeners)
    if section is not None:
        found = verdict.listener(section)
        selected = [found] if found is not None else []
        if not selected:
            return ".sectionName", f"{gateway_name()} has no listener named {section!r}"
    if port is not None:
        selected = [v for v in selected if v.listener.port == port]
        if not selected:
            named = f" named {section!r}" if section is not None else ""
            return ".port", f"{gateway_name()} has no listener{named} on port {port}"
    if not selected:
        return "", f"{gateway_name()} has no listeners"
    return selected


def _kind_refusal(kind: str, gateway_name: str, selected: Sequence[ListenerVerdict]) -> str:
    described = ", ".join(
        f"{v.name!r} ({v.listener.protocol}: "
        f"{', '.join(k.kind for k in v.supported_kinds) if v.attachable else 'no route kinds'})"
        for v in selected
    )
    return f"no listener of {gateway_name} that this parentRef selects admits {kind}s: {described}"


def _allows_namespace(
    verdict: ListenerVerdict,
    route_namespace: str,
    namespaces: Mapping[NamespacedName, Namespace],
) -> bool:
    listener = verdict.listener
    if listener.allowed_namespaces == "All":
        return True
    if listener.allowed_namespaces == "Same":
        return route_namespace == verdict.gateway.namespace
    # "Selector": without a selector it admits nothing rather than everything.
    if listener.namespace_selector is not None:
        return listener.namespace_selector.matches(namespace_labels(namespaces, route_namespace))
    return False


def _allowances(verdicts: Sequence[ListenerVerdict]) -> str:
    parts = []
    for v in verdicts:
        source = v.listener.allowed_namespaces
        if source == "Same":
            allows = f"namespace {v.gateway.namespace!r} only"
        elif source == "Selector":
            allows = f"namespaces labelled {v.listener.namespace_selector}"
        else:
            allows = "every namespace"
        parts.append(f"{v.name!r} allows {allows}")
    return "; ".join(parts)
