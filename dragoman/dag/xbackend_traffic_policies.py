"""XBackendTrafficPolicies judged (GEP-713, GEP-3388): which policy each Service's (or
XBackend's) clusters carry, what Envoy serves of it, and each policy's conditions, one
ancestor per target. Pure.

- A policy with problems (`Invalid`, naming the field) takes no target: its targets are
  served as if it had no policy.
- Two valid policies on one target: the older (creationTimestamp) wins, then the one first
  by name; the other is `Conflicted` on that target.
- A target that does not exist is `TargetNotFound`; the policy applies once it appears.
- What Envoy cannot do of an accepted policy is named (`UnsupportedValue`, the field) in its
  Accepted message and among the build's problems; what Envoy approximates is said there too.
- A BackendPolicy on the same Service applies as well: Envoy's retry budget replaces its
  circuitBreaker.maxParallelRetries (Envoy applies one or the other), session persistence
  picks the endpoint before its loadBalancer does (the balancer picks when a request names no
  live endpoint).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.dag.backend_policies import NO_BACKEND_POLICIES, BackendPolicies
from dragoman.dag.conditions import Condition, condition, policy_ancestor
from dragoman.dag.model import ClusterTraffic, ObjectStatus, Problem, StatefulSession
from dragoman.objects import ObjectKey
from dragoman.objects.backend_tls import PolicyTargetRef
from dragoman.objects.xbackend import XBACKEND_GROUP
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy
from dragoman.store import NamespacedName, Store

API_VERSION = f"{XBACKEND_GROUP}/v1alpha1"
ACCEPTED = "Accepted"
INVALID = "Invalid"
CONFLICTED = "Conflicted"
TARGET_NOT_FOUND = "TargetNotFound"
UNSUPPORTED_VALUE = "UnsupportedValue"
SERVICE = "Service"
XBACKEND = "XBackend"
# (kind, namespace, name) of a target: a Service or an XBackend.
TargetKey = tuple[str, str, str]
SESSION = "spec.sessionPersistence"


def _precedence(policy: XBackendTrafficPolicy) -> tuple[str, str]:
    # An object without a timestamp (a manifest) sorts as if created at the epoch.
    return policy.meta.creation_timestamp, policy.meta.name


def _target(policy: XBackendTrafficPolicy, ref: PolicyTargetRef) -> TargetKey:
    return ref.kind, policy.meta.namespace, ref.name


@dataclass(frozen=True, slots=True)
class XBackendTrafficPolicies:
    """Every XBackendTrafficPolicy, judged and indexed by the target it applies to."""

    policies: Mapping[NamespacedName, XBackendTrafficPolicy] = field(default_factory=dict)
    # The winner per target (valid policies only).
    winners: Mapping[TargetKey, XBackendTrafficPolicy] = field(default_factory=dict)

    @classmethod
    def judged(cls, policies: Iterable[XBackendTrafficPolicy]) -> XBackendTrafficPolicies:
        every = {(p.meta.namespace, p.meta.name): p for p in policies}
        winners: dict[TargetKey, XBackendTrafficPolicy] = {}
        for policy in sorted(every.values(), key=_precedence):
            if policy.problems:
                continue
            for ref in policy.target_refs:
                winners.setdefault(_target(policy, ref), policy)
        return cls(every, winners)

    def cluster_traffic(self, kind: str, namespace: str, name: str) -> ClusterTraffic | None:
        """What the clusters of the Service (or XBackend) `kind` namespace/name carry; None
        when no valid policy takes it."""
        policy = self.winners.get((kind, namespace, name))
        if policy is None:
            return None
        return ClusterTraffic(
            policy=policy.key,
            retry_budget=policy.retry_budget,
            session=served_session(policy),
        )

    def problems(
        self,
        existing: set[TargetKey],
        backend_policies: BackendPolicies = NO_BACKEND_POLICIES,
    ) -> list[Problem]:
        """What `dragoman check` and the logs say of policies not applied (or applied only in
        part) where they ask. `existing`: the targets that exist."""
        found = []
        for _, policy in sorted(self.policies.items()):
            found += [Problem(policy.key, path, INVALID, why) for path, why in policy.problems]
            if policy.problems:
                continue
            applied = False
            for index, ref in enumerate(policy.target_refs):
                verdict = self._accepted(policy, _target(policy, ref), existing, backend_policies)
                if verdict["status"] == "False":
                    field = f"spec.targetRefs[{index}]"
                    reason, message = verdict["reason"], verdict["message"]
                    missing = None
                    if reason == TARGET_NOT_FOUND:
                        missing = ObjectKey(ref.kind, policy.meta.namespace, ref.name)
                    found.append(Problem(policy.key, field, reason, message, missing))
                else:
                    applied = True
            if applied:
                found += [
                    Problem(policy.key, path, UNSUPPORTED_VALUE, why)
                    for path, why in unsupported(policy)
                ]
        return found

    def statuses(
        self,
        existing: set[TargetKey],
        controller_name: str,
        backend_policies: BackendPolicies = NO_BACKEND_POLICIES,
    ) -> list[ObjectStatus]:
        """Each policy's status: one ancestor per target, with its conditions."""
        return [
            ObjectStatus(
                key=policy.key,
                api_version=API_VERSION,
                status={
                    "ancestors": self._ancestors(
                        policy, existing, controller_name, backend_policies
                    )
                },
            )
            for _, policy in sorted(self.policies.items())
        ]

    def _ancestors(
        self,
        policy: XBackendTrafficPolicy,
        existing: set[TargetKey],
        controller_name: str,
        backend_policies: BackendPolicies,
    ) -> list[dict[str, Any]]:
        namespace = policy.meta.namespace
        ancestors = []
        for ref in dict.fromkeys(policy.target_refs):
            accepted = self._accepted(policy, _target(policy, ref), existing, backend_policies)
            target = (ref.group, ref.kind, namespace, ref.name)
            ancestors.append(policy_ancestor(target, controller_name, accepted))
        if not ancestors:  # no target could be read: say why on the policy itself
            itself = (XBACKEND_GROUP, policy.kind, namespace, policy.meta.name)
            accepted = self._accepted(policy, None, existing, backend_policies)
            ancestors.append(policy_ancestor(itself, controller_name, accepted))
        return ancestors

    def _accepted(
        self,
        policy: XBackendTrafficPolicy,
        target: TargetKey | None,
        existing: set[TargetKey],
        backend_policies: BackendPolicies,
    ) -> Condition:
        generation = policy.meta.generation
        if policy.problems:
            message = "; ".join(f"{path}: {why}" for path, why in policy.problems)
            return condition(ACCEPTED, False, INVALID, message, generation)
        assert target is not None  # a valid policy names at least one target
        kind, namespace, name = target
        if target not in existing:
            message = f"{kind} {namespace}/{name} does not exist"
            return condition(ACCEPTED, False, TARGET_NOT_FOUND, message, generation)
        winner = self.winners.get(target)
        if winner is not None and winner.key != policy.key:
            message = (
                f"{kind} {namespace}/{name} is taken by XBackendTrafficPolicy "
                f"{winner.meta.namespace}/{winner.meta.name}, which is older (or first by name)"
            )
            return condition(ACCEPTED, False, CONFLICTED, message, generation)
        message = accepted_message(policy, target, backend_policies)
        return condition(ACCEPTED, True, ACCEPTED, message, generation)


