"""In Kubernetes mode the leader writes the status of TCPRoutes, TLSRoutes, UDPRoutes,
ListenerSets and XBackends to their status subresources, and the Gateway's
attachedListenerSets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.builders import (
    gateway,
    gateway_class,
    http_route,
    listener,
    listener_set,
    rule,
    service,
    xbackend,
    xbackend_ref,
)
from tests.support.kube_replica import Replica, eventually, replica_config
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


L4_GATEWAY = gateway(
    "l4",
    listeners=[
        listener("tcp", 9000, "TCP"),
        listener("tls", 9443, "TLS", tls={"mode": "Passthrough"}),
        listener("udp", 9053, "UDP"),
    ],
    allowed_listeners="Same",
)


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
    api.apply(L4_GATEWAY)
    api.apply(service("web", 80, 8080))
    api.apply(http_route("db", "web", 80, kind="TCPRoute", parents=["l4"]))
    api.apply(
        http_route(
            "partner", "web", 80, kind="TLSRoute", parents=["l4"], hostnames=["a.example.com"]
        )
    )
    api.apply(http_route("dns", "missing", 80, kind="UDPRoute", parents=["l4"]))
    api.apply(listener_set("extra", [listener("more", 9100, "TCP")], parent="l4"))

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


def test_the_leader_writes_the_status_of_xbackends(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(xbackend("partner", "api.partner.example"))
    api.apply(xbackend("local", "localhost"))
    api.apply(http_route("r", rules=[rule(xbackend_ref("partner")), rule(xbackend_ref("local"))]))

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: replica.server.leading, what="leading")
            for name in ("partner", "local"):
                await eventually(
                    lambda name=name: conditions(api.get("XBackend", name)).get("Accepted"),
                    what=f"XBackend {name} status",
                )
            assert conditions(api.get("XBackend", "partner")) == {
                "Accepted": ("True", "Accepted"),
                "ResolvedRefs": ("True", "ResolvedRefs"),
            }
            assert conditions(api.get("XBackend", "local"))["Accepted"] == (
                "False",
                "UnsafeHostname",
            )
            [parent] = api.get("XBackend", "partner")["status"]["parents"]
            assert parent["parentRef"]["name"] == "gw"
            assert parent["controllerName"] == "dragoman.dev/gateway-controller"
        finally:
            await replica.stop()

    asyncio.run(scenario())
