"""sessionAffinity ClientIP, as far as Envoy can express it. Pure.

Clusters of a Service with `sessionAffinity: ClientIP` balance by a consistent hash (ring
hash) of the client's source address, which the routes to them compute: one client keeps
reaching one endpoint while the endpoints do not change. kube-proxy also forgets a client
after `sessionAffinityConfig.clientIP.timeoutSeconds` of silence; Envoy has no such timer, so
that setting is reported once per Service (the API server always sets it, 10800 by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dragoman.dag.model import AggregateCluster, Cluster, Problem
from dragoman.objects import Service
from dragoman.store import NamespacedName

TIMEOUT_FIELD = "spec.sessionAffinityConfig.clientIP.timeoutSeconds"


def affinity_timeout_problems(
    clusters: Iterable[Cluster], services: Mapping[NamespacedName, Service]
) -> list[Problem]:
    """One problem per Service whose ClientIP affinity timeout Envoy cannot honour."""
    keys = {
        (value.service.namespace, value.service.name)
        for value in clusters
        if not isinstance(value, AggregateCluster) and value.client_ip_affinity
    }
    problems = []
    for key in sorted(keys):
        service = services.get(key)
        timeout = service.session_affinity_timeout_s if service is not None else None
        if service is None or timeout is None:
            continue
        problems.append(
            Problem(
                service.key,
                TIMEOUT_FIELD,
                "UnsupportedValue",
                f"timeoutSeconds {timeout} cannot be expressed in Envoy: with sessionAffinity "
                "ClientIP a client keeps its endpoint while the endpoints do not change, with "
                "no timeout",
            )
        )
    return problems
