"""Status of XBackends (GEP-4894): `parents`, one entry per Gateway (or ListenerSet) that
accepted a route naming the XBackend, each with the XBackend's conditions:

- Accepted: False when it is not served (an unsafe or cluster-internal hostname, a domain
  the platform does not allow, protocol MCP, TLS that cannot be used), naming the field;
- ResolvedRefs: False when its clientCertificateRef or a CA reference does not resolve;
- DNSResolved (with the DNS check on): what the check last learned of its hostname.
"""

from __future__ import annotations

from collections.abc import Sequence

from dragoman.dag.conditions import Condition, condition
from dragoman.dag.context import BuildContext
from dragoman.dag.dns_check import dns_resolved_condition
from dragoman.dag.model import ObjectStatus
from dragoman.dag.status.policies import gateway_ancestor_ref
from dragoman.dag.status.route_upstreams import RouteUpstreams
from dragoman.dag.upstreams.xbackends import XBackendVerdict, host_refusal, judge_xbackend
from dragoman.objects import ObjectKey
from dragoman.objects.xbackend import XBACKEND_GROUP
from dragoman.store import NamespacedName

XBACKEND_API_VERSION = f"{XBACKEND_GROUP}/v1alpha1"
# The CRD keeps at most this many parents.
MAX_PARENTS = 32


def xbackend_statuses(
    routes: Sequence[RouteUpstreams], context: BuildContext
) -> list[ObjectStatus]:
    """A status for every XBackend; `routes`: those that may name one."""
    parents: dict[NamespacedName, set[ObjectKey]] = {}
    for item in routes:
        if not item.names.xbackends:
            continue
        gateways = {a.gateway for parent in item.outcome.parents for a in parent.attachments}
        for key in item.names.xbackends:
            parents.setdefault(key, set()).update(gateways)
    statuses = []
    controller = context.options.controller_name
    for key, backend in sorted(context.store.xbackends.items()):
        conditions = xbackend_conditions(judge_xbackend(backend, context), context)
        entries = [
            {
                "parentRef": _parent_ref(gateway),
                "controllerName": controller,
                "conditions": conditions,
            }
            for gateway in sorted(parents.get(key, ()))[:MAX_PARENTS]
        ]
        statuses.append(ObjectStatus(backend.key, XBACKEND_API_VERSION, {"parents": entries}))
    return statuses


def xbackend_conditions(verdict: XBackendVerdict, context: BuildContext) -> list[Condition]:
    backend = verdict.backend
    generation = backend.meta.generation
    refusal = verdict.refusal
    if refusal is not None:
        message = f"{refusal.field}: {refusal.message}; routes to it answer 500"
        accepted = condition("Accepted", False, refusal.reason, message, generation)
    else:
        notes = "; ".join(verdict.warnings)
        message = f"XBackend is accepted{f' ({notes})' if notes else ''}"
        accepted = condition("Accepted", True, "Accepted", message, generation)
    unresolved = verdict.unresolved
    if unresolved is not None:
        message = f"{unresolved.field}: {unresolved.message}"
        resolved = condition("ResolvedRefs", False, unresolved.reason, message, generation)
    else:
        resolved = condition(
            "ResolvedRefs", True, "ResolvedRefs", "all references resolved", generation
        )
    conditions = [accepted, resolved]
    options = context.options
    # Only a name the DNS check resolves (as reachable_backends hands it the names).
    checked = options.dns_check and host_refusal(backend, verdict.hostname, context) is None
    if checked and options.external_names.domain_refusal(verdict.hostname) is None:
        conditions.append(
            dns_resolved_condition(
                (verdict.hostname,), context.upstream.dns, generation, options.external_names
            )
        )
    return conditions


def _parent_ref(gateway: ObjectKey) -> dict[str, str]:
    ref = gateway_ancestor_ref(gateway)
    ref["kind"] = gateway.kind  # a Gateway or a ListenerSet
    return ref
