"""Manifests in, DAG out, for the upstream tests (ExternalName, policy, DNS, TLS); the objects
themselves come from `tests.support.builders`."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.model import Dag, Problem
from dragoman.dag.options import BuildOptions
from dragoman.store import Store
from tests.support.builders import typed
from tests.support.dag_invariants import checked
from tests.support.status_builds import objects

GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}]
"""


def build_yaml(
    *documents: str | Mapping[str, Any],
    options: BuildOptions = BuildOptions(),
    dns: DnsObservations | None = None,
) -> Dag:
    """The DAG of manifest texts and objects (from `tests.support.builders`)."""
    found = [
        obj
        for document in documents
        for obj in (
            objects(textwrap.dedent(document)) if isinstance(document, str) else typed(document)
        )
    ]
    return checked(build(Store.from_objects(found), options, dns))


def route_problems(dag: Dag, route: str = "r") -> list[Problem]:
    return [p for p in dag.problems if p.object.name == route and p.object.kind.endswith("Route")]


def parent_conditions(dag: Dag, route: str = "r", kind: str = "HTTPRoute") -> dict[str, Any]:
    """The conditions of the route's first parent entry, by type."""
    key = next(k for k in dag.statuses if k.kind == kind and k.name == route)
    [entry] = dag.statuses[key].status["parents"]
    return {c["type"]: c for c in entry["conditions"]}
