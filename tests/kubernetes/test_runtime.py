"""dragoman's Kubernetes mode (KubernetesServer) against the in-process API server: sync
before serving, every kind's changes reaching the store and the build, debouncing, the EDS
fast path, outages, and two replicas sharing one Lease with only the leader writing status."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.kubernetes.runtime import join_all
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME, WatchedKind
from dragoman.runtime import memory
from dragoman.runtime.ops_server import OpsServer, _route
from tests.support.builders import (
    GATEWAY_V1,
    endpoint_slice,
    gateway,
    gateway_class,
    http_route,
    service,
)
from tests.support.harness import free_port
from tests.support.kube_replica import (
    FAST_WATCH,
    Replica,
    eventually,
    replica_config,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(90)

OTHER_CONTROLLER = "example.com/other-controller"


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2, too_large_wait=0.2) as server:
        yield server


def seed(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(service("web", 80, 8080))
    api.apply(endpoint_slice("web", 8080, "10.0.0.1"))
    api.apply(http_route("web", [("/", "web", 80)]))


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as probe:
        return probe.connect_ex((host, int(port))) == 0


def configuration_builds(replica: Replica) -> int:
    """Builds for configuration changes (not endpoints alone): full or incremental."""
    return sum(1 for update in replica.server.updates if update.kind in ("full", "incremental"))


def test_xds_is_served_only_after_every_kind_is_listed(api: KubeApiServer) -> None:
    seed(api)
    api.fail_next("GET", "/httproutes", 500, times=4)  # one kind's first list keeps failing
    address = f"127.0.0.1:{free_port()}"

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, address)).start()
        try:
            await eventually(lambda: api.request_count("list", "httproutes") >= 2)
            assert not replica.server.serving and not listening(address)
            assert "httproutes" in replica.server.ready() or "HTTPRoute" in replica.server.ready()
            await eventually(lambda: replica.server.serving, what="serving")
            assert listening(address)
            assert replica.server.ready() == ""
            # The first build already had everything: the route reached the backend.
            assert replica.server.updates[0].kind == "full"
            assert "default/web/80" in replica.dag.clusters
        finally:
            await replica.stop()
        assert not listening(address)

    run(scenario)


def test_changes_to_each_kind_reach_the_store_and_the_build(api: KubeApiServer) -> None:
    seed(api)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        store = replica.server.cache.store
        try:
            await eventually(lambda: replica.server.serving)
            # Service + EndpointSlice: a new cluster with endpoints.
            api.apply(service("api", 81, 9090))
            api.apply(endpoint_slice("api", 9090, "10.0.0.9"))
            api.apply(http_route("api", [("/api", "api", 81)]))
            await eventually(lambda: "default/api/81" in replica.dag.load_assignments)
            endpoints = replica.dag.load_assignments["default/api/81"].localities[0].endpoints
            assert [(e.address, e.port) for e in endpoints] == [("10.0.0.9", 9090)]
            # Update and delete.
            api.apply(service("api", 82, 9090))
            await eventually(lambda: ("default", "api") in store().services)
            await eventually(lambda: store().services[("default", "api")].ports[0].port == 82)
            api.delete("HTTPRoute", "api")
            await eventually(lambda: ("default", "api") not in store().http_routes)
            api.delete("Service", "api")
            await eventually(lambda: "default/api/81" not in replica.dag.clusters)
            # The other kinds the parser reads reach the store too.
            api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
            api.apply(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "ca", "namespace": "default"},
                    "data": {"ca.crt": "x"},
                }
            )
            api.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "tls", "namespace": "default"},
                    "type": "Opaque",
                    "data": {},
                }
            )
            api.apply(
                {
                    "apiVersion": GATEWAY_V1,
                    "kind": "ReferenceGrant",
                    "metadata": {"name": "grant", "namespace": "default"},
                    "spec": {
                        "from": [
                            {
                                "group": "gateway.networking.k8s.io",
                                "kind": "HTTPRoute",
                                "namespace": "shop",
                            }
                        ],
                        "to": [{"group": "", "kind": "Service"}],
                    },
                }
            )
            api.apply(
                {
                    "apiVersion": GATEWAY_V1,
                    "kind": "GRPCRoute",
                    "metadata": {"name": "rpc", "namespace": "default"},
                    "spec": {
                        "parentRefs": [{"name": "gw"}],
                        "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
                    },
                }
            )
            await eventually(lambda: ("", "shop") in store().namespaces, what="Namespace")
            await eventually(lambda: ("default", "ca") in store().config_maps, what="ConfigMap")
            await eventually(lambda: ("default", "tls") in store().secrets, what="Secret")
            await eventually(
                lambda: ("default", "grant") in store().reference_grants, what="ReferenceGrant"
            )
            await eventually(lambda: ("default", "rpc") in store().grpc_routes, what="GRPCRoute")
            # A Gateway goes with its GatewayClass: only classes naming us are served.
            assert "default/gw" in replica.dag.groups
            api.delete("GatewayClass", "dragoman")
            await eventually(lambda: "default/gw" not in replica.dag.groups, what="unserved")
            api.apply(gateway_class(controller=OTHER_CONTROLLER))
            await asyncio.sleep(0.5)
            assert "default/gw" not in replica.dag.groups
            api.apply(gateway_class())
            await eventually(lambda: "default/gw" in replica.dag.groups, what="served again")
        finally:
            await replica.stop()

    run(scenario)


def test_endpoint_changes_take_the_fast_path_and_bursts_are_debounced(
    api: KubeApiServer,
) -> None:
    seed(api)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving)
            await asyncio.sleep(0.6)  # past the holdoff of the first build
            before = len(replica.server.updates)
            api.apply(endpoint_slice("web", 8080, "10.0.0.1", "10.0.0.2"))
            await eventually(
                lambda: (
                    len(replica.dag.load_assignments["default/web/80"].localities[0].endpoints) == 2
                )
            )
            assert [u.kind for u in replica.server.updates[before:]] == ["endpoints"]

            builds = configuration_builds(replica)
            for index in range(30):
                api.apply(service(f"burst-{index}"))
            await eventually(lambda: len(replica.server.cache.store().services) == 31)
            await asyncio.sleep(0.7)
            # 30 changes, a handful of builds: one at once, then those that come sooner after
            # a build than half the time it took held off together. (A build of this world
            # takes about a millisecond: changes the watch hands over further apart than
            # that each make one, as a writer waiting for each would.)
            assert 1 <= configuration_builds(replica) - builds <= 10
        finally:
            await replica.stop()

    run(scenario)


def test_api_server_outage_keeps_serving_and_loses_no_update(api: KubeApiServer) -> None:
    seed(api)
    address = f"127.0.0.1:{free_port()}"

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, address)).start()
        try:
            await eventually(lambda: replica.server.serving)
            served = replica.server.controller.snapshots
            api.stop()
            api.apply(service("during", 80))  # straight to storage, while unreachable
            api.delete("HTTPRoute", "web")
            for _ in range(10):
                await asyncio.sleep(0.1)
                assert listening(address)  # Envoy keeps its control plane
                assert replica.server.controller.snapshots is served
                assert replica.server.ready() == "" and replica.server.live() == ""
            api.start()
            await eventually(lambda: ("default", "during") in replica.server.cache.store().services)
            await eventually(
                lambda: ("default", "web") not in replica.server.cache.store().http_routes
            )
        finally:
            await replica.stop()

    run(scenario)


def test_410_gone_after_compaction_relists(api: KubeApiServer) -> None:
    seed(api)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving)
            lists_before = api.request_count("list", "services")
            api.stop()
            api.delete("Service", "web")
            api.compact()
            api.start()
            await eventually(
                lambda: ("default", "web") not in replica.server.cache.store().services
            )
            assert api.request_count("list", "services") > lists_before
            await eventually(lambda: "default/web/80" not in replica.dag.clusters)
            # The watch that broke was started again, and counted for its kind only.
            restarts = replica.server.metrics.watch_restarts
            assert restarts.labels("Service")._value.get() >= 1
        finally:
            await replica.stop()

    run(scenario)


def _route_with_other_parent(api: KubeApiServer) -> dict[str, Any]:
    route = http_route("web", [("/", "web", 80)], parents=("gw", "elsewhere"))
    route["status"] = {
        "parents": [
            {
                "parentRef": {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": "elsewhere",
                },
                "controllerName": OTHER_CONTROLLER,
                "conditions": [
                    {
                        "type": "Accepted",
                        "status": "True",
                        "reason": "Accepted",
                        "message": "theirs",
                        "lastTransitionTime": "2029-01-01T00:00:00Z",
                    }
                ],
            }
        ]
    }
    return route


def _our_parents(api: KubeApiServer) -> list[dict[str, Any]]:
    route = api.get("HTTPRoute", "web") or {}
    return [
        p
        for p in (route.get("status") or {}).get("parents", [])
        if p["controllerName"] == DEFAULT_CONTROLLER_NAME
    ]


class _Unreachable:
    """A lease client for a replica cut off from the API server (its Lease expires)."""

    def get(self, *args: Any) -> Any:
        raise ConnectionError("unreachable")

    create = replace = get


def test_two_replicas_one_leader_writes_status_and_the_other_takes_over(
    api: KubeApiServer,
) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    # Another controller's Gateway, which the route is attached to as well.
    api.apply(gateway_class("other", OTHER_CONTROLLER))
    api.apply(gateway("elsewhere", 8080, "other"))
    api.apply(service("web", 80, 8080))
    api.apply(_route_with_other_parent(api))

    async def scenario() -> None:
        a = Replica(api, replica_config("replica-a")).start()
        await eventually(lambda: a.server.leading, what="a leads")
        b = Replica(api, replica_config("replica-b")).start()
        try:
            await eventually(lambda: b.server.serving, what="b serves")
            # The real computed status, written by the leader only.
            await eventually(lambda: _our_parents(api), what="route status")
            gateway_class_status = (api.get("GatewayClass", "dragoman") or {})["status"]
            assert [(c["type"], c["status"]) for c in gateway_class_status["conditions"]] == [
                ("Accepted", "True")
            ]
            gateway_status = (api.get("Gateway", "gw") or {})["status"]
            assert {c["type"]: c["status"] for c in gateway_status["conditions"]} == {
                "Accepted": "True",
                "Programmed": "True",
            }
            [ours] = _our_parents(api)
            assert ours["parentRef"]["name"] == "gw"
            assert {c["type"]: c["status"] for c in ours["conditions"]}["Accepted"] == "True"
            assert all(c["lastTransitionTime"] for c in ours["conditions"])
            route = api.get("HTTPRoute", "web") or {}
            theirs = [
                p for p in route["status"]["parents"] if p["controllerName"] == OTHER_CONTROLLER
            ]
            assert theirs == _route_with_other_parent(api)["status"]["parents"]
            assert not b.server.leading
            assert b.server.status.rounds == 0 and b.server.status.written == 0

            # Rebuilds that change no status write nothing.
            writes = api.request_count("update", "httproutes/status")
            api.apply(service("unrelated", 80))
            await eventually(lambda: ("default", "unrelated") in a.server.cache.store().services)
            await asyncio.sleep(0.5)
            assert api.request_count("update", "httproutes/status") == writes
            assert a.server.status.unchanged > 0

            # a is cut off from the Lease: it steps down, b takes over once the Lease
            # expires, and b re-publishes what a no longer can.
            a.server.elector.leases = _Unreachable()  # type: ignore[union-attr]
            await eventually(lambda: not a.server.leading, what="a steps down")
            route = api.get("HTTPRoute", "web") or {}
            route["status"]["parents"] = theirs  # our entry lost meanwhile
            api.apply(route)
            await eventually(lambda: b.server.leading, timeout=10, what="b takes over")
            await eventually(lambda: _our_parents(api), what="b re-publishes")
            await eventually(lambda: b.server.status.written >= 1, what="b's round counted")
            assert not a.server.leading
            lease = api.get("leases", "dragoman-leader") or {}
            assert lease["spec"]["holderIdentity"] == "replica-b"
            assert lease["spec"]["leaseTransitions"] == 1
        finally:
            await asyncio.gather(a.stop(), b.stop())

    run(scenario)


def test_gateway_class_flag_narrows_what_is_served(api: KubeApiServer) -> None:
    api.apply(gateway_class("dragoman"))
    api.apply(gateway_class("dragoman-internal"))
    api.apply(gateway("public", 8080, "dragoman"))
    api.apply(gateway("internal", 8081, "dragoman-internal"))

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, gateway_class="dragoman-internal")).start()
        try:
            await eventually(lambda: replica.server.serving)
            assert set(replica.dag.groups) - {""} == {"default/internal"}
        finally:
            await replica.stop()

    run(scenario)


def test_namespaces_flag_watches_only_those_namespaces(api: KubeApiServer) -> None:
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    api.apply(service("web"))
    shop = service("cart")
    shop["metadata"]["namespace"] = "shop"
    api.apply(shop)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, namespaces=("shop",))).start()
        try:
            await eventually(lambda: replica.server.serving)
            assert list(replica.server.cache.store().services) == [("shop", "cart")]
            names = {i.name for i in replica.server.informers}
            assert (
                "services in shop" in names and "gatewayclasses.gateway.networking.k8s.io" in names
            )
            assert api.request_count("list", "namespaces") == 1  # cluster-scoped: all of them
        finally:
            await replica.stop()

    run(scenario)


def test_kinds_the_parser_does_not_read_are_not_watched(api: KubeApiServer) -> None:
    # A kind with a line in the watch list but no parser
    # costs nothing: no informer, no request, no RBAC needed.
    widgets = WatchedKind("Widget", "example.com", ("v1",), "widgets")
    kinds = (KINDS_BY_NAME["Service"], widgets)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, kinds=kinds)).start()
        try:
            await eventually(lambda: replica.server.serving)
            assert [i.name for i in replica.server.informers] == ["services"]
        finally:
            await replica.stop()

    run(scenario)
    assert api.request_count("list", "/apis/example.com/v1/widgets") == 0


@pytest.mark.parametrize("plural", ["xbackends", "xbackendtrafficpolicies"])
def test_a_cluster_without_an_experimental_crd_is_served_and_ready(
    api: KubeApiServer, plural: str
) -> None:
    # An experimental channel's CRD (XBackend, XBackendTrafficPolicy) is not installed:
    # nothing to list, not an error.
    seed(api)
    api.withdraw_kind(plural)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving)
            assert "default/web/80" in replica.dag.clusters
            assert replica.server.ready() == ""
            assert plural not in replica.server.ready_notes()
        finally:
            await replica.stop()

    run(scenario)
    assert api.request_count("list", plural) >= 1  # it was looked for


def _conditions(status: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (status or {}).get("conditions", [])}


def test_a_brief_404_after_the_first_sync_does_not_drop_the_kind(api: KubeApiServer) -> None:
    seed(api)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving)
            assert "default/web/80" in replica.dag.clusters
            informers = len(replica.server.informers)
            await eventually(lambda: api.open_watches() == informers, what="every watch open")
            lists = api.request_count("list", "httproutes")
            # The API server answers 404 for HTTPRoutes for a moment (a CRD handler
            # restarting): list and watch, every version.
            api.fail_next(None, "/httproutes", 404, times=12)
            api.cut_watches()
            deadline = time.monotonic() + 10
            while api.failures.pending():
                assert ("default", "web") in replica.server.cache.store().http_routes
                assert "default/web/80" in replica.dag.clusters
                assert time.monotonic() < deadline, "the informer stopped asking"
                await asyncio.sleep(0.01)
            assert api.request_count("list", "httproutes") > lists
            api.apply(http_route("later", [("/later", "web", 80)]))
            await eventually(
                lambda: ("default", "later") in replica.server.cache.store().http_routes
            )
            assert "default/web/80" in replica.dag.clusters
        finally:
            await replica.stop()

    run(scenario)


def _not_served_gauge(replica: Replica, kind: str) -> float | None:
    return replica.server.metrics.registry.get_sample_value(
        "dragoman_kind_not_served", {"kind": kind}
    )


def test_a_kind_not_served_for_a_while_keeps_serving_its_last_state_and_says_so(
    api: KubeApiServer,
) -> None:
    seed(api)
    api.apply(http_route("doomed", [("/doomed", "web", 80)]))

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        routes = lambda: replica.server.cache.store().http_routes  # noqa: E731
        try:
            await eventually(lambda: replica.server.serving)
            api.delete("HTTPRoute", "doomed")  # a deletion seen before the outage
            await eventually(lambda: ("default", "doomed") not in routes())
            api.withdraw_kind("httproutes")  # 404 on every version, its watch ended
            await eventually(lambda: replica.server.ready_notes() != "", what="reported")
            assert (
                "httproutes.gateway.networking.k8s.io: not served by the API server"
                in replica.server.ready_notes()
            )
            assert replica.server.ready() == ""  # still ready: it serves its last state
            ops = OpsServer(
                "127.0.0.1:0",
                live=replica.server.live,
                ready=replica.server.ready,
                ready_notes=replica.server.ready_notes,
            )
            status, _, body = _route(ops, "/readyz")
            assert status == 200
            assert body.decode().startswith("ok\nhttproutes.gateway.networking.k8s.io: not served")
            assert _not_served_gauge(replica, "HTTPRoute") == 1
            assert _not_served_gauge(replica, "Service") == 0
            lists = api.request_count("list", "httproutes")
            for _ in range(30):  # three seconds of 404s, every probe refused
                await asyncio.sleep(0.1)
                assert ("default", "web") in routes()
                assert ("default", "doomed") not in routes()
                assert "default/web/80" in replica.dag.clusters
            assert api.request_count("list", "httproutes") > lists
            api.apply(http_route("during", [("/during", "web", 80)]))
            api.restore_kind("httproutes")
            back = time.monotonic()
            await eventually(lambda: ("default", "during") in routes(), timeout=10)
            assert time.monotonic() - back < 3.5  # listed again within the probe interval
            assert replica.server.ready_notes() == ""
            assert _not_served_gauge(replica, "HTTPRoute") == 0
        finally:
            await replica.stop()

    run(scenario)


def test_a_silent_watch_is_restarted_and_counted(api: KubeApiServer) -> None:
    seed(api)
    watch = dataclasses.replace(FAST_WATCH, watch_silence_limit=1.0)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None, watch=watch)).start()
        try:
            await eventually(lambda: replica.server.serving)
            informers = len(replica.server.informers)
            await eventually(lambda: api.open_watches() == informers, what="every watch open")
            api.silence_next_watches("/services?", times=1)
            api.cut_watches()
            await eventually(lambda: api.outages.silences_pending() == 0)
            silent_from = time.monotonic()
            api.apply(service("meanwhile", 80))
            await eventually(
                lambda: ("default", "meanwhile") in replica.server.cache.store().services
            )
            assert time.monotonic() - silent_from < 3.0
            silences = replica.server.metrics.registry.get_sample_value(
                "dragoman_watch_silences_total", {"kind": "Service"}
            )
            assert silences == 1
        finally:
            await replica.stop()

    run(scenario)


def test_a_route_that_can_no_longer_be_read_is_no_longer_accepted(api: KubeApiServer) -> None:
    api.apply(gateway_class())
    api.apply(gateway())
    api.apply(gateway_class("other", OTHER_CONTROLLER))
    api.apply(gateway("elsewhere", 8080, "other"))
    api.apply(service("web", 80, 8080))
    api.apply(_route_with_other_parent(api))

    def accepted() -> str:
        [ours] = _our_parents(api) or [{}]
        return _conditions(ours).get("Accepted", ("", ""))[0]

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: accepted() == "True", what="accepted first")
            route = api.get("HTTPRoute", "web") or {}
            # A value the API server took but dragoman cannot read.
            route["spec"]["rules"][0]["backendRefs"][0]["port"] = "eighty"
            api.apply(route)
            await eventually(lambda: accepted() == "False", what="no longer accepted")
            assert "default/web/80" not in replica.dag.clusters  # not served either
            stored = api.get("HTTPRoute", "web") or {}
            [ours] = _our_parents(api)
            assert ours["parentRef"]["name"] == "gw"
            [condition] = ours["conditions"]
            assert condition["reason"] == "UnsupportedValue"
            assert "spec.rules[0].backendRefs[0].port" in condition["message"]
            assert condition["observedGeneration"] == stored["metadata"]["generation"]
            theirs = [
                p for p in stored["status"]["parents"] if p["controllerName"] == OTHER_CONTROLLER
            ]
            assert theirs == _route_with_other_parent(api)["status"]["parents"]
            # Fixed: accepted again.
            route = api.get("HTTPRoute", "web") or {}
            route["spec"]["rules"][0]["backendRefs"][0]["port"] = 80
            api.apply(route)
            await eventually(lambda: accepted() == "True", what="accepted again")
        finally:
            await replica.stop()

    run(scenario)


def test_a_gateway_no_longer_ours_is_handed_back(api: KubeApiServer) -> None:
    seed(api)

    def gateway_status() -> dict[str, Any]:
        return (api.get("Gateway", "gw") or {}).get("status") or {}

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(
                lambda: _conditions(gateway_status()).get("Programmed", ("",))[0] == "True"
            )
            await eventually(lambda: _our_parents(api), what="route status")
            assert gateway_status()["listeners"]
            api.delete("GatewayClass", "dragoman")
            waiting = {"Accepted": ("Unknown", "Pending"), "Programmed": ("Unknown", "Pending")}
            await eventually(lambda: _conditions(gateway_status()) == waiting, what="handed back")
            assert gateway_status()["listeners"] == []
            await eventually(lambda: not _our_parents(api), what="route entries withdrawn")

            # The class comes back as another controller's, which writes its own status.
            api.apply(gateway_class(controller=OTHER_CONTROLLER))
            theirs = api.get("Gateway", "gw") or {}
            theirs["status"] = {
                "conditions": [
                    {
                        "type": "Accepted",
                        "status": "True",
                        "reason": "Accepted",
                        "message": "theirs",
                        "lastTransitionTime": "2029-01-01T00:00:00Z",
                    }
                ]
            }
            api.apply(theirs)
            writes = api.request_count("update", "gateways/status")
            await asyncio.sleep(0.8)
            assert gateway_status() == theirs["status"]
            assert api.request_count("update", "gateways/status") == writes

            # Ours again: served and written again.
            api.delete("GatewayClass", "dragoman")
            api.apply(gateway_class())
            await eventually(
                lambda: _conditions(gateway_status()).get("Programmed", ("",))[0] == "True",
                what="ours again",
            )
        finally:
            await replica.stop()

    run(scenario)


def test_a_foreign_gateways_status_is_left_alone(api: KubeApiServer) -> None:
    seed(api)
    api.apply(gateway_class("other", OTHER_CONTROLLER))
    foreign = gateway("foreign", 9090, "other")
    foreign["status"] = {
        "conditions": [
            {
                "type": "Accepted",
                "status": "False",
                "reason": "Invalid",
                "message": "theirs",
                "lastTransitionTime": "2029-01-01T00:00:00Z",
            }
        ]
    }
    api.apply(foreign)
    # Tripwires: a request for the foreign Gateway or its class would take one of these.
    for path in ("/gateways/foreign", "/gatewayclasses/other"):
        api.fail_next(None, path, 500)

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a")).start()
        try:
            await eventually(lambda: replica.server.status.written >= 3, what="our statuses")
            api.apply(service("unrelated"))  # one more build and status round
            await eventually(
                lambda: ("default", "unrelated") in replica.server.cache.store().services
            )
            await asyncio.sleep(0.5)
            assert (api.get("Gateway", "foreign") or {})["status"] == foreign["status"]
            assert (api.get("GatewayClass", "other") or {}).get("status") is None
            assert api.failures.pending() == 2  # neither was read nor written
        finally:
            await replica.stop()

    run(scenario)


def test_lease_and_status_requests_are_bounded_by_the_lease_timing(api: KubeApiServer) -> None:
    config = replica_config("replica-a")
    replica = Replica(api, config)
    try:
        assert config.lease is not None
        elector = replica.server.elector
        assert elector is not None
        budget = (config.lease.renew_deadline - config.lease.retry_period) / 2
        assert elector.leases.timeout == config.lease.request_timeout <= budget
        assert replica.server._writer.client.timeout == config.lease.request_timeout
    finally:
        replica.api_client.close()


class _StuckInformer:
    """An informer whose thread does not end when asked to."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.release = threading.Event()
        self.thread = threading.Thread(target=self.release.wait, args=(10,), daemon=True)
        self.thread.start()

    def join(self, timeout: float = 5.0) -> None:
        self.thread.join(timeout)

    def is_alive(self) -> bool:
        return self.thread.is_alive()


