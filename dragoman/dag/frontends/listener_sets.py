"""ListenerSets: listeners other teams add to a Gateway that allows them.

A ListenerSet is judged like a Gateway (each listener: protocol, route kinds, certificates)
once its parent Gateway is one of dragoman's, accepted, and allows ListenerSets from its
namespace (spec.allowedListeners; the API default allows none). Its listeners come after
the Gateway's own and after those of older ListenerSets (creation time, then namespace/name):
one that conflicts with any of them is Conflicted and not served. A ListenerSet with no
listener left is not accepted (ListenersNotValid). Its listeners are served to the Gateway's
Envoys; routes attach to them by naming the ListenerSet as their parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.frontends.attachment import namespace_labels
from dragoman.dag.frontends.listeners import GatewayVerdict, listener_verdict, with_conflicts
from dragoman.dag.model import Problem
from dragoman.objects import Gateway, ListenerSet, ObjectKey
from dragoman.objects.gateway import GATEWAY_GROUP
from dragoman.store import NamespacedName

NOT_ALLOWED = "NotAllowed"
PARENT_NOT_ACCEPTED = "ParentNotAccepted"
LISTENERS_NOT_VALID = "ListenersNotValid"


@dataclass(frozen=True, slots=True)
class JudgedListenerSets:
    verdicts: dict[NamespacedName, GatewayVerdict]
    children: dict[ObjectKey, tuple[GatewayVerdict, ...]]
    problems: tuple[Problem, ...]


def listener_sets(
    context: BuildContext, gateways: Mapping[NamespacedName, GatewayVerdict], owns_missing: bool
) -> JudgedListenerSets:
    verdicts: dict[NamespacedName, GatewayVerdict] = {}
    children: dict[ObjectKey, list[GatewayVerdict]] = {}
    problems: list[Problem] = []
    store = context.store
    ordered = sorted(
        store.listener_sets.values(),
        key=lambda s: (s.meta.creation_timestamp, s.meta.namespace, s.meta.name),
    )
    for listener_set in ordered:
        parent = listener_set.parent_ref
        if (parent.group, parent.kind) != (GATEWAY_GROUP, "Gateway"):
            continue  # not a Gateway: not dragoman's to judge
        key = (parent.namespace or listener_set.meta.namespace, parent.name)
        gateway = gateways.get(key)
        if gateway is None:
            if key in store.gateways or not owns_missing:
                continue  # another controller's Gateway, or one that may become it
            refusal = f"its parent Gateway {key[0]}/{key[1]} does not exist"
            verdict = _refused(listener_set, PARENT_NOT_ACCEPTED, refusal)
        elif not gateway.accepted:
            refusal = f"its parent Gateway {key[0]}/{key[1]} is not accepted"
            verdict = _refused(listener_set, PARENT_NOT_ACCEPTED, refusal)
        elif (denied := _not_allowed(gateway.gateway, listener_set, context)) is not None:
            verdict = _refused(listener_set, NOT_ALLOWED, denied)
        else:
            siblings = children.setdefault(gateway.gateway.key, [])
            verdict = _judged(listener_set, gateway, siblings, context)
            if verdict.rejection is None:
                siblings.append(verdict)
        verdicts[(listener_set.meta.namespace, listener_set.meta.name)] = verdict
        if verdict.rejection is not None:
            problems.append(verdict.rejection)
        for listener in verdict.listeners:
            problems.extend(p for p in (listener.not_accepted, listener.conflict) if p)
            problems.extend(listener.unresolved)
    return JudgedListenerSets(
        verdicts, {key: tuple(value) for key, value in children.items()}, tuple(problems)
    )


def _refused(listener_set: ListenerSet, reason: str, message: str) -> GatewayVerdict:
    problem = Problem(listener_set.key, "spec.parentRef", reason, message)
    return GatewayVerdict(gateway=listener_set, listeners=(), rejection=problem)


def _not_allowed(gateway: Gateway, listener_set: ListenerSet, context: BuildContext) -> str | None:
    """Why the Gateway does not take this ListenerSet's listeners; None when it does."""
    source = gateway.allowed_listener_sets
    namespace = listener_set.meta.namespace
    name = f"Gateway {gateway.meta.namespace}/{gateway.meta.name}"
    if source == "All":
        return None
    if source == "Same" and namespace == gateway.meta.namespace:
        return None
    if source == "Selector" and gateway.listener_set_selector is not None:
        labels = namespace_labels(context.store.namespaces, namespace)
        if gateway.listener_set_selector.matches(labels):
            return None
        return f"{name} allows ListenerSets only from namespaces labelled " + str(
            gateway.listener_set_selector
        )
    if source == "Same":
        return f"{name} allows ListenerSets only from its own namespace"
    return f"{name} allows no ListenerSet (spec.allowedListeners.namespaces.from is {source!r})"


def _judged(
    listener_set: ListenerSet,
    gateway: GatewayVerdict,
    siblings: list[GatewayVerdict],
    context: BuildContext,
) -> GatewayVerdict:
    parent = gateway.gateway
    assert isinstance(parent, Gateway)  # a ListenerSet's parent verdict is a Gateway's
    own = [
        listener_verdict(listener_set, i, context, parent)
        for i in range(len(listener_set.listeners))
    ]
    before = [*gateway.listeners, *(v for sibling in siblings for v in sibling.listeners)]
    judged = with_conflicts(own, before)
    rejection = None
    if not any(v.not_accepted is None and v.conflict is None for v in judged):
        rejection = Problem(
            listener_set.key,
            "spec.listeners",
            LISTENERS_NOT_VALID,
            "no listener can be added to Gateway "
            f"{gateway.gateway.meta.namespace}/{gateway.gateway.meta.name}: "
            + "; ".join(
                problem.message
                for v in judged
                if (problem := v.not_accepted or v.conflict) is not None
            ),
        )
    return GatewayVerdict(
        gateway=listener_set, listeners=judged, rejection=rejection, parent=gateway.gateway.key
    )
