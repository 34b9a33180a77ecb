"""The in-process Kubernetes API server, driven by the official `kubernetes` client.

What the client does with the server's answers (checked here, relied on elsewhere):
- A watch from a compacted resourceVersion: the server streams one ERROR event (Status
  410 Expired); `Watch.stream` retries once from the same resourceVersion when no
  `timeout_seconds` was given, then raises `ApiException(status=410)`. With
  `timeout_seconds` it raises at once. Recovery (relist) is the caller's job.
- BOOKMARK events are yielded with the raw object only (`object` is a dict holding just
  metadata.resourceVersion), and they advance `Watch.resource_version`.
- A stream the server ends cleanly is re-opened by `Watch.stream` from the last seen
  resourceVersion unless `timeout_seconds` was given; a cut connection is not: urllib3's
  `ProtocolError` escapes the generator.
- With the server down, calls fail at once with urllib3's `MaxRetryError` (connection
  refused), not an `ApiException`.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient

from tests.support.builders import http_route, service
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(30)

GATEWAY = "gateway.networking.k8s.io"
_END = object()


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.1, too_large_wait=0.2) as server:
        yield server


@pytest.fixture
def api_client(api: KubeApiServer) -> Iterator[client.ApiClient]:
    api_client = client.ApiClient(api.client_configuration())
    yield api_client
    api_client.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


class BackgroundWatch:
    """Runs `Watch().stream(...)` in a thread; events, then how it ended, go to a queue."""

    def __init__(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.watch = watch.Watch()
        self.events: queue.Queue[Any] = queue.Queue()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(func, args, kwargs))
        self._thread.start()

    def _run(self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict) -> None:
        try:
            for event in self.watch.stream(func, *args, **kwargs):
                self.events.put(event)
        except Exception as failure:  # the test inspects whatever ended the stream
            self.error = failure
        finally:
            self.events.put(_END)

    def next(self, timeout: float = 5.0) -> Any:
        return self.events.get(timeout=timeout)

    def until(self, last: Callable[[dict], bool], timeout: float = 5.0) -> list[dict]:
        seen = []
        while True:
            event = self.next(timeout)
            assert event is not _END, f"stream ended early: {self.error!r}; saw {seen}"
            seen.append(event)
            if last(event):
                return seen

    def rest(self, timeout: float = 5.0) -> list[dict]:
        """Every event up to the end of the stream."""
        seen = []
        while (event := self.next(timeout)) is not _END:
            seen.append(event)
        return seen

    def join(self, timeout: float = 5.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive()

    def stop(self) -> None:
        """Stops from outside, as a controller shutting down would (errors are expected)."""
        self.watch.stop()
        self.join()


def error_body(failure: ApiException) -> dict[str, Any]:
    return json.loads(failure.body)


# --------------------------------------------------------------------------- CRUD


def test_create_get_list_replace_delete_round_trip(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_service(
        "default", service("web", namespace=None, labels={"app": "web"})
    )
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.generation is None  # Services keep no generation
    assert created.spec.cluster_ip == created.spec.cluster_ips[0]
    assert created.spec.ports[0].target_port == 80 and created.spec.ports[0].protocol == "TCP"

    fetched = core.read_namespaced_service("web", "default")
    assert fetched.metadata.resource_version == created.metadata.resource_version

    core.create_namespace({"metadata": {"name": "other"}})
    core.create_namespaced_service("other", service("db", namespace=None, labels={"app": "db"}))
    everywhere = core.list_service_for_all_namespaces()
    names = [(s.metadata.namespace, s.metadata.name) for s in everywhere.items]
    assert names == [("default", "web"), ("other", "db")]
    assert int(everywhere.metadata.resource_version) >= int(created.metadata.resource_version)
    assert [s.metadata.name for s in core.list_namespaced_service("other").items] == ["db"]

    fetched.spec.ports[0].port = 8080
    replaced = core.replace_namespaced_service("web", "default", fetched)
    assert replaced.spec.ports[0].port == 8080
    assert replaced.spec.cluster_ip == created.spec.cluster_ip
    assert int(replaced.metadata.resource_version) > int(fetched.metadata.resource_version)

    deleted = core.delete_namespaced_service("web", "default")
    assert deleted.metadata.name == "web"  # Services answer a delete with the object
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_service("web", "default")
    assert missing.value.status == 404
    assert error_body(missing.value) | {"details": None} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'services "web" not found',
        "reason": "NotFound",
        "code": 404,
        "details": None,
    }


def test_create_errors_match_the_real_server(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "settings"}})
    with pytest.raises(ApiException) as duplicate:
        core.create_namespaced_config_map("default", {"metadata": {"name": "settings"}})
    assert duplicate.value.status == 409
    assert error_body(duplicate.value)["reason"] == "AlreadyExists"

    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_config_map("nowhere", {"metadata": {"name": "settings"}})
    assert no_namespace.value.status == 404
    assert error_body(no_namespace.value)["message"] == 'namespaces "nowhere" not found'

    with pytest.raises(ApiException) as unnamed:
        core.create_namespaced_config_map("default", {"metadata": {}})
    assert unnamed.value.status == 422
    assert error_body(unnamed.value)["reason"] == "Invalid"


def test_replace_with_a_stale_resource_version_conflicts(core: client.CoreV1Api) -> None:
    first = core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    first.data = {"a": "1"}
    core.replace_namespaced_config_map("c", "default", first)
    first.data = {"a": "2"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("c", "default", first)
    assert stale.value.status == 409
    status = error_body(stale.value)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Conflict", 409)
    assert "the object has been modified" in status["message"]
    assert core.read_namespaced_config_map("c", "default").data == {"a": "1"}


def test_patch_content_types(core: client.CoreV1Api, custom: client.CustomObjectsApi) -> None:
    core.create_namespaced_service("default", service("web", namespace=None, labels={"app": "web"}))
    # A dict body goes out as a strategic merge patch, a list as a JSON patch.
    merged = core.patch_namespaced_service("web", "default", {"metadata": {"labels": {"x": "y"}}})
    assert merged.metadata.labels == {"app": "web", "x": "y"}
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {"note": "hi"}}]
    patched = core.patch_namespaced_service("web", "default", ops)
    assert patched.metadata.annotations == {"note": "hi"}

    custom.create_namespaced_custom_object(
        GATEWAY,
        "v1",
        "default",
        "httproutes",
        http_route("r", "web", 80, namespace=None, hostnames=["a"]),
    )
    with pytest.raises(ApiException) as unsupported:
        custom.patch_namespaced_custom_object(
            GATEWAY,
            "v1",
            "default",
            "httproutes",
            "r",
            {"spec": {"hostnames": ["b"]}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert unsupported.value.status == 415  # custom resources take no strategic merge


def test_finalizers_delete_collection_and_namespace_deletion(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespace({"metadata": {"name": "team"}})
    held = {"metadata": {"name": "held", "finalizers": ["example.com/cleanup"]}}
    core.create_namespaced_config_map("team", held)
    marked = core.delete_namespaced_config_map("held", "team")  # 202: still there
    assert marked["metadata"]["deletionTimestamp"]
    current = core.read_namespaced_config_map("held", "team")
    current.metadata.finalizers = []
    core.replace_namespaced_config_map("held", "team", current)  # the last finalizer goes
    assert api.get("configmaps", "held", namespace="team") is None

    for name, tier in (("a", "x"), ("b", "y"), ("c", "x")):
        core.create_namespaced_config_map(
            "team", {"metadata": {"name": name, "labels": {"tier": tier}}}
        )
    core.delete_collection_namespaced_config_map("team", label_selector="tier=x")
    assert [c["metadata"]["name"] for c in api.list("configmaps", "team")] == ["b"]

    core.delete_namespace("team")  # takes what is in it along
    assert api.list("configmaps", "team") == []
    assert api.get("namespaces", "team") is None


# ------------------------------------------------------------------ list & watch


def test_list_pages_are_one_consistent_snapshot(api: KubeApiServer, core: client.CoreV1Api) -> None:
    for index in range(5):
        labels = {"tier": "front" if index % 2 else "back"}
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": f"cm-{index}", "labels": labels}}
        )
    first = core.list_namespaced_config_map("default", limit=2)
    assert [c.metadata.name for c in first.items] == ["cm-0", "cm-1"]
    assert first.metadata.remaining_item_count == 3
    core.create_namespaced_config_map("default", {"metadata": {"name": "cm-late"}})
    core.delete_namespaced_config_map("cm-4", "default")

    second = core.list_namespaced_config_map(
        "default", limit=2, _continue=first.metadata.var_continue
    )
    third = core.list_namespaced_config_map(
        "default", limit=2, _continue=second.metadata.var_continue
    )
    assert [c.metadata.name for c in second.items + third.items] == ["cm-2", "cm-3", "cm-4"]
    assert third.metadata.var_continue is None
    assert {p.metadata.resource_version for p in (first, second, third)} == {
        first.metadata.resource_version
    }

    api.compact()
    with pytest.raises(ApiException) as expired:
        core.list_namespaced_config_map("default", limit=2, _continue=first.metadata.var_continue)
    assert expired.value.status == 410
    assert error_body(expired.value)["reason"] == "Expired"


def test_label_and_field_selectors(core: client.CoreV1Api) -> None:
    for name, tier in (("a", "front"), ("b", "back"), ("c", "front")):
        core.create_namespaced_config_map(
            "default", {"metadata": {"name": name, "labels": {"tier": tier}}}
        )

    def names(**selectors: str) -> list[str]:
        listed = core.list_namespaced_config_map("default", **selectors)
        return [c.metadata.name for c in listed.items]

    assert names(label_selector="tier=front") == ["a", "c"]
    assert names(label_selector="tier!=front") == ["b"]
    assert names(label_selector="tier in (back,side)") == ["b"]
    assert names(field_selector="metadata.name=c") == ["c"]
    assert names(label_selector="tier=front", field_selector="metadata.name!=a") == ["c"]
    with pytest.raises(ApiException) as unsupported:
        names(field_selector="data.key=x")
    assert unsupported.value.status == 400


def test_watch_from_a_list_sees_each_later_change_once_in_order(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    listed = core.list_namespaced_service("default")
    start = int(listed.metadata.resource_version)
    core.create_namespaced_service(
        "default", service("web", namespace=None, labels={"app": "web"})
    )  # before the watch: replayed

    stream = BackgroundWatch(
        core.list_namespaced_service,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=1,
    )
    wait_until(lambda: api.open_watches() == 1)
    core.patch_namespaced_service("web", "default", {"metadata": {"labels": {"v": "2"}}})
    core.create_namespace({"metadata": {"name": "elsewhere"}})
    core.create_namespaced_service(
        "elsewhere", service("unseen", namespace=None, labels={"app": "unseen"})
    )
    core.delete_namespaced_service("web", "default")

    events = stream.rest()  # the stream ends at timeoutSeconds
    stream.join()
    assert stream.error is None
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "web"),
        ("MODIFIED", "web"),
        ("DELETED", "web"),
    ]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert start < versions[0] < versions[1] < versions[2]
    assert events[1]["object"].metadata.labels == {"app": "web", "v": "2"}


def test_watch_without_resource_version_starts_with_current_state(
    api: KubeApiServer, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        GATEWAY,
        "v1",
        "default",
        "httproutes",
        http_route("r", "web", 80, namespace=None, hostnames=["a"]),
    )
    stream = BackgroundWatch(
        custom.list_namespaced_custom_object, GATEWAY, "v1", "default", "httproutes"
    )
    first = stream.next()
    stream.stop()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "r")
    assert first["object"]["apiVersion"] == f"{GATEWAY}/v1"


def test_bookmarks_carry_the_current_resource_version(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    listed = core.list_namespaced_config_map("default")
    core.create_namespace({"metadata": {"name": "busy"}})  # a change no configmap watch sees
    stream = BackgroundWatch(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
    )
    events = [stream.next(), stream.next()]
    stream.stop()
    assert [e["type"] for e in events] == ["BOOKMARK", "BOOKMARK"]
    assert events[-1]["object"] == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": str(api.resource_version)},
    }
    assert stream.watch.resource_version == str(api.resource_version)


def test_streaming_list_ends_its_initial_events_with_a_bookmark(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    stream = BackgroundWatch(
        core.list_namespaced_config_map,
        "default",
        send_initial_events=True,
        resource_version_match="NotOlderThan",
        allow_watch_bookmarks=True,
    )
    added, end_of_list = stream.next(), stream.next()
    stream.stop()
    assert (added["type"], added["object"].metadata.name) == ("ADDED", "c")
    assert end_of_list["type"] == "BOOKMARK"
    annotations = end_of_list["object"]["metadata"]["annotations"]
    assert annotations == {"k8s.io/initial-events-end": "true"}


def test_watch_label_selector_turns_relabels_into_added_and_deleted(
    api: KubeApiServer, api_client: client.ApiClient
) -> None:
    discovery = client.DiscoveryV1Api(api_client)
    slice_body = {
        "metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"port": 8080}],
    }
    created = discovery.create_namespaced_endpoint_slice("default", slice_body)
    assert created.metadata.generation == 1
    assert (created.ports[0].protocol, created.ports[0].name) == ("TCP", "")

    stream = BackgroundWatch(
        discovery.list_namespaced_endpoint_slice,
        "default",
        label_selector="kubernetes.io/service-name=web",
        resource_version=created.metadata.resource_version,
        timeout_seconds=1,
    )
    wait_until(lambda: api.open_watches() == 1)
    created.endpoints[0].addresses = ["10.0.0.2"]
    moved = discovery.replace_namespaced_endpoint_slice("web-abc", "default", created)
    assert moved.metadata.generation == 2
    discovery.patch_namespaced_endpoint_slice(
        "web-abc", "default", {"metadata": {"labels": {"kubernetes.io/service-name": "api"}}}
    )
    discovery.patch_namespaced_endpoint_slice(
        "web-abc", "default", {"metadata": {"labels": {"kubernetes.io/service-name": "web"}}}
    )
    events = stream.rest()
    stream.join()
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED", "ADDED"]


def test_compacted_history_expires_old_watches(api: KubeApiServer, core: client.CoreV1Api) -> None:
    old = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    api.compact()

    with pytest.raises(ApiException) as bounded:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=1
            )
        )
    assert bounded.value.status == 410
    assert "too old resource version" in bounded.value.reason

    api.reset_counts()
    with pytest.raises(ApiException) as unbounded:
        list(watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=old))
    assert unbounded.value.status == 410
    assert api.request_count("watch", "configmaps") == 2  # the client retried once

    # On the wire: a 200 whose only event is an ERROR carrying a 410 Status.
    response = core.list_namespaced_config_map(
        "default", watch=True, resource_version=old, timeout_seconds=1, _preload_content=False
    )
    assert response.status == 200
    lines = response.read().decode().splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": f"too old resource version: {old} ({api.resource_version})",
                "reason": "Expired",
                "code": 410,
            },
        }
    ]


def test_watch_from_the_future_times_out_with_504(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    ahead = str(api.resource_version + 100)
    with pytest.raises(ApiException) as too_large:
        list(
            watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=ahead,
                timeout_seconds=1,
            )
        )
    assert too_large.value.status == 504


def test_cut_watches_breaks_open_streams(api: KubeApiServer, core: client.CoreV1Api) -> None:
    stream = BackgroundWatch(core.list_namespaced_config_map, "default", timeout_seconds=10)
    wait_until(lambda: api.open_watches() == 1)
    assert api.cut_watches() == 1
    assert stream.rest() == []
    stream.join()
    assert isinstance(stream.error, urllib3.exceptions.ProtocolError)
    # The server's handler thread notices the cut a moment after the client does.
    wait_until(lambda: api.open_watches() == 0)
    core.list_namespaced_config_map("default")  # the server itself is fine


def test_client_reopens_streams_the_server_ends() -> None:
    with KubeApiServer(default_watch_timeout=0.3) as api:
        core = client.CoreV1Api(client.ApiClient(api.client_configuration()))
        listed = core.list_namespaced_config_map("default")
        stream = BackgroundWatch(
            core.list_namespaced_config_map,
            "default",
            resource_version=listed.metadata.resource_version,
        )
        names = []
        for index in range(3):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{index}"}})
            names.append(stream.next()["object"].metadata.name)
            time.sleep(0.35)  # past the server's watch timeout
        stream.stop()
        assert names == ["c0", "c1", "c2"]
        assert api.request_count("watch", "configmaps") >= 3


def test_stop_refuses_connections_and_start_brings_the_same_data_back(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    before = core.list_namespaced_config_map("default").metadata.resource_version
    stream = BackgroundWatch(
        core.list_namespaced_config_map, "default", resource_version=before, timeout_seconds=10
    )
    wait_until(lambda: api.open_watches() == 1)
    port = api.port

    api.stop()
    stream.rest()
    stream.join()
    assert isinstance(stream.error, urllib3.exceptions.ProtocolError)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        core.list_namespaced_config_map("default")

    api.start()
    assert api.port == port
    after = core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in after.items] == ["kept"]
    assert after.metadata.resource_version == before
    # History survived too: a watch resumes from the pre-outage resourceVersion.
    core.create_namespaced_config_map("default", {"metadata": {"name": "new"}})
    resumed = BackgroundWatch(core.list_namespaced_config_map, "default", resource_version=before)
    event = resumed.next()
    resumed.stop()
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "new")


# ------------------------------------------------------------- status subresource


def test_custom_resource_status_subresource_and_generation(
    custom: client.CustomObjectsApi,
) -> None:
    body = http_route(
        "r",
        "web",
        80,
        namespace=None,
        hostnames=["a.example"],
        status={"parents": [{"controllerName": "x"}]},
    )
    created = custom.create_namespaced_custom_object(GATEWAY, "v1", "default", "httproutes", body)
    assert "status" not in created  # status is dropped on create
    assert created["metadata"]["generation"] == 1

    status = {"parents": [{"controllerName": "dragoman.dev/gateway", "conditions": []}]}
    patched = custom.patch_namespaced_custom_object_status(
        GATEWAY,
        "v1",
        "default",
        "httproutes",
        "r",
        {"spec": {"hostnames": ["ignored"]}, "status": status},
    )
    assert patched["status"] == status
    assert patched["spec"] == body["spec"] and body["spec"]["hostnames"] == ["a.example"]
    assert patched["metadata"]["generation"] == 1
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])

    patched["spec"]["hostnames"] = ["b.example"]
    patched["status"] = {"parents": []}  # ignored by the main resource
    replaced = custom.replace_namespaced_custom_object(
        GATEWAY, "v1", "default", "httproutes", "r", patched
    )
    assert replaced["status"] == status
    assert replaced["metadata"]["generation"] == 2

    replaced["metadata"]["labels"] = {"team": "edge"}
    relabelled = custom.replace_namespaced_custom_object(
        GATEWAY, "v1", "default", "httproutes", "r", replaced
    )
    assert relabelled["metadata"]["generation"] == 2  # metadata-only change

    unchanged = custom.replace_namespaced_custom_object(
        GATEWAY, "v1", "default", "httproutes", "r", relabelled
    )
    assert unchanged["metadata"]["resourceVersion"] == relabelled["metadata"]["resourceVersion"]

    with pytest.raises(ApiException) as stale:
        custom.patch_namespaced_custom_object_status(
            GATEWAY,
            "v1",
            "default",
            "httproutes",
            "r",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "status": {}},
        )
    assert stale.value.status == 409


def test_service_status_subresource(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_service(
        "default", service("lb", namespace=None, labels={"app": "lb"}, service_type="LoadBalancer")
    )
    assert created.spec.ports[0].node_port >= 30000
    created.status.load_balancer.ingress = [{"ip": "192.0.2.10"}]
    created.spec.selector = {"app": "ignored"}
    updated = core.replace_namespaced_service_status("lb", "default", created)
    assert updated.status.load_balancer.ingress[0].ip == "192.0.2.10"
    assert updated.spec.selector == {"app": "lb"}

    updated.spec.selector = {"app": "new"}
    updated.status.load_balancer.ingress = []
    replaced = core.replace_namespaced_service("lb", "default", updated)
    assert replaced.spec.selector == {"app": "new"}
    assert replaced.status.load_balancer.ingress[0].ip == "192.0.2.10"


def test_leases_for_leader_election(api_client: client.ApiClient) -> None:
    leases = client.CoordinationV1Api(api_client)
    lease = {
        "metadata": {"name": "dragoman-leader"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    leases.create_namespaced_lease("default", lease)
    seen_by_a = leases.read_namespaced_lease("dragoman-leader", "default")
    seen_by_b = leases.read_namespaced_lease("dragoman-leader", "default")

    seen_by_a.spec.lease_transitions = 0
    leases.replace_namespaced_lease("dragoman-leader", "default", seen_by_a)
    seen_by_b.spec.holder_identity = "b"
    with pytest.raises(ApiException) as lost:
        leases.replace_namespaced_lease("dragoman-leader", "default", seen_by_b)
    assert lost.value.status == 409
    assert leases.read_namespaced_lease("dragoman-leader", "default").spec.holder_identity == "a"

    # Leases may be created by PUT, as the real strategy allows.
    made = leases.replace_namespaced_lease(
        "other", "default", {"metadata": {"name": "other"}, "spec": {"holderIdentity": "c"}}
    )
    assert made.metadata.uid


# -------------------------------------------------- Gateway API, discovery, set-up


def test_gateway_api_scopes_and_versions(
    api: KubeApiServer, custom: client.CustomObjectsApi
) -> None:
    gateway_class = {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "dragoman"},
        "spec": {"controllerName": "dragoman.dev/gateway"},
    }
    custom.create_cluster_custom_object(GATEWAY, "v1", "gatewayclasses", gateway_class)
    listed = custom.list_cluster_custom_object(GATEWAY, "v1", "gatewayclasses")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["dragoman"]
    assert "namespace" not in listed["items"][0]["metadata"]

    grant = {
        "apiVersion": f"{GATEWAY}/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "allow"},
        "spec": {"from": [], "to": []},
    }
    custom.create_namespaced_custom_object(GATEWAY, "v1beta1", "default", "referencegrants", grant)
    as_v1 = custom.get_namespaced_custom_object(
        GATEWAY, "v1", "default", "referencegrants", "allow"
    )
    assert as_v1["apiVersion"] == f"{GATEWAY}/v1"

    api.apply(
        http_route("seeded", "web", 80, namespace=None, hostnames=["c.example"])
        | {"metadata": {"name": "seeded", "namespace": "ns"}}
    )
    everywhere = custom.list_cluster_custom_object(GATEWAY, "v1", "httproutes")
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]] == [
        ("ns", "seeded")
    ]
    assert api.delete("HTTPRoute", "seeded", namespace="ns")
    assert api.get("httproutes", "seeded", namespace="ns") is None


def test_discovery_is_enough_for_the_dynamic_client(
    api_client: client.ApiClient, tmp_path: Path
) -> None:
    assert client.VersionApi(api_client).get_code().git_version.startswith("v1.")
    assert client.CoreApi(api_client).get_api_versions().versions == ["v1"]
    groups = {g.name: g for g in client.ApisApi(api_client).get_api_versions().groups}
    assert groups[GATEWAY].preferred_version.version == "v1"

    dynamic = DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
    routes = dynamic.resources.get(api_version=f"{GATEWAY}/v1", kind="HTTPRoute")
    routes.create(
        body=http_route("r", "web", 80, namespace=None, hostnames=["a.example"]),
        namespace="default",
    )
    assert [item.metadata.name for item in routes.get(namespace="default").items] == ["r"]


def test_kubeconfig_and_authentication(api: KubeApiServer, tmp_path: Path) -> None:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    from_file = config.new_client_from_config(config_file=str(kubeconfig))
    names = [n.metadata.name for n in client.CoreV1Api(from_file).list_namespace().items]
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]

    anonymous = api.client_configuration()
    anonymous.api_key = {}
    with pytest.raises(ApiException) as unauthorized:
        client.CoreV1Api(client.ApiClient(anonymous)).list_namespace()
    assert unauthorized.value.status == 401


def test_injected_failures_and_request_counts(api: KubeApiServer, core: client.CoreV1Api) -> None:
    api.fail_next("GET", "/namespaces/default/services", 503)
    with pytest.raises(ApiException) as unavailable:
        core.list_namespaced_service("default")
    assert unavailable.value.status == 503
    assert core.list_namespaced_service("default").items == []
    assert api.request_count("list", "services") == 2

    api.fail_next(None, "/status", 500, times=2)
    core.create_namespaced_service("default", service("web", namespace=None, labels={"app": "web"}))
    body = {"status": {"loadBalancer": {}}}
    for _ in range(2):
        with pytest.raises(ApiException):
            core.patch_namespaced_service_status("web", "default", body)
    core.patch_namespaced_service_status("web", "default", body)
    assert api.request_count("patch", "services/status") == 3


def test_close_leaves_no_thread_behind() -> None:
    before = set(threading.enumerate())
    server = KubeApiServer()
    core = client.CoreV1Api(client.ApiClient(server.client_configuration()))
    stream = BackgroundWatch(core.list_namespaced_config_map, "default", timeout_seconds=30)
    wait_until(lambda: server.open_watches() == 1)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 2
    stream.rest()
    stream.join()
    assert set(threading.enumerate()) <= before


def test_a_silenced_watch_answers_200_then_sends_nothing_until_cut(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    api.silence_next_watches("/services", times=1)
    response = core.list_namespaced_service(
        "default", watch=True, timeout_seconds=30, _preload_content=False, _request_timeout=(5, 1)
    )
    assert response.status == 200
    api.apply(service("unseen"))
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        next(response.stream(amt=None))  # no event, no bookmark: the read times out
    response.release_conn()
    assert api.outages.silences_pending() == 0
    # The next watch is served as ever.
    stream = BackgroundWatch(core.list_namespaced_service, "default", timeout_seconds=30)
    assert stream.next()["raw_object"]["metadata"]["name"] == "unseen"
    api.cut_watches()
    stream.join()


def test_a_withdrawn_kind_answers_404_and_ends_its_watches(
    api: KubeApiServer, api_client: client.ApiClient
) -> None:
    routes = client.CustomObjectsApi(api_client)
    api.apply(http_route("kept", [("/", "web", 80)]))
    stream = BackgroundWatch(
        routes.list_namespaced_custom_object, GATEWAY, "v1", "default", "httproutes"
    )
    assert stream.next()["raw_object"]["metadata"]["name"] == "kept"
    api.withdraw_kind("httproutes")
    stream.join()  # its watch ended
    for version in ("v1", "v1beta1"):
        with pytest.raises(ApiException) as missing:
            routes.list_namespaced_custom_object(GATEWAY, version, "default", "httproutes")
        assert missing.value.status == 404
    assert client.CoreV1Api(api_client).list_namespaced_service("default").items == []
    api.restore_kind("httproutes")
    listed = routes.list_namespaced_custom_object(GATEWAY, "v1", "default", "httproutes")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["kept"]


def test_a_black_hole_accepts_connections_and_never_answers(
    api: KubeApiServer, core: client.CoreV1Api
) -> None:
    api.stop(black_hole=True)
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.MaxRetryError) as unanswered:
        core.list_namespaced_service("default", _request_timeout=(5, 0.5))
    assert isinstance(unanswered.value.reason, urllib3.exceptions.ReadTimeoutError)
    assert time.monotonic() - started < 4  # connected at once; only the read timed out
    api.start()
    assert core.list_namespaced_service("default").items == []