def served_session(policy: XBackendTrafficPolicy) -> StatefulSession | None:
    """What Envoy's stateful_session serves of the policy's sessionPersistence."""
    session = policy.session_persistence
    if session is None:
        return None
    if session.type == "Header":
        return StatefulSession(header=True, name=session.session_name)
    permanent = session.lifetime_type == "Permanent"
    ttl = session.absolute_timeout_s if permanent else None
    return StatefulSession(header=False, name=session.session_name, cookie_ttl_s=ttl)


def unsupported(policy: XBackendTrafficPolicy) -> list[tuple[str, str]]:
    """(field, why) for every field of an accepted policy Envoy cannot honour."""
    session = policy.session_persistence
    found: list[tuple[str, str]] = []
    if session is None:
        return found
    if session.idle_timeout_s is not None:
        found.append(
            (
                f"{SESSION}.idleTimeout",
                "Envoy's stateful session has no idle timeout: a session lasts as long as its "
                "cookie or header names a live endpoint",
            )
        )
    if session.absolute_timeout_s is not None and session.type == "Header":
        found.append(
            (
                f"{SESSION}.absoluteTimeout",
                "Envoy's header-based session has no expiry: it lasts while the client sends "
                "the header back",
            )
        )
    elif session.absolute_timeout_s is not None and session.lifetime_type == "Session":
        found.append(
            (
                f"{SESSION}.absoluteTimeout",
                "Envoy bounds a session cookie's life only by making it permanent (Max-Age): "
                "with lifetimeType Session the cookie is set without one, and the session has "
                "no absolute timeout",
            )
        )
    return found


def accepted_message(
    policy: XBackendTrafficPolicy, target: TargetKey, backend_policies: BackendPolicies
) -> str:
    """What the policy does to `target` in Envoy, what it approximates, and what not."""
    parts = ["the policy applies to every route that reaches the target"]
    budget = policy.retry_budget
    if budget is not None:
        parts.append(
            f"retry budget: Envoy allows retries up to {budget.percent}% of the requests "
            "active at once (not of those seen over budget.interval, which Envoy does not "
            f"measure), and at least {budget.min_retry_count} "
            f"{'retry' if budget.min_retry_count == 1 else 'retries'} at once "
            f"(minRetryRate.count as Envoy's min_retry_concurrency; its interval is not used); "
            "a retry over budget fails with 503"
        )
    for path, why in unsupported(policy):
        parts.append(f"{UNSUPPORTED_VALUE}: {path}: {why}")
    kind, namespace, name = target
    other = backend_policies.winners.get((namespace, name)) if kind == SERVICE else None
    breaker = other.circuit_breaker if other is not None else None
    retries = breaker.max_parallel_retries if breaker is not None else None
    if other is not None and budget is not None and retries is not None:
        parts.append(
            f"the retry budget replaces circuitBreaker.maxParallelRetries of BackendPolicy "
            f"{other.meta.namespace}/{other.meta.name} (Envoy applies one or the other); "
            "its other circuit breakers apply"
        )
    if other is not None and policy.session_persistence is not None and other.load_balancer:
        parts.append(
            f"session persistence picks the endpoint before the loadBalancer of BackendPolicy "
            f"{other.meta.namespace}/{other.meta.name}, which picks when a request names no "
            "live endpoint"
        )
    parts.append(
        "proxyless gRPC clients apply neither the retry budget nor session persistence; "
        "sessions are kept on HTTP and gRPC routes through Envoy only"
    )
    return "; ".join(parts)


def traffic_targets(store: Store) -> set[TargetKey]:
    """The targets that exist: every Service and XBackend of `store`."""
    return {(SERVICE, *key) for key in store.services} | {
        (XBACKEND, *key) for key in store.xbackends
    }


NO_XBACKEND_TRAFFIC_POLICIES = XBackendTrafficPolicies()
