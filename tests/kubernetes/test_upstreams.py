"""Kubernetes mode with the upstream features: BackendTLSPolicies are watched, applied and get
their status written by the leader; the DNS check runs and its DNSResolved reaches the route."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from dragoman.dag.model import EdsCluster
from dragoman.demo.dns import DnsResponder
from dragoman.runtime.server_config import DnsCheckSettings
from tests.support.builders import (
    backend_tls_policy,
    config_map,
    endpoint_slice,
    external_service,
    gateway,
    gateway_class,
    http_route,
    local_ref,
    service,
)
from tests.support.certificates import certificate_authority
from tests.support.kube_replica import (
    Replica,
    eventually,
    replica_config,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2, too_large_wait=0.2) as server:
        yield server


# The BackendTLSPolicy of the Service web's port http, its CA in the ConfigMap named.
web_tls = partial(backend_tls_policy, "web-tls", "web", "web.example.com", section="http")


def ancestor_conditions(api: KubeApiServer) -> dict[str, tuple[str, str]] | None:
    found = api.get("BackendTLSPolicy", "web-tls") or {}
    ancestors = (found.get("status") or {}).get("ancestors") or []
    if not ancestors:
        return None
    return {c["type"]: (c["status"], c["reason"]) for c in ancestors[0]["conditions"]}


def test_backend_tls_policies_are_applied_and_their_status_written(api: KubeApiServer) -> None:
    ca = certificate_authority()
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(service("web", 443, 8443))
    api.apply(endpoint_slice("web", 8443, "10.0.0.1"))
    api.apply(http_route("web", [("/", "web", 443)]))
    api.apply(config_map("web-ca", {"ca.crt": ca.pem.decode()}))
    api.apply(web_tls(ca_refs=[local_ref("ConfigMap", "missing-ca")]))

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: replica.server.leading, what="leadership")
            # A CA reference to nothing: not accepted, and the backend is not served.
            await eventually(
                lambda: (
                    ancestor_conditions(api)
                    == {
                        "Accepted": ("False", "NoValidCACertificate"),
                        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
                    }
                ),
                what="policy status",
            )
            assert "default/web/443" not in replica.dag.clusters
            # Fixed: accepted, and the cluster originates TLS with the policy's name.
            api.apply(web_tls(ca_refs=[local_ref("ConfigMap", "web-ca")]))
            await eventually(
                lambda: (
                    ancestor_conditions(api)
                    == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
                ),
                what="policy status after the fix",
            )
            cluster = replica.dag.clusters["default/web/443"]
            assert isinstance(cluster, EdsCluster)
            assert cluster.tls is not None and cluster.tls.sni == "web.example.com"
            assert cluster.tls.trusted_ca == ca.pem
        finally:
            await replica.stop()

    asyncio.run(scenario())


def route_dns_condition(api: KubeApiServer) -> tuple[str, str, str] | None:
    found = api.get("HTTPRoute", "api") or {}
    for parent in (found.get("status") or {}).get("parents") or []:
        for c in parent["conditions"]:
            if c["type"] == "DNSResolved":
                return c["status"], c["reason"], c["message"]
    return None


def test_the_dns_check_runs_in_kubernetes_mode(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(external_service("api", "api.kube.test", 8080))
    api.apply(http_route("api", [("/", "api", 8080)]))

    async def scenario(dns: DnsResponder) -> None:
        settings = DnsCheckSettings(
            enabled=True,
            resolvers=(dns.address,),
            timeout_s=1,
            min_interval_s=1,
            max_interval_s=2,
        )
        config = replica_config("replica-a", dns_check=settings)
        replica = Replica(api, config).start()
        try:
            await eventually(lambda: replica.server.serving, what="serving")
            # xDS is served at once; the name is served once its first check answers (until
            # then it is DNSCheckPending), within the check's timeout.
            await eventually(lambda: "default/api/8080" in replica.dag.clusters, what="checked")
            await eventually(
                lambda: (
                    route_dns_condition(api) == ("True", "Resolved", "api.kube.test: 203.0.113.8")
                ),
                what="DNSResolved written",
            )
            dns.set_a("api.kube.test", "169.254.169.254")

            def served() -> list[str]:
                cla = replica.dag.load_assignments["default/api/8080"]
                return [e.address for p in cla.localities for e in p.endpoints]

            # Rebinding to the metadata address: never served. After the grace (the accepted
            # answer's TTL, 1 s) the cluster has no endpoint, and the status says why.
            await eventually(lambda: served() == [], what="the refused answer is not served")
            assert "default/api/8080" in replica.dag.clusters
            await eventually(
                lambda: (
                    (route_dns_condition(api) or ("", "", ""))[:2] == ("False", "DNSCheckFailed")
                    and "169.254.169.254" in (route_dns_condition(api) or ("", "", ""))[2]
                ),
                what="DNSResolved rewritten",
            )
            dns.set_a("api.kube.test", "203.0.113.9")
            await eventually(lambda: served() == ["203.0.113.9"], what="an allowed answer again")
        finally:
            await replica.stop()

    with DnsResponder() as dns:
        dns.set_a("api.kube.test", "203.0.113.8")
        asyncio.run(scenario(dns))


def test_a_restarted_replica_serves_the_kept_dns_answers_while_dns_is_down(
    api: KubeApiServer, tmp_path: Path
) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(external_service("api", "api.kube.test", 8080))
    api.apply(http_route("api", [("/", "api", 8080)]))
    dns = DnsResponder(ttl=60).start()
    dns.set_a("api.kube.test", "203.0.113.8")
    timeout_s = 1.0
    settings = DnsCheckSettings(
        enabled=True, resolvers=(dns.address,), timeout_s=timeout_s, min_interval_s=1
    )
    config = replica_config("replica-a", dns_check=settings, state_dir=tmp_path / "state")

    def served(replica: Replica) -> list[str]:
        cla = replica.dag.load_assignments.get("default/api/8080")
        return [e.address for p in cla.localities for e in p.endpoints] if cla else []

    async def first() -> None:
        replica = Replica(api, config).start()
        try:
            await eventually(lambda: replica.server.serving, what="serving")
            await eventually(lambda: served(replica) == ["203.0.113.8"], what="accepted")
            await eventually(lambda: (tmp_path / "state" / "dns.json").exists(), what="kept")
        finally:
            await replica.stop()

    async def restarted() -> None:
        replica = Replica(api, config).start()
        try:
            await eventually(lambda: replica.server.serving, what="serving")
            # The first build serves the kept answer: no check could have answered yet.
            assert served(replica) == ["203.0.113.8"]
            await asyncio.sleep(timeout_s + 1)  # the checks time out: the answer stays
            assert served(replica) == ["203.0.113.8"]
            assert replica.server.controller.dns["api.kube.test"].error is not None
        finally:
            await replica.stop()

    asyncio.run(first())
    port = dns.port
    dns.stop()
    # The resolver is down: its port takes queries and never answers (each one times out).
    black_hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    black_hole.bind(("127.0.0.1", port))
    try:
        asyncio.run(restarted())
    finally:
        black_hole.close()
