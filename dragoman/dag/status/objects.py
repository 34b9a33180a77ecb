"""Every object's status, from what the build decided: GatewayClasses, Gateways (with their
listeners and attached-route counts) and routes. Pure: conditions carry no time.

Extension points: a policy kind adds its statuses with status_policy.policy_status; a check
made outside the build adds route conditions with status_routes.add_route_condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dragoman.dag.frontends.listeners import Frontends, GatewayVerdict
from dragoman.dag.model import ObjectStatus, Problem
from dragoman.dag.status.gateways import gateway_class_status, gateway_status
from dragoman.objects import ObjectKey


def frontend_statuses(
    frontends: Frontends,
    attached: Mapping[ObjectKey, Mapping[str, int]],
    shadowed: Mapping[tuple[ObjectKey, int], Problem] | None = None,
    unscoped: Mapping[ObjectKey, Sequence[Problem]] | None = None,
) -> list[ObjectStatus]:
    """The GatewayClasses', Gateways' and ListenerSets' statuses. `attached`: per Gateway (or
    ListenerSet) and listener name, how many routes it accepted (each route counts once);
    `shadowed`: listeners the all-gateways group leaves out, by (Gateway, listener index);
    `unscoped`: by Gateway, why listeners keep one route table though it asks for one per
    hostname."""
    unscoped = unscoped or {}
    notes: dict[ObjectKey, dict[int, str]] = {}
    for (gateway, index), problem in (shadowed or {}).items():
        notes.setdefault(gateway, {})[index] = problem.message
    return [
        *(gateway_class_status(verdict) for verdict in frontends.classes.values()),
        *(
            gateway_status(
                verdict,
                attached.get(verdict.gateway.key, {}),
                notes.get(verdict.gateway.key, {}),
                _listener_set_count(verdict, frontends),
                unscoped.get(verdict.gateway.key, ()),
            )
            for verdict in frontends.ordered()
        ),
        *(
            gateway_status(
                verdict,
                attached.get(verdict.gateway.key, {}),
                notes.get(verdict.gateway.key, {}),
            )
            for _, verdict in sorted(frontends.listener_sets.items())
        ),
    ]


# Classes first, then Gateways, then routes: the order a person reads them in.
_KIND_ORDER = {
    "GatewayClass": 0,
    "Gateway": 1,
    "ListenerSet": 1,
    "HTTPRoute": 2,
    "GRPCRoute": 3,
    "TLSRoute": 4,
    "TCPRoute": 5,
    "UDPRoute": 6,
}


def status_order(status: ObjectStatus) -> tuple[int, ObjectKey]:
    return _KIND_ORDER.get(status.key.kind, len(_KIND_ORDER)), status.key


def _listener_set_count(verdict: GatewayVerdict, frontends: Frontends) -> int | None:
    gateway = verdict.gateway
    if getattr(gateway, "allowed_listener_sets", "None") == "None":
        return None  # the field stays out of the status of a Gateway that allows none
    return len(frontends.children.get(gateway.key, ()))
