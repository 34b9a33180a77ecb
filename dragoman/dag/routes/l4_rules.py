"""A TCPRoute, TLSRoute or UDPRoute to where it sends connections (or datagrams), the
clusters it uses and every problem found, whether or not it attaches anywhere.

Backends resolve through the same cluster code as HTTP (ExternalName policy, aliases, DNS
settings, DNS check, ReferenceGrants), as TCP or UDP clusters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from dragoman.dag.context import BuildContext
from dragoman.dag.model import (
    TCP,
    UDP,
    AggregateCluster,
    Backend,
    Cluster,
    L4Forward,
    L4Protocol,
    Problem,
)
from dragoman.dag.routes.backends import resolve_backend_ref
from dragoman.objects import L4Route, ObjectKey, UDPRoute


@dataclass(frozen=True, slots=True)
class L4Rules:
    forward: L4Forward
    # For TLS listeners in Passthrough mode: the client's TLS goes to the backend as it is,
    # so a backend Envoy would wrap in TLS again (a BackendTLSPolicy) takes no connection.
    passthrough: L4Forward
    clusters: Mapping[str, Cluster]  # by name, every valid cluster it sends to
    problems: tuple[Problem, ...]
    # Problems that apply only where the route is served in Passthrough mode.
    passthrough_problems: tuple[Problem, ...] = ()


def l4_route_rules(route: L4Route, context: BuildContext) -> L4Rules:
    l4: L4Protocol = UDP if isinstance(route, UDPRoute) else TCP
    backends: list[Backend] = []
    passthrough: list[Backend] = []
    clusters: dict[str, Cluster] = {}
    problems: list[Problem] = []
    passthrough_problems: list[Problem] = []
    for rule_index, rule in enumerate(route.rules):
        for ref_index, ref in enumerate(rule.backend_refs):
            field = f"spec.rules[{rule_index}].backendRefs[{ref_index}]"
            resolved = resolve_backend_ref(route, field, ref, context, None, l4)
            if isinstance(resolved, Problem):
                problems.append(resolved)
            if ref.weight <= 0:
                continue  # weight 0 takes no traffic; a bad reference is still reported
            if isinstance(resolved, Problem):
                # Its share of connections is refused, as the Gateway API asks.
                backends.append(Backend(cluster=None, weight=ref.weight))
                passthrough.append(Backend(cluster=None, weight=ref.weight))
                continue
            cluster = resolved.cluster
            clusters[cluster.name] = cluster
            problems.extend(
                Problem(route.key, field, "UnsupportedValue", warning)
                for warning in resolved.warnings
            )
            backend = Backend(cluster=cluster.name, weight=ref.weight)
            backends.append(backend)
            if _originates_tls(cluster):
                passthrough_problems.append(
                    Problem(
                        route.key,
                        field,
                        "UnsupportedValue",
                        _passthrough_message(cluster.service, ref.port),
                    )
                )
                backend = dataclasses.replace(backend, cluster=None)
            passthrough.append(backend)
    if isinstance(route, UDPRoute):
        backends, passthrough = _one_udp_backend(route, backends, problems)
    return L4Rules(
        forward=L4Forward(tuple(backends), route.key),
        passthrough=L4Forward(tuple(passthrough), route.key),
        clusters=clusters,
        problems=tuple(problems),
        passthrough_problems=tuple(passthrough_problems),
    )


def _passthrough_message(backend: ObjectKey, port: int | None) -> str:
    """Why a backend reached over TLS takes no connection on a Passthrough listener."""
    named = f"{backend.namespace}/{backend.name}"
    asks = (
        f"XBackend {named} asks for TLS (spec.tls)"
        if backend.kind == "XBackend"
        else f"Service {named} port {port} has a BackendTLSPolicy"
    )
    return (
        f"{asks}, but on a Passthrough listener the client's own TLS reaches the backend: "
        "connections for this backend there are refused"
    )


def _originates_tls(cluster: Cluster) -> bool:
    if isinstance(cluster, AggregateCluster):
        return any(child.tls is not None for child in cluster.children)
    return cluster.tls is not None


def _one_udp_backend(
    route: UDPRoute, backends: list[Backend], problems: list[Problem]
) -> tuple[list[Backend], list[Backend]]:
    """Envoy's UDP proxy sends every datagram to one cluster: of weighted backends the
    heaviest (the first of equals) takes them all, and the route says so."""
    if len(backends) <= 1:
        return backends, backends
    chosen = max(backends, key=lambda backend: backend.weight)
    if chosen.cluster is not None:
        problems.append(
            Problem(
                route.key,
                "spec.rules[0].backendRefs",
                "UnsupportedValue",
                f"Envoy's UDP proxy cannot split datagrams by weight: every datagram goes to "
                f"{chosen.cluster}, the heaviest backend",
            )
        )
    return [chosen], [chosen]
