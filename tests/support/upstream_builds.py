"""Manifest text in, DAG out, for the upstream tests (ExternalName, policy, DNS, TLS)."""

from __future__ import annotations

import textwrap
from typing import Any

from dragoman.dag.build import build
from dragoman.dag.model import Dag, Problem
from dragoman.dag.options import BuildOptions
from dragoman.dag.upstreams.dns_check import DnsObservations
from dragoman.store import Store
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


def external_service(
    name: str,
    external_name: str,
    port: int = 443,
    *,
    namespace: str = "default",
    annotations: dict[str, str] | None = None,
    app_protocol: str = "",
    port_name: str = "",
) -> str:
    port_fields = [f"port: {port}"]
    if app_protocol:
        port_fields.append(f"appProtocol: {app_protocol}")
    if port_name:
        port_fields.append(f"name: {port_name}")
    notes = ""
    if annotations:
        notes = ", annotations: {" + ", ".join(f'"{k}": "{v}"' for k, v in annotations.items())
        notes += "}"
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}{notes}}}
spec: {{type: ExternalName, externalName: "{external_name}", ports: [{{{", ".join(port_fields)}}}]}}
"""


def pod_service(
    name: str, port: int = 80, *, namespace: str = "default", app_protocol: str = "", **extra: str
) -> str:
    fields = [f"port: {port}", "targetPort: 8080", f"name: {extra.get('port_name', 'web')}"]
    if app_protocol:
        fields.append(f"appProtocol: {app_protocol}")
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec: {{selector: {{app: {name}}}, ports: [{{{", ".join(fields)}}}]}}
"""


def http_route(
    name: str, backend: str, port: int, *, namespace: str = "default", kind: str = "HTTPRoute"
) -> str:
    return f"""
apiVersion: gateway.networking.k8s.io/v1
kind: {kind}
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  parentRefs: [{{name: gw, namespace: default}}]
  rules: [{{backendRefs: [{{name: {backend}, port: {port}}}]}}]
"""


def build_yaml(
    *texts: str, options: BuildOptions = BuildOptions(), dns: DnsObservations | None = None
) -> Dag:
    found = [obj for text in texts for obj in objects(textwrap.dedent(text))]
    return checked(build(Store.from_objects(found), options, dns))


def route_problems(dag: Dag, route: str = "r") -> list[Problem]:
    return [p for p in dag.problems if p.object.name == route and p.object.kind.endswith("Route")]


def parent_conditions(dag: Dag, route: str = "r", kind: str = "HTTPRoute") -> dict[str, Any]:
    """The conditions of the route's first parent entry, by type."""
    key = next(k for k in dag.statuses if k.kind == kind and k.name == route)
    [entry] = dag.statuses[key].status["parents"]
    return {c["type"]: c for c in entry["conditions"]}
