"""BackendPolicies judged (GEP-713): which policy each Service's clusters carry, and each
policy's conditions, one ancestor per target. Pure.

- A policy with problems (`Invalid`, naming the field) takes no target: its targets are
  served as if it had no policy.
- Two valid policies on one Service: the older (creationTimestamp) wins, then the one first
  by name; the other is `Conflicted` on that target.
- A target that does not exist is `TargetNotFound`; the policy applies once it appears.
- A `failover` that loops back (A -> B -> A), or names a Service of another namespace that no
  ReferenceGrant there allows, makes the policy `Invalid`; the chain of a target (each
  failover Service followed by its own failover) is what its cluster's aggregate serves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dragoman.dag.conditions import Condition, condition, policy_ancestor
from dragoman.dag.model import ClusterPolicy, ObjectStatus, Problem
from dragoman.dag.reference_grants import (
    NO_GRANTS,
    ReferenceGrants,
    Referrer,
    not_permitted_message,
    service_target,
)
from dragoman.objects import ObjectKey, Service
from dragoman.objects.backend_policy import BackendPolicy, CircuitBreaker
from dragoman.objects.meta import DRAGOMAN_GROUP
from dragoman.store import NamespacedName

API_VERSION = f"{DRAGOMAN_GROUP}/v1alpha1"
ACCEPTED = "Accepted"
INVALID = "Invalid"
CONFLICTED = "Conflicted"
TARGET_NOT_FOUND = "TargetNotFound"
# What proxyless gRPC clients cannot apply of a policy (gRFCs A50 and A42 implement outlier
# detection and ring hash): said on the policy, never dropped silently.
PROXYLESS_IGNORED = (
    ("active_health_check", "healthCheck.active"),
    ("panic_threshold", "healthCheck.panicThreshold"),
    ("connect_timeout_s", "timeout.tcp.connectTimeout"),
    ("connection_idle_timeout_s", "timeout.http.connectionIdleTimeout"),
    ("max_connection_duration_s", "timeout.http.maxConnectionDuration"),
    ("tcp_keepalive", "tcpKeepalive"),
    ("http2_keepalive", "http2.connectionKeepalive"),
)


def _precedence(policy: BackendPolicy) -> tuple[str, str]:
    # An object without a timestamp (a manifest) sorts as if created at the epoch.
    return policy.meta.creation_timestamp, policy.meta.name


@dataclass(frozen=True, slots=True)
class BackendPolicies:
    """Every BackendPolicy, judged and indexed by the Service it applies to."""

    policies: Mapping[NamespacedName, BackendPolicy] = field(default_factory=dict)
    # The winner per target Service (valid policies only).
    winners: Mapping[NamespacedName, BackendPolicy] = field(default_factory=dict)
    # What makes a policy's failover unusable (a loop, a Service of another namespace without
    # a ReferenceGrant): (field path, why), by policy; such a policy applies nowhere.
    refused: Mapping[ObjectKey, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    @classmethod
    def judged(
        cls, policies: Iterable[BackendPolicy], grants: ReferenceGrants = NO_GRANTS
    ) -> BackendPolicies:
        every = {(p.meta.namespace, p.meta.name): p for p in policies}
        refused: dict[ObjectKey, tuple[tuple[str, str], ...]] = {}
        # A policy refused for its failover gives its targets up, which may end another's
        # loop: judged again until nothing more is refused (each round refuses one or more).
        for _ in range(len(every) + 1):
            winners = _winners(every.values(), refused)
            found = {
                policy.key: problems
                for policy in {p.key: p for p in winners.values()}.values()
                if (problems := _failover_problems(policy, winners, grants))
            }
            if not found:
                break
            refused.update(found)
        return cls(every, winners, refused)

    def failover_of(self, namespace: str, name: str) -> tuple[NamespacedName, ...]:
        """The Services that take the traffic of Service namespace/name, in order, when its
        policy names any: its failover entries, each followed by its own (depth first)."""
        chain, _ = _chain((namespace, name), self.winners)
        return tuple(chain)

    def cluster_policy(self, service: Service, host: str) -> ClusterPolicy | None:
        """What `service`'s clusters carry; None when no valid policy takes it. `host`: the
        Host its HTTP health checks send unless the policy names one (the external name of
        an ExternalName, the Service's cluster DNS name for pods)."""
        policy = self.winners.get((service.meta.namespace, service.meta.name))
        if policy is None:
            return None
        active = policy.active_health_check
        host = (active.http_hostname if active else "") or host
        return ClusterPolicy(
            policy=policy.key,
            active_health_check=policy.active_health_check,
            passive_health_check=policy.passive_health_check,
            panic_threshold=policy.panic_threshold,
            circuit_breaker=policy.circuit_breaker,
            connect_timeout_s=policy.connect_timeout_s,
            connection_idle_timeout_s=policy.connection_idle_timeout_s,
            max_connection_duration_s=policy.max_connection_duration_s,
            tcp_keepalive=policy.tcp_keepalive,
            http2_keepalive=policy.http2_keepalive,
            load_balancer=policy.load_balancer,
            health_check_host=host,
        )

    def problems(self, services: Mapping[NamespacedName, Service]) -> list[Problem]:
        """What `dragoman check` and the logs say of policies not applied where they ask."""
        found = []
        for _, policy in sorted(self.policies.items()):
            problems = policy.problems or self.refused.get(policy.key, ())
            found += [Problem(policy.key, path, INVALID, why) for path, why in problems]
            if problems:
                continue
            for index, ref in enumerate(policy.target_refs):
                verdict = self._accepted(policy, (policy.meta.namespace, ref.name), services)
                if verdict["status"] == "False":
                    field = f"spec.targetRefs[{index}]"
                    reason, message = verdict["reason"], verdict["message"]
                    missing = None
                    if reason == TARGET_NOT_FOUND:
                        missing = ObjectKey("Service", policy.meta.namespace, ref.name)
                    found.append(Problem(policy.key, field, reason, message, missing))
        return found

    def statuses(
        self, services: Mapping[NamespacedName, Service], controller_name: str
    ) -> list[ObjectStatus]:
        """Each policy's status: one ancestor per target Service, with its conditions."""
        return [
            ObjectStatus(
                key=policy.key,
                api_version=API_VERSION,
                status={"ancestors": self._ancestors(policy, services, controller_name)},
            )
            for _, policy in sorted(self.policies.items())
        ]

    def _ancestors(
        self,
        policy: BackendPolicy,
        services: Mapping[NamespacedName, Service],
        controller_name: str,
    ) -> list[dict[str, Any]]:
        namespace = policy.meta.namespace
        refs = policy.target_refs or ()
        ancestors = []
        for ref in dict.fromkeys(refs):
            accepted = self._accepted(policy, (namespace, ref.name), services)
            target = (ref.group, ref.kind, namespace, ref.name)
            ancestors.append(policy_ancestor(target, controller_name, accepted))
        if not ancestors:  # no target could be read: say why on the policy itself
            itself = (DRAGOMAN_GROUP, policy.kind, namespace, policy.meta.name)
            accepted = self._accepted(policy, None, services)
            ancestors.append(policy_ancestor(itself, controller_name, accepted))
        return ancestors

    def _accepted(
        self,
        policy: BackendPolicy,
        target: NamespacedName | None,
        services: Mapping[NamespacedName, Service],
    ) -> Condition:
        generation = policy.meta.generation
        problems = policy.problems or self.refused.get(policy.key, ())
        if problems:
            message = "; ".join(f"{path}: {why}" for path, why in problems)
            return condition(ACCEPTED, False, INVALID, message, generation)
        assert target is not None  # a valid policy names at least one target
        if target not in services:
            message = f"Service {target[0]}/{target[1]} does not exist"
            return condition(ACCEPTED, False, TARGET_NOT_FOUND, message, generation)
        winner = self.winners.get(target)
        if winner is not None and winner.key != policy.key:
            message = (
                f"Service {target[0]}/{target[1]} is taken by BackendPolicy "
                f"{winner.meta.namespace}/{winner.meta.name}, which is older (or first by name)"
            )
            return condition(ACCEPTED, False, CONFLICTED, message, generation)
        return condition(ACCEPTED, True, ACCEPTED, _accepted_message(policy), generation)


def _accepted_message(policy: BackendPolicy) -> str:
    message = "the policy applies to every route and client that reaches the Service"
    active = policy.active_health_check
    if active is not None and active.type == "GRPC":
        message += (
            "; gRPC health checks run on the Service's ports spoken in HTTP/2 only (appProtocol "
            "kubernetes.io/h2c, GRPCRoute backends): the others are not checked"
        )
    ignored = _proxyless_ignored(policy)
    if ignored:
        message += (
            "; proxyless gRPC clients apply passive health checks and the load balancer, "
            f"not {', '.join(ignored)}"
        )
    return message


def _proxyless_ignored(policy: BackendPolicy) -> list[str]:
    """The fields of `policy` proxyless gRPC clients do not apply."""
    ignored = [name for attribute, name in PROXYLESS_IGNORED if getattr(policy, attribute)]
    breaker = policy.circuit_breaker
    if breaker is not None and breaker != CircuitBreaker(
        max_parallel_requests=breaker.max_parallel_requests
    ):
        ignored.append("circuitBreaker fields other than maxParallelRequests")
    balancer = policy.load_balancer
    if balancer is None:
        return ignored
    if balancer.type in ("Random", "LeastRequest"):
        ignored.append(f"loadBalancer type {balancer.type} (they balance RoundRobin)")
    if balancer.hash_type in ("SourceIP", "Cookie"):
        ignored.append(
            "loadBalancer.consistentHash type SourceIP or Cookie (they hash headers only: "
            "each call takes a random place on the ring)"
        )
    if balancer.slow_start_window_s:
        ignored.append("loadBalancer.slowStart")
    return ignored


def _winners(
    policies: Iterable[BackendPolicy], refused: Mapping[ObjectKey, object]
) -> dict[NamespacedName, BackendPolicy]:
    winners: dict[NamespacedName, BackendPolicy] = {}
    for policy in sorted(policies, key=_precedence):
        if policy.problems or policy.key in refused:
            continue
        for ref in policy.target_refs:
            winners.setdefault((policy.meta.namespace, ref.name), policy)
    return winners


def _chain(
    start: NamespacedName, winners: Mapping[NamespacedName, BackendPolicy]
) -> tuple[list[NamespacedName], NamespacedName | None]:
    """The failover chain of `start` (depth first, each Service once), and the first
    Service it leads back to (a loop), if any; the chain stops there."""
    chain: list[NamespacedName] = []
    return chain, _follow(start, (start,), winners, chain)


def _follow(
    service: NamespacedName,
    path: tuple[NamespacedName, ...],
    winners: Mapping[NamespacedName, BackendPolicy],
    chain: list[NamespacedName],
) -> NamespacedName | None:
    """Appends to `chain` the Services `service` fails over to, depth first; returns the
    first one that leads back to `path` (a loop). (A function of its own, not a closure
    calling itself: that is a reference cycle per call, garbage only the cyclic collector
    frees, and a first build's is frozen with what it made.)"""
    policy = winners.get(service)
    for entry in policy.failover if policy is not None else ():
        key = (entry.namespace, entry.name)
        if key in path:
            return key  # back to a Service on the way here: a loop
        if key in chain:
            continue  # reached another way already: once is enough
        chain.append(key)
        looped = _follow(key, (*path, key), winners, chain)
        if looped is not None:
            return looped
    return None


def _failover_problems(
    policy: BackendPolicy,
    winners: Mapping[NamespacedName, BackendPolicy],
    grants: ReferenceGrants,
) -> tuple[tuple[str, str], ...]:
    referrer = Referrer(DRAGOMAN_GROUP, policy.kind, policy.meta.namespace)
    problems = []
    for index, entry in enumerate(policy.failover):
        target = service_target(entry.namespace, entry.name)
        if not grants.permits(referrer, target):
            problems.append((f"spec.failover[{index}]", not_permitted_message(referrer, target)))
    for ref in policy.target_refs:
        service = (policy.meta.namespace, ref.name)
        if winners.get(service) is not policy:
            continue
        _, looped = _chain(service, winners)
        if looped is not None:
            problems.append(
                (
                    "spec.failover",
                    f"Service {service[0]}/{service[1]} fails over to Service "
                    f"{looped[0]}/{looped[1]} twice (a loop)",
                )
            )
    return tuple(problems)


NO_BACKEND_POLICIES = BackendPolicies()
