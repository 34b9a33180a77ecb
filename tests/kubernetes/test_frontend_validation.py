"""Kubernetes mode with a Gateway's spec.tls.frontend: the ConfigMap holding the clients' CA
is watched, so its creation and its rotation reach what the HTTPS listener validates with,
and the listener's status is written by the leader."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from dragoman.dag.model import HttpsListener
from tests.support.builders import config_map, gateway, gateway_class, listener, tls_secret
from tests.support.certificates import certificate_authority
from tests.support.kube_replica import Replica, eventually, replica_config
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(90)

SERVER = certificate_authority("server CA").issue("shop.example.com")
FIRST_CA = certificate_authority("first client CA")
SECOND_CA = certificate_authority("second client CA")


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2, too_large_wait=0.2) as server:
        yield server


def listener_conditions(api: KubeApiServer) -> dict[str, tuple[str, str]] | None:
    found = api.get("Gateway", "gw") or {}
    listeners = (found.get("status") or {}).get("listeners") or []
    if not listeners:
        return None
    return {c["type"]: (c["status"], c["reason"]) for c in listeners[0]["conditions"]}


def trusted_ca(replica: Replica) -> bytes | None:
    group = replica.dag.groups.get("default/gw")
    for value in group.listeners if group is not None else ():
        if isinstance(value, HttpsListener):
            validation = value.filter_chains[0].client_validation
            return validation.trusted_ca if validation is not None else None
    return None


def test_the_ca_config_map_is_watched(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(tls_secret("shop", SERVER.certificate, SERVER.private_key))
    https = listener(
        "https",
        8443,
        "HTTPS",
        tls={"certificateRefs": [{"group": "", "kind": "Secret", "name": "shop"}]},
    )
    ca_ref = {"group": "", "kind": "ConfigMap", "name": "clients"}
    api.apply(
        gateway(
            listeners=[https],
            tls={"frontend": {"default": {"validation": {"caCertificateRefs": [ca_ref]}}}},
        )
    )

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: replica.server.leading, what="leadership")
            # The CA is not there yet: the listener is not served, and says why.
            await eventually(
                lambda: (
                    (listener_conditions(api) or {}).get("Accepted")
                    == ("False", "NoValidCACertificate")
                ),
                what="listener refused",
            )
            assert trusted_ca(replica) is None
            api.apply(config_map("clients", {"ca.crt": FIRST_CA.pem.decode()}))
            await eventually(lambda: trusted_ca(replica) == FIRST_CA.pem, what="CA read")
            await eventually(
                lambda: (listener_conditions(api) or {}).get("Accepted") == ("True", "Accepted"),
                what="listener accepted",
            )
            # Rotated in place: the next build validates with the new CA.
            api.apply(config_map("clients", {"ca.crt": SECOND_CA.pem.decode()}))
            await eventually(lambda: trusted_ca(replica) == SECOND_CA.pem, what="CA rotated")
        finally:
            await replica.stop()

    asyncio.run(scenario())
