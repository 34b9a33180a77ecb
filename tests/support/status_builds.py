"""The one way to build a small world in a test: manifest texts and objects (from
`tests.support.builders`) in, the checked DAG out; and readers of what it says (statuses,
conditions, the problems of a route)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import yaml

from dragoman.dag.build import build
from dragoman.dag.dns_check import DnsObservations
from dragoman.dag.model import ALL_GATEWAYS, Dag, Problem, Route, VirtualHost
from dragoman.dag.options import BuildOptions
from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from tests.support.builders import (
    GATEWAY_V1,
    allowed_routes,
    gateway,
    gateway_class,
    listener,
    typed,
    yaml_text,
)
from tests.support.dag_invariants import checked

GW = GATEWAY_V1
CONTROLLER = "dragoman.dev/gateway-controller"

# The GatewayClass dragoman, as a manifest file holds it.
DRAGOMAN_CLASS = yaml_text(gateway_class())

# The Gateway `gw` with one HTTP listener on port 80 taking routes of every namespace.
GATEWAY = gateway(listeners=[listener(allowed_routes=allowed_routes("All"))])


def objects(text: str) -> list[KubeObject]:
    parsed = [parse_object(doc) for doc in yaml.safe_load_all(textwrap.dedent(text)) if doc]
    return [obj for obj in parsed if obj is not None]


def store_of(*documents: str | Mapping[str, Any] | KubeObject) -> Store:
    """The store of manifest texts, objects (from `tests.support.builders`) and typed objects."""
    found: list[KubeObject] = []
    for document in documents:
        if isinstance(document, str):
            found += objects(document)
        elif isinstance(document, Mapping):
            found += typed(document)
        else:
            found.append(document)
    return Store.from_objects(found)


def build_text(
    *documents: str | Mapping[str, Any] | KubeObject,
    options: BuildOptions = BuildOptions(),
    dns: DnsObservations | None = None,
) -> Dag:
    """The DAG of `store_of(documents)`, with the DNS check's observations when given; checked
    against tests/support/dag_invariants.py."""
    return checked(build(store_of(*documents), options, dns))


def status(dag: Dag, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
    key = ObjectKey(kind, "" if kind == "GatewayClass" else namespace, name)
    assert key in dag.statuses, f"no status for {key}: {sorted(map(str, dag.statuses))}"
    return dict(dag.statuses[key].status)


def condition(conditions: list[dict[str, Any]], type: str) -> tuple[str, str]:
    """(status, reason) of the condition of `type`."""
    [found] = [c for c in conditions if c["type"] == type]
    assert found["message"], found
    return found["status"], found["reason"]


def gateway_condition(
    dag: Dag, gateway: str, type: str, namespace: str = "default"
) -> tuple[str, str]:
    return condition(status(dag, "Gateway", gateway, namespace)["conditions"], type)


def listener(dag: Dag, gateway: str, name: str, namespace: str = "default") -> dict[str, Any]:
    [found] = [
        entry
        for entry in status(dag, "Gateway", gateway, namespace)["listeners"]
        if entry["name"] == name
    ]
    return found


def listener_condition(
    dag: Dag, gateway: str, name: str, type: str, namespace: str = "default"
) -> tuple[str, str]:
    return condition(listener(dag, gateway, name, namespace)["conditions"], type)


def parents(
    dag: Dag, route: str, namespace: str = "default", kind: str = "HTTPRoute"
) -> list[dict[str, Any]]:
    return list(status(dag, kind, route, namespace)["parents"])


def route_condition(
    dag: Dag, route: str, type: str, namespace: str = "default", parent: int = 0
) -> tuple[str, str]:
    entries = parents(dag, route, namespace)
    assert entries, f"no parents in the status of {route}"
    return condition(entries[parent]["conditions"], type)


def route_problems(dag: Dag, route: str = "r") -> list[Problem]:
    return [p for p in dag.problems if p.object.name == route and p.object.kind.endswith("Route")]


def parent_conditions(dag: Dag, route: str = "r", kind: str = "HTTPRoute") -> dict[str, Any]:
    """The conditions of the route's first parent entry, by type."""
    key = next(k for k in dag.statuses if k.kind == kind and k.name == route)
    [entry] = dag.statuses[key].status["parents"]
    return {c["type"]: c for c in entry["conditions"]}


def virtual_hosts(dag: Dag, group: str = ALL_GATEWAYS, port: int = 80) -> dict[str, VirtualHost]:
    """The virtual hosts, by name, of the route table of the group's HTTP listener on `port`."""
    table = next(t for t in dag.groups[group].route_tables if t.name == f"http-{port}")
    return {vhost.name: vhost for vhost in table.virtual_hosts}


def routes_of(
    dag: Dag, domain: str = "*", group: str = ALL_GATEWAYS, port: int = 80
) -> list[Route]:
    """The routes of the virtual host of `domain` (see `virtual_hosts`), in order."""
    return list(virtual_hosts(dag, group, port)[domain].routes)