def test_shutdown_waits_for_every_informer_at_once_within_one_bound() -> None:
    stuck = [_StuckInformer(f"kind-{index}") for index in range(4)]
    try:
        started = time.monotonic()
        running = join_all(stuck, 0.3)  # type: ignore[arg-type]
        elapsed = time.monotonic() - started
        assert running == stuck
        assert elapsed < 0.6  # one bound for all, not 0.3 s each
    finally:
        for informer in stuck:
            informer.release.set()
    assert join_all(stuck, 1.0) == []  # type: ignore[arg-type]


def test_gateway_addresses_follow_the_envoy_services_load_balancer(api: KubeApiServer) -> None:
    """--gateway-address and --envoy-service: the Gateway's written status.addresses are the
    operator's, then the load balancer's; they follow the Service's status as it changes."""
    from prometheus_client.parser import text_string_to_metric_families

    from dragoman.dag.options import BuildOptions

    seed(api)
    envoy = service("envoy", 80, 8080)
    envoy["spec"]["type"] = "LoadBalancer"
    api.apply(envoy)  # no load balancer address yet
    options = BuildOptions(
        gateway_addresses=("gw.example.com",), address_service=("default", "envoy")
    )

    def addresses() -> list[dict[str, str]] | None:
        status = (api.get("Gateway", "gw") or {}).get("status") or {}
        return status.get("addresses")

    async def scenario() -> None:
        replica = Replica(api, replica_config("replica-a", build_options=options)).start()
        try:
            await eventually(lambda: addresses() is not None, what="addresses written")
            assert addresses() == [{"type": "Hostname", "value": "gw.example.com"}]
            envoy["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
            api.apply(envoy)
            await eventually(lambda: len(addresses() or ()) == 2, what="the IP follows")
            assert addresses() == [
                {"type": "Hostname", "value": "gw.example.com"},
                {"type": "IPAddress", "value": "203.0.113.10"},
            ]
            envoy["status"] = {"loadBalancer": {"ingress": [{"hostname": "lb.example.net"}]}}
            api.apply(envoy)
            await eventually(
                lambda: (addresses() or [{}])[-1].get("value") == "lb.example.net",
                what="the hostname replaces the IP",
            )
            assert addresses() == [
                {"type": "Hostname", "value": "gw.example.com"},
                {"type": "Hostname", "value": "lb.example.net"},
            ]
            gateway_status = (api.get("Gateway", "gw") or {})["status"]
            assert {c["type"]: c["status"] for c in gateway_status["conditions"]} == {
                "Accepted": "True",
                "Programmed": "True",
            }
            # Kubernetes mode's metrics: leadership and the status writes made.
            scraped = {
                family.name: family.samples[0].value
                for family in text_string_to_metric_families(
                    replica.server.metrics.exposition().decode()
                )
                if family.samples
            }
            assert scraped["dragoman_leader"] == 1
            assert replica.server.metrics.status_writes.labels("written")._value.get() >= 3
        finally:
            await replica.stop()

    run(scenario)


def test_freed_memory_is_handed_back_once_serving_is_quiet(
    api: KubeApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in manifest mode: what the first build and its responses freed goes back to the
    system (malloc_trim) once nothing has changed for an interval, not while changes go on."""
    trims: list[float] = []
    monkeypatch.setattr(memory, "_malloc_trim", lambda: lambda: trims.append(time.monotonic()))
    seed(api)

    async def scenario() -> None:
        replica = Replica(api, replica_config(None)).start()
        try:
            await eventually(lambda: replica.server.serving)
            await eventually(lambda: len(trims) >= 1, timeout=30, what="a trim")
        finally:
            await replica.stop()

    run(scenario)
