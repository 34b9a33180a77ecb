"""In Kubernetes mode the leader writes the status of TCPRoutes, TLSRoutes, UDPRoutes and
ListenerSets to their status subresources, and the Gateway's attachedListenerSets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.builders import GATEWAY_V1, gateway, gateway_class, service
from tests.support.kube_replica import Replica, eventually, replica_config
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


def l4_gateway() -> dict[str, Any]:
    obj = gateway("l4", 9000)
    obj["spec"]["listeners"] = [
        {"name": "tcp", "port": 9000, "protocol": "TCP"},
        {"name": "tls", "port": 9443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
        {"name": "udp", "port": 9053, "protocol": "UDP"},
    ]
    obj["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    return obj


def route(kind: str, name: str, backend: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_V1,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "l4"}],
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
            **spec,
        },
    }


def conditions(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    status = (obj or {}).get("status") or {}
    if "parents" in status:
        [ours] = status["parents"]
        found = ours["conditions"]
    else:
        found = status.get("conditions", [])
    return {c["type"]: (c["status"], c["reason"]) for c in found}


def test_the_leader_writes_the_status_of_every_new_kind(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(l4_gateway())
    api.apply(service("web", 80, 8080))
    api.apply(route("TCPRoute", "db", "web"))
    api.apply(route("TLSRoute", "partner", "web", hostnames=["a.example.com"]))
    api.apply(route("UDPRoute", "dns", "missing"))
    api.apply(
        {
            "apiVersion": GATEWAY_V1,
            "kind": "ListenerSet",
            "metadata": {"name": "extra", "namespace": "default"},
            "spec": {
                "parentRef": {"name": "l4"},
                "listeners": [{"name": "more", "port": 9100, "protocol": "TCP"}],
            },
        }
    )

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: replica.server.leading, what="leading")
            for kind, name in (("TCPRoute", "db"), ("TLSRoute", "partner"), ("UDPRoute", "dns")):
                await eventually(
                    lambda kind=kind, name=name: conditions(api.get(kind, name)).get("Accepted"),
                    what=f"{kind} status",
                )
            assert conditions(api.get("TCPRoute", "db")) == {
                "Accepted": ("True", "Accepted"),
                "ResolvedRefs": ("True", "ResolvedRefs"),
            }
            assert conditions(api.get("TLSRoute", "partner"))["Accepted"] == ("True", "Accepted")
            assert conditions(api.get("UDPRoute", "dns"))["ResolvedRefs"] == (
                "False",
                "BackendNotFound",
            )
            stored = api.get("TCPRoute", "db") or {}
            [parent] = stored["status"]["parents"]
            generation = stored["metadata"]["generation"]
            assert {c["observedGeneration"] for c in parent["conditions"]} == {generation}
            assert all(c["lastTransitionTime"] for c in parent["conditions"])
            await eventually(
                lambda: conditions(api.get("ListenerSet", "extra")).get("Accepted"),
                what="ListenerSet status",
            )
            assert conditions(api.get("ListenerSet", "extra"))["Accepted"] == ("True", "Accepted")
            listener_set = api.get("ListenerSet", "extra") or {}
            assert [e["name"] for e in listener_set["status"]["listeners"]] == ["more"]
            gateway_status = (api.get("Gateway", "l4") or {})["status"]
            assert gateway_status["attachedListenerSets"] == 1
            kinds = {
                e["name"]: [k["kind"] for k in e["supportedKinds"]]
                for e in gateway_status["listeners"]
            }
            assert kinds == {"tcp": ["TCPRoute"], "tls": ["TLSRoute"], "udp": ["UDPRoute"]}
        finally:
            await replica.stop()

    asyncio.run(scenario())
