"""`serve --kubernetes --provision` against the fake API server: the leader creates each
accepted Gateway's objects, follows its listeners and its EnvoyProxyParameters, writes the
outcome (the Provisioned condition, status.addresses from the Service) on the Gateway, and
deletes the objects once the Gateway is gone; a name another object holds is reported."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from dragoman.provisioning.plan import PROVISIONED, PROVISIONED_KINDS
from dragoman.provisioning.workload import ProvisionSettings
from tests.support.builders import gateway, gateway_class, listener
from tests.support.kube_replica import Replica, eventually, replica_config
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(90)
NAME = "dragoman-gw"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2, too_large_wait=0.2) as server:
        yield server


def provisioned(api: KubeApiServer) -> dict[str, Any]:
    return {kind: api.get(kind, NAME) for _, kind in PROVISIONED_KINDS}


def condition(api: KubeApiServer) -> dict[str, Any] | None:
    status = (api.get("Gateway", "gw") or {}).get("status") or {}
    found = [c for c in status.get("conditions", ()) if c["type"] == PROVISIONED]
    return found[0] if found else None


def service_ports(api: KubeApiServer) -> set[tuple[int, str]]:
    service = api.get("Service", NAME) or {"spec": {"ports": []}}
    return {(p["port"], p["protocol"]) for p in service["spec"]["ports"]}


def start(api: KubeApiServer) -> Replica:
    replica = Replica(api, replica_config("replica-a", provision=ProvisionSettings()))
    assert replica.server.provisioning is not None
    replica.server.provisioning.resync = 0.3  # parameters and Service status are not watched
    return replica.start()


def test_a_gateway_gets_its_objects_which_follow_it_and_go_with_it(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(gateway(listeners=[listener("http", 8080)]))

    async def scenario() -> None:
        replica = start(api)
        try:
            await eventually(lambda: all(provisioned(api).values()), what="objects created")
            uid = (api.get("Gateway", "gw") or {})["metadata"]["uid"]
            for obj in provisioned(api).values():
                assert obj["metadata"]["ownerReferences"][0]["uid"] == uid
            await eventually(lambda: (condition(api) or {}).get("status") == "True")
            # A UDP listener added: the Service follows.
            api.apply(
                gateway(listeners=[listener("http", 8080), listener("dns", 53, protocol="UDP")])
            )
            await eventually(lambda: service_ports(api) == {(8080, "TCP"), (53, "UDP")})
            # Parameters named by the Gateway: the Deployment follows.
            api.apply(
                {
                    "apiVersion": "dragoman.dev/v1alpha1",
                    "kind": "EnvoyProxyParameters",
                    "metadata": {"name": "big", "namespace": "default"},
                    "spec": {"replicas": 4},
                }
            )
            ref = {"group": "dragoman.dev", "kind": "EnvoyProxyParameters", "name": "big"}
            api.apply(
                gateway(
                    listeners=[listener("http", 8080)],
                    infrastructure={"parametersRef": ref},
                )
            )
            await eventually(
                lambda: (api.get("Deployment", NAME) or {})["spec"]["replicas"] == 4,
                what="replicas from the parameters",
            )
            # The load balancer's address becomes the Gateway's.
            service = api.get("Service", NAME)
            assert service is not None
            service["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}]}}
            api.apply(service)

            def addresses() -> Any:
                return ((api.get("Gateway", "gw") or {}).get("status") or {}).get("addresses")

            await eventually(lambda: addresses() == [{"type": "IPAddress", "value": "203.0.113.9"}])
            # Gone with the Gateway.
            api.delete("Gateway", "gw")
            await eventually(lambda: not any(provisioned(api).values()), what="objects deleted")
        finally:
            await replica.stop()

    asyncio.run(scenario())


def test_bad_parameters_and_a_taken_name_are_reported_on_the_gateway(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(
        {
            "apiVersion": "dragoman.dev/v1alpha1",
            "kind": "EnvoyProxyParameters",
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"replicas": -2},
        }
    )
    ref = {"group": "dragoman.dev", "kind": "EnvoyProxyParameters", "name": "bad"}
    api.apply(gateway(infrastructure={"parametersRef": ref}))

    async def scenario() -> None:
        replica = start(api)
        try:
            await eventually(lambda: (condition(api) or {}).get("reason") == "InvalidParameters")
            assert "spec.replicas" in (condition(api) or {})["message"]
            assert not any(provisioned(api).values())
            # The Gateway itself is still accepted and served.
            status = (api.get("Gateway", "gw") or {})["status"]
            accepted = [c for c in status["conditions"] if c["type"] == "Accepted"]
            assert accepted[0]["status"] == "True"
            # Fixed, but the name is taken by a ConfigMap not the Gateway's.
            api.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": NAME, "namespace": "default"},
                    "data": {"theirs": "yes"},
                }
            )
            api.apply(gateway())
            await eventually(lambda: (condition(api) or {}).get("reason") == "NameConflict")
            assert api.get("Deployment", NAME) is None
            assert (api.get("ConfigMap", NAME) or {})["data"] == {"theirs": "yes"}
        finally:
            await replica.stop()

    asyncio.run(scenario())
