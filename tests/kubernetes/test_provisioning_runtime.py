"""`serve --kubernetes --provision` against the fake API server: the leader creates each
accepted Gateway's objects, follows its listeners and its EnvoyProxyParameters, writes the
outcome (the Provisioned condition, status.addresses from the Service) on the Gateway, and
deletes the objects once the Gateway is gone; a name another object holds is reported."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509

from dragoman.provisioning.plan import PROVISIONED, PROVISIONED_KINDS
from dragoman.provisioning.workload import ProvisionSettings
from dragoman.security.certgen import new_authority
from dragoman.security.files import signed_by
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


def parameters(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "dragoman.dev/v1alpha1",
        "kind": "EnvoyProxyParameters",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas},
    }


def replicas(api: KubeApiServer) -> Any:
    return ((api.get("Deployment", NAME) or {}).get("spec") or {}).get("replicas")


def test_a_change_to_the_parameters_used_reprovisions_at_once(api: KubeApiServer) -> None:
    """No resync in the test's time: the watch alone brings each change."""
    ref = {"group": "dragoman.dev", "kind": "EnvoyProxyParameters", "name": "fleet"}
    api.apply(parameters("fleet", 3))
    api.apply(gateway_class(parameters_ref={**ref, "namespace": "default"}))
    api.apply(gateway())

    async def scenario() -> None:
        replica = start(api)
        assert replica.server.provisioning is not None
        replica.server.provisioning.resync = 600.0
        try:
            await eventually(lambda: replicas(api) == 3, what="the class's parameters")
            # Settled: its status written, and the build that write brought made.
            await eventually(lambda: (condition(api) or {}).get("status") == "True")
            await asyncio.sleep(0.5)
            api.apply(parameters("fleet", 5))
            await eventually(lambda: replicas(api) == 5, what="a change to them")
            # A bad value: reported, the objects kept as they were.
            api.apply(parameters("fleet", -1))
            await eventually(lambda: (condition(api) or {}).get("reason") == "InvalidParameters")
            assert "spec.replicas" in (condition(api) or {})["message"]
            assert replicas(api) == 5
            # The class names other parameters; then the Gateway names its own, which win.
            api.apply(parameters("small", 1))
            api.apply(
                gateway_class(parameters_ref={**ref, "name": "small", "namespace": "default"})
            )
            await eventually(lambda: replicas(api) == 1, what="the class's new parametersRef")
            await eventually(lambda: (condition(api) or {}).get("status") == "True")
            api.apply(parameters("own", 7))
            api.apply(gateway(infrastructure={"parametersRef": {**ref, "name": "own"}}))
            await eventually(lambda: replicas(api) == 7, what="the Gateway's parametersRef")
            # Deleted: the Gateway's reference names nothing any more.
            api.delete("EnvoyProxyParameters", "own")
            await eventually(lambda: (condition(api) or {}).get("reason") == "InvalidParameters")
            assert "does not exist" in (condition(api) or {})["message"]
        finally:
            await replica.stop()

    asyncio.run(scenario())


def test_dragoman_issues_the_gateways_xds_certificate(
    api: KubeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    ca = new_authority()
    pem = ca.pair
    data = {"tls.crt": pem.certificate, "tls.key": pem.private_key, "ca.crt": pem.certificate}
    api.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "dragoman-xds-ca", "namespace": "dragoman-system"},
            "type": "kubernetes.io/tls",
            "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
        }
    )
    api.apply(gateway_class())
    api.apply(gateway())
    settings = ProvisionSettings(ca_secret="dragoman-system/dragoman-xds-ca")
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a", provision=settings)).start()
        try:
            await eventually(lambda: api.get("Secret", f"{NAME}-xds"), what="the Secret")
            secret = api.get("Secret", f"{NAME}-xds")
            assert secret is not None and secret["type"] == "kubernetes.io/tls"
            certificate = x509.load_pem_x509_certificate(
                base64.b64decode(secret["data"]["tls.crt"])
            )
            sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            assert sans.value.get_values_for_type(x509.UniformResourceIdentifier) == [
                "spiffe://dragoman.dev/gateway/default/gw"
            ]
            assert signed_by(certificate, [ca.certificate])
            await eventually(
                lambda: "issued by dragoman" in (condition(api) or {}).get("message", "")
            )
            api.delete("Gateway", "gw")
            await eventually(lambda: api.get("Secret", f"{NAME}-xds") is None, what="deleted")
            assert api.get("Secret", "dragoman-xds-ca", "dragoman-system") is not None
        finally:
            await replica.stop()

    asyncio.run(scenario())
    # No key reaches a log line: the CA's, or the one issued.
    assert "PRIVATE KEY" not in caplog.text
    assert pem.private_key.decode().splitlines()[1] not in caplog.text
