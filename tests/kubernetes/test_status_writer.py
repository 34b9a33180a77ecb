"""The status writer against the in-process API server: status subresource writes with
transition times, no-op writes skipped, conflicts retried, other controllers' parents[]
entries kept, our own withdrawn when we no longer compute a status, no write once
leadership is lost, and Gateways no longer ours handed back unless someone else wrote."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from dragoman.dag.backend_policies import BackendPolicies
from dragoman.dag.model import ObjectStatus
from dragoman.dag.xbackend_traffic_policies import XBackendTrafficPolicies
from dragoman.kubernetes.cache import CachedObject, ObjectCache
from dragoman.kubernetes.status_writer import StatusClient, StatusWriter
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME
from dragoman.objects import ObjectKey
from dragoman.objects.xbackend_traffic_policy import XBackendTrafficPolicy
from tests.support.builders import (
    backend_policy,
    gateway,
    gateway_class,
    http_route,
    typed,
    xbackend_traffic_policy,
)
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(60)

OURS = "dragoman.dev/gateway-controller"
THEIRS = "example.com/other-controller"
GATEWAY_V1 = "gateway.networking.k8s.io/v1"
ROUTE = ObjectKey("HTTPRoute", "default", "web")
T0 = datetime.datetime(2030, 1, 1, 0, 0, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def writer(api: KubeApiServer, clock: Clock) -> Iterator[StatusWriter]:
    api_client = client.ApiClient(api.client_configuration())
    yield StatusWriter(StatusClient(api_client), OURS, wall_clock=clock)
    api_client.close()


def parent(controller: str, gateway: str, accepted: str, **extra: Any) -> dict[str, Any]:
    return {
        "parentRef": {"name": gateway},
        "controllerName": controller,
        "conditions": [
            {"type": "Accepted", "status": accepted, "reason": "Accepted", "message": "", **extra}
        ],
    }


def cached(api: KubeApiServer) -> dict[ObjectKey, CachedObject]:
    """What the informers would hold now."""
    cache = ObjectCache()
    for kind_name in ("HTTPRoute", "GatewayClass"):
        kind = KINDS_BY_NAME[kind_name]
        items = [{**o, "apiVersion": f"{kind.group}/v1"} for o in api.list(kind_name)]
        cache.replace((kind_name, ""), kind, items)
    return cache.by_key()


def desired(key: ObjectKey, status: dict[str, Any]) -> dict[ObjectKey, ObjectStatus]:
    return {key: ObjectStatus(key=key, api_version=GATEWAY_V1, status=status)}


def stored_status(api: KubeApiServer, kind: str = "HTTPRoute", name: str = "web") -> Any:
    obj = api.get(kind, name, namespace="default")
    assert obj is not None
    return obj.get("status")


def test_writes_the_status_subresource_with_transition_times(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    want = desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]})
    result = writer.publish(want, cached(api))
    assert (result.written, result.unchanged, result.failed) == (1, 0, 0)
    assert stored_status(api) == {
        "parents": [parent(OURS, "gw", "True", lastTransitionTime="2030-01-01T00:00:00Z")]
    }
    assert api.request_count("update", "httproutes/status") == 1


def test_an_unchanged_status_costs_no_request(
    api: KubeApiServer, writer: StatusWriter, clock: Clock
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    want = desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]})
    writer.publish(want, cached(api))
    api.reset_counts()
    clock.advance(60)
    result = writer.publish(want, cached(api))
    assert (result.written, result.unchanged) == (0, 1)
    assert api.request_counts() == {}  # not even a read


def test_a_stale_cache_is_checked_against_the_server_before_writing(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    stale = cached(api)  # taken before the status below was written
    want = desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]})
    writer.publish(want, stale)
    api.reset_counts()
    result = writer.publish(want, stale)
    assert (result.written, result.unchanged) == (0, 1)
    assert api.request_count("update", "httproutes/status") == 0
    assert api.request_count("get", "httproutes") == 1


def test_a_changed_condition_keeps_its_time_unless_its_status_flips(
    api: KubeApiServer, writer: StatusWriter, clock: Clock
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    writer.publish(desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]}), cached(api))
    clock.advance(60)
    reworded = parent(OURS, "gw", "True")
    reworded["conditions"][0]["message"] = "now with words"
    writer.publish(desired(ROUTE, {"parents": [reworded]}), cached(api))
    [condition] = stored_status(api)["parents"][0]["conditions"]
    assert (condition["message"], condition["lastTransitionTime"]) == (
        "now with words",
        "2030-01-01T00:00:00Z",
    )
    clock.advance(60)
    writer.publish(desired(ROUTE, {"parents": [parent(OURS, "gw", "False")]}), cached(api))
    [condition] = stored_status(api)["parents"][0]["conditions"]
    assert (condition["status"], condition["lastTransitionTime"]) == (
        "False",
        "2030-01-01T00:02:00Z",
    )


def test_other_controllers_parents_are_kept(api: KubeApiServer, writer: StatusWriter) -> None:
    theirs = parent(THEIRS, "their-gw", "True", lastTransitionTime="2029-05-05T05:05:05Z")
    api.apply(
        http_route("web", "web", 80, parents=("gw", "their-gw"), status={"parents": [theirs]})
    )
    writer.publish(desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]}), cached(api))
    parents = stored_status(api)["parents"]
    assert parents[0] == theirs
    assert [p["controllerName"] for p in parents] == [THEIRS, OURS]


def test_a_conflict_is_retried_from_a_fresh_read(api: KubeApiServer, writer: StatusWriter) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    snapshot = cached(api)
    # Another controller writes its entry after our informers' copy was taken...
    theirs = parent(THEIRS, "their-gw", "True", lastTransitionTime="2029-05-05T05:05:05Z")
    api.apply(
        http_route("web", "web", 80, parents=("gw", "their-gw"), status={"parents": [theirs]})
    )
    # ...and once more between our read and our write.
    api.fail_next("PUT", "/httproutes/web/status", 409)
    result = writer.publish(desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]}), snapshot)
    assert (result.written, result.conflicts, result.failed) == (1, 1, 0)
    assert [p["controllerName"] for p in stored_status(api)["parents"]] == [THEIRS, OURS]
    assert api.request_count("update", "httproutes/status") == 2


def test_persistent_conflicts_give_up_and_are_reported(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    api.fail_next("PUT", "/httproutes/web/status", 409, times=10)
    result = writer.publish(desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]}), cached(api))
    assert (result.written, result.conflicts, result.failed) == (0, 5, 1)


def test_our_entries_are_withdrawn_when_we_compute_no_status(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    theirs = parent(THEIRS, "their-gw", "True", lastTransitionTime="2029-05-05T05:05:05Z")
    ours = parent(OURS, "gw", "True", lastTransitionTime="2029-05-05T05:05:05Z")
    api.apply(
        http_route("web", "web", 80, parents=("gw", "their-gw"), status={"parents": [ours, theirs]})
    )
    result = writer.publish({}, cached(api))
    assert result.written == 1
    assert stored_status(api) == {"parents": [theirs]}
    assert writer.publish({}, cached(api)).written == 0


def test_cluster_scoped_gateway_class(api: KubeApiServer, writer: StatusWriter) -> None:
    api.apply(gateway_class("dragoman", OURS))
    key = ObjectKey("GatewayClass", "", "dragoman")
    accepted = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": ""}
    result = writer.publish(desired(key, {"conditions": [accepted]}), cached(api))
    assert result.written == 1
    stored = api.get("GatewayClass", "dragoman")
    assert stored is not None
    assert stored["status"]["conditions"] == [
        accepted | {"lastTransitionTime": "2030-01-01T00:00:00Z"}
    ]
    assert api.request_count("update", "gatewayclasses/status") == 1


def test_deleted_objects_and_lost_leadership_write_nothing(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    snapshot = cached(api)
    want = desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]})
    assert writer.publish(want, snapshot, leading=lambda: False).written == 0
    api.delete("HTTPRoute", "web")
    result = writer.publish(want, snapshot)
    assert (result.written, result.gone) == (0, 1)
    assert api.request_count("update", "httproutes/status") == 0


def test_leadership_lost_between_the_read_and_the_write_writes_nothing(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(http_route("web", "web", 80, parents=("gw", "their-gw")))
    asked: list[bool] = []

    def leading() -> bool:
        asked.append(True)
        return len(asked) == 1  # leading when the round starts, lost once the read is done

    want = desired(ROUTE, {"parents": [parent(OURS, "gw", "True")]})
    result = writer.publish(want, cached(api), leading=leading)
    assert result.written == 0 and len(asked) == 2
    assert api.request_count("get", "httproutes") == 1
    assert api.request_count("update", "httproutes/status") == 0
    assert stored_status(api) is None


SERVED = {
    "conditions": [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"},
        {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "ok"},
    ],
    "listeners": [{"name": "http", "attachedRoutes": 1, "conditions": []}],
}
GATEWAY = ObjectKey("Gateway", "default", "gw")


def gateways(api: KubeApiServer) -> dict[ObjectKey, CachedObject]:
    cache = ObjectCache()
    kind = KINDS_BY_NAME["Gateway"]
    cache.replace(
        ("Gateway", ""), kind, [{**o, "apiVersion": GATEWAY_V1} for o in api.list(kind.kind)]
    )
    return cache.by_key()


def test_a_gateway_no_longer_ours_is_handed_back_as_waiting_for_controller(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    stamped = {
        **SERVED,
        "conditions": [
            {**c, "lastTransitionTime": "2029-01-01T00:00:00Z"} for c in SERVED["conditions"]
        ],
    }
    api.apply(gateway(port=80, class_name="gone", status=stamped))
    result = writer.publish({}, gateways(api), released={GATEWAY: SERVED})
    assert result.written == 1
    status = stored_status(api, "Gateway", "gw")
    generation = (api.get("Gateway", "gw") or {})["metadata"]["generation"]
    assert status["listeners"] == []
    assert [
        (c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in status["conditions"]
    ] == [
        ("Accepted", "Unknown", "Pending", generation),
        ("Programmed", "Unknown", "Pending", generation),
    ]
    assert all(c["message"].startswith("Waiting for controller") for c in status["conditions"])
    # Handed back once: the next round finds nothing of ours and sends nothing.
    api.reset_counts()
    again = writer.publish({}, gateways(api), released={GATEWAY: SERVED})
    assert (again.written, again.left_alone) == (0, 1)
    assert api.request_counts() == {}


def test_a_gateway_another_controller_has_written_since_is_left_alone(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    theirs = {
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Accepted",
                "message": "theirs now",
                "lastTransitionTime": "2029-05-05T05:05:05Z",
            }
        ]
    }
    api.apply(gateway(port=80, class_name="gone", status=theirs))
    result = writer.publish({}, gateways(api), released={GATEWAY: SERVED})
    assert (result.written, result.left_alone) == (0, 1)
    assert stored_status(api, "Gateway", "gw") == theirs
    # Also when they write between our informers' copy and our read.
    api.apply(gateway(port=80, class_name="gone", status=SERVED))
    snapshot = gateways(api)
    api.apply(gateway(port=80, class_name="gone", status=theirs))
    result = writer.publish({}, snapshot, released={GATEWAY: SERVED})
    assert (result.written, result.left_alone) == (0, 1)
    assert stored_status(api, "Gateway", "gw") == theirs
    assert api.request_count("update", "gateways/status") == 0


def test_a_backend_policy_status_is_written_with_its_conditions(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    api.apply(backend_policy("limits", "web", spec={"circuitBreaker": {"maxConnections": -1}}))
    cache = ObjectCache()
    kind = KINDS_BY_NAME["BackendPolicy"]
    items = [{**o, "apiVersion": "dragoman.dev/v1alpha1"} for o in api.list("BackendPolicy")]
    cache.replace(("BackendPolicy", ""), kind, items)
    policies = BackendPolicies.judged(typed(*items))
    want = {status.key: status for status in policies.statuses({}, OURS)}

    result = writer.publish(want, cache.by_key())

    assert (result.written, result.failed) == (1, 0)
    [ancestor] = stored_status(api, "BackendPolicy", "limits")["ancestors"]
    assert ancestor["ancestorRef"] == {
        "group": "",
        "kind": "Service",
        "namespace": "default",
        "name": "web",
    }
    [accepted] = ancestor["conditions"]
    assert (accepted["status"], accepted["reason"]) == ("False", "Invalid")
    assert accepted["lastTransitionTime"] == "2030-01-01T00:00:00Z"
    assert api.request_count("update", "backendpolicies/status") == 1


def test_an_xbackend_traffic_policy_status_is_written_with_its_conditions(
    api: KubeApiServer, writer: StatusWriter
) -> None:
    spec = {"retryConstraint": {"budget": {"percent": 20}}}
    api.apply(xbackend_traffic_policy("budget", "web", spec=spec))
    cache = ObjectCache()
    kind = KINDS_BY_NAME["XBackendTrafficPolicy"]
    version = "gateway.networking.x-k8s.io/v1alpha1"
    items = [{**o, "apiVersion": version} for o in api.list("XBackendTrafficPolicy")]
    cache.replace(("XBackendTrafficPolicy", ""), kind, items)
    read = [o for o in typed(*items) if isinstance(o, XBackendTrafficPolicy)]
    policies = XBackendTrafficPolicies.judged(read)
    want = {status.key: status for status in policies.statuses(set(), OURS)}

    result = writer.publish(want, cache.by_key())

    assert (result.written, result.failed) == (1, 0)
    [ancestor] = stored_status(api, "XBackendTrafficPolicy", "budget")["ancestors"]
    assert ancestor["ancestorRef"]["name"] == "web"
    [accepted] = ancestor["conditions"]
    assert (accepted["status"], accepted["reason"]) == ("False", "TargetNotFound")
    assert api.request_count("update", "xbackendtrafficpolicies/status") == 1
