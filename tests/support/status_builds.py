"""Builds a DAG from manifest text and reads its statuses, for the Gateway API status tests."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

import yaml

from dragoman.dag.build import build
from dragoman.dag.model import Dag
from dragoman.dag.options import BuildOptions
from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.parse import parse_object
from dragoman.store import Store
from tests.support.builders import typed
from tests.support.dag_invariants import checked

GW = "gateway.networking.k8s.io/v1"
CONTROLLER = "dragoman.dev/gateway-controller"

DRAGOMAN_CLASS = f"""
apiVersion: {GW}
kind: GatewayClass
metadata: {{name: dragoman}}
spec: {{controllerName: {CONTROLLER}}}
"""


def objects(text: str) -> list[KubeObject]:
    parsed = [parse_object(doc) for doc in yaml.safe_load_all(textwrap.dedent(text)) if doc]
    return [obj for obj in parsed if obj is not None]


def build_text(*documents: str | Mapping[str, Any], options: BuildOptions = BuildOptions()) -> Dag:
    """The DAG of manifest texts and objects (from `tests.support.builders`)."""
    found = [
        obj
        for document in documents
        for obj in (objects(document) if isinstance(document, str) else typed(document))
    ]
    return checked(build(Store.from_objects(found), options))


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
