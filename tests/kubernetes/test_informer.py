"""Informers against the in-process API server, through the real kubernetes client: the
first list, every later change once and in order, and recovery from cut watches, 410 Gone,
an API server outage and collections the server does not serve."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from dragoman.kubernetes import informer as informer_module
from dragoman.kubernetes.informer import Informer, WatchSettings
from dragoman.kubernetes.watched_kinds import KINDS_BY_NAME, WatchedKind
from tests.support.builders import service
from tests.support.kubeapi import KubeApiServer

pytestmark = pytest.mark.timeout(60)

FAST = WatchSettings(backoff_initial=0.05, backoff_maximum=0.3, not_served_retry=0.5)
SERVICES = KINDS_BY_NAME["Service"]
ROUTES = KINDS_BY_NAME["HTTPRoute"]


@dataclass
class Recorder:
    """An InformerSink that remembers every call, for a test to wait on."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    condition: threading.Condition = field(default_factory=threading.Condition)

    def replace(self, informer: Informer, objects: list[dict[str, Any]]) -> None:
        with self.condition:
            self.calls.append(("replace", objects))
            self.condition.notify_all()

    def event(self, informer: Informer, event_type: str, obj: dict[str, Any]) -> None:
        with self.condition:
            self.calls.append((event_type, obj))
            self.condition.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        with self.condition:
            assert self.condition.wait_for(predicate, timeout), f"not seen; calls: {self.calls}"

    def replaces(self) -> list[list[dict[str, Any]]]:
        with self.condition:
            return [objects for kind, objects in self.calls if kind == "replace"]

    def events(self) -> list[tuple[str, str, str]]:
        """(type, name, resourceVersion) of every watch event, in order."""
        with self.condition:
            return [
                (kind, obj["metadata"]["name"], obj["metadata"]["resourceVersion"])
                for kind, obj in self.calls
                if kind != "replace"
            ]


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
def start(api_client: client.ApiClient) -> Iterator[Callable[..., tuple[Informer, Recorder]]]:
    started: list[Informer] = []

    def start_informer(
        kind: WatchedKind = SERVICES,
        namespace: str | None = None,
        settings: WatchSettings = FAST,
        versions: tuple[str, ...] = (),
        on_silent: Callable[[str], None] | None = None,
    ) -> tuple[Informer, Recorder]:
        recorder = Recorder()
        informer = Informer(
            api_client,
            kind,
            versions or kind.versions,
            namespace,
            recorder,
            settings,
            on_silent=on_silent,
        )
        informer.start()
        started.append(informer)
        assert informer.synced.wait(10), "never synced"
        return informer, recorder

    yield start_informer
    for informer in started:
        informer.stop()
        assert not informer.is_alive()


def names(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects)


def test_first_list_hands_over_every_object_typed(api: KubeApiServer, start: Any) -> None:
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    api.apply(service("web"))
    api.apply(service("cart", namespace="shop"))
    informer, recorder = start()
    [listed] = recorder.replaces()
    assert names(listed) == [("default", "web"), ("shop", "cart")]
    # Items of built-in lists come without apiVersion/kind; the parser needs them.
    assert {(o["apiVersion"], o["kind"]) for o in listed} == {("v1", "Service")}
    assert informer.resource_version == str(api.resource_version)


def test_one_namespace_only(api: KubeApiServer, start: Any) -> None:
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    api.apply(service("web"))
    api.apply(service("cart", namespace="shop"))
    _, recorder = start(namespace="shop")
    assert names(recorder.replaces()[0]) == [("shop", "cart")]
    api.apply(service("other"))
    api.apply(service("till", namespace="shop"))
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    time.sleep(0.3)
    assert [(t, n) for t, n, _ in recorder.events()] == [("ADDED", "till")]


def test_paged_list_is_one_snapshot(api: KubeApiServer, start: Any) -> None:
    for index in range(7):
        api.apply(service(f"s{index}"))
    _, recorder = start(settings=WatchSettings(page_size=2, backoff_initial=0.05))
    assert len(recorder.replaces()) == 1
    assert [n for _, n in names(recorder.replaces()[0])] == [f"s{i}" for i in range(7)]
    assert api.request_count("list", "services") == 4


def test_every_change_arrives_once_in_order(api: KubeApiServer, start: Any) -> None:
    _, recorder = start()
    api.apply(service("web"))
    api.apply(service("web", port=81))
    api.delete("Service", "web")
    recorder.wait_for(lambda: len(recorder.events()) == 3)
    events = recorder.events()
    assert [(t, n) for t, n, _ in events] == [
        ("ADDED", "web"),
        ("MODIFIED", "web"),
        ("DELETED", "web"),
    ]
    versions = [int(rv) for _, _, rv in events]
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_custom_resources_and_bookmarks(api: KubeApiServer, start: Any) -> None:
    informer, recorder = start(kind=ROUTES)
    before = informer.resource_version
    # A change elsewhere moves the resourceVersion; bookmarks carry it to the informer.
    api.apply(service("web"))
    deadline = time.monotonic() + 5
    while informer.resource_version == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert informer.resource_version == str(api.resource_version)
    api.apply(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "default"},
            "spec": {},
        }
    )
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    _, obj = recorder.calls[-1]
    assert (obj["apiVersion"], obj["kind"]) == ("gateway.networking.k8s.io/v1", "HTTPRoute")
    assert recorder.events() == [("ADDED", "r", str(api.resource_version))]


def test_watch_cut_midway_resumes_without_loss_or_repeat(api: KubeApiServer, start: Any) -> None:
    _, recorder = start()
    api.apply(service("a"))
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    for round_ in range(3):
        assert api.cut_watches() >= 0
        api.apply(service(f"b{round_}"))
        api.apply(service("a", port=90 + round_))
    recorder.wait_for(lambda: len(recorder.events()) == 7)
    time.sleep(0.3)
    events = recorder.events()
    assert len(events) == 7, events
    assert len({rv for _, _, rv in events}) == 7
    assert [int(rv) for _, _, rv in events] == sorted(int(rv) for _, _, rv in events)
    assert len(recorder.replaces()) == 1  # resumed from the last resourceVersion, no relist


def test_watch_ended_by_the_server_is_reopened(api: KubeApiServer, start: Any) -> None:
    _, recorder = start(settings=WatchSettings(watch_timeout=(1, 1), backoff_initial=0.05))
    time.sleep(2.5)  # two clean ends at timeoutSeconds
    api.apply(service("late"))
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    assert api.request_count("watch", "services") >= 3
    assert api.request_count("list", "services") == 1


def test_410_gone_relists_and_the_list_replaces_the_old_state(
    api: KubeApiServer, start: Any
) -> None:
    api.apply(service("kept"))
    api.apply(service("doomed"))
    informer, recorder = start()
    api.stop()  # the informer loses its watch and cannot reconnect
    api.delete("Service", "doomed")
    api.apply(service("born"))
    api.compact()  # the history it would resume from is gone
    api.start()
    recorder.wait_for(lambda: len(recorder.replaces()) == 2)
    assert [n for _, n in names(recorder.replaces()[1])] == ["born", "kept"]
    assert recorder.events() == []  # the gap came as one list, not as events
    api.apply(service("after"))
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    assert informer.resource_version == str(api.resource_version)


def test_outage_then_back_resumes_from_the_last_version(api: KubeApiServer, start: Any) -> None:
    _, recorder = start()
    api.stop()
    api.apply(service("during-1"))
    api.apply(service("during-2"))
    time.sleep(0.5)  # a few failed reconnects
    api.start()
    recorder.wait_for(lambda: len(recorder.events()) == 2)
    assert [(t, n) for t, n, _ in recorder.events()] == [
        ("ADDED", "during-1"),
        ("ADDED", "during-2"),
    ]
    assert len(recorder.replaces()) == 1


def test_errors_are_retried(api: KubeApiServer, start: Any) -> None:
    api.fail_next("GET", "/api/v1/services", 500, times=2)
    _, recorder = start()
    assert len(recorder.replaces()) == 1
    assert api.request_count("list", "services") == 3


def test_collection_not_served_counts_as_empty_and_is_looked_for_again(
    api: KubeApiServer, start: Any
) -> None:
    widgets = WatchedKind("Widget", "example.com", ("v1",), "widgets")
    informer, recorder = start(kind=widgets)
    assert recorder.replaces() == [[]]
    assert informer.synced.is_set()
    recorder.wait_for(lambda: len(recorder.replaces()) >= 2, timeout=5)


def test_falls_back_to_the_next_served_version(api: KubeApiServer, start: Any) -> None:
    grants = KINDS_BY_NAME["ReferenceGrant"]
    informer, recorder = start(kind=grants, versions=("v9", "v1beta1"))
    assert informer.version == "v1beta1"
    api.apply(
        {
            "apiVersion": "gateway.networking.k8s.io/v1beta1",
            "kind": "ReferenceGrant",
            "metadata": {"name": "g", "namespace": "default"},
            "spec": {"from": [], "to": []},
        }
    )
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    assert recorder.calls[-1][1]["apiVersion"] == "gateway.networking.k8s.io/v1beta1"


def test_stop_breaks_an_open_watch_at_once(
    api: KubeApiServer, api_client: client.ApiClient
) -> None:
    recorder = Recorder()
    informer = Informer(api_client, SERVICES, ("v1",), None, recorder, FAST)
    informer.start()
    assert informer.synced.wait(10)
    deadline = time.monotonic() + 5
    while api.open_watches() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    informer.stop()
    assert not informer.is_alive()
    assert time.monotonic() - started < 2


def watching(api: KubeApiServer, count: int = 1) -> None:
    """Waits until `count` watches are open, so that cutting them is sure to cut them."""
    deadline = time.monotonic() + 10
    while api.open_watches() < count:
        assert time.monotonic() < deadline, "no watch opened"
        time.sleep(0.01)


def route_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {},
    }


def test_a_brief_404_on_a_served_collection_keeps_what_it_held(
    api: KubeApiServer, start: Any
) -> None:
    api.apply(route_object("kept"))
    _, recorder = start(kind=ROUTES)
    assert [n for _, n in names(recorder.replaces()[0])] == ["kept"]
    watching(api)
    # The CRD's handler answers 404 for a while (every version, list and watch alike).
    api.fail_next(None, "/httproutes", 404, times=12)
    api.cut_watches()
    deadline = time.monotonic() + 10
    while api.failures.pending() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert api.failures.pending() == 0, "the informer stopped asking"
    api.apply(route_object("after"))
    recorder.wait_for(lambda: any("after" in str(c) for c in recorder.calls))
    # Never handed over as empty: the state held stayed until the collection was back.
    assert all(objects for objects in recorder.replaces()), recorder.replaces()
    assert [n for _, n in names(recorder.replaces()[-1])] in (["kept"], ["after", "kept"])


class SteppedClock:
    """The informer's monotonic clock, which a test can move forward by hours at once."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset


def wait_until(condition: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not seen in {timeout} s: {what}"
        time.sleep(0.01)


def test_a_kind_no_longer_served_keeps_its_state_for_as_long_and_is_listed_on_its_return(
    api: KubeApiServer, start: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = SteppedClock()
    monkeypatch.setattr(informer_module, "time", clock)
    api.apply(route_object("kept"))
    api.apply(route_object("doomed"))
    # Default settings: how soon the kind is listed again is what a deployment gets.
    informer, recorder = start(kind=ROUTES, settings=WatchSettings())
    watching(api)
    api.delete("HTTPRoute", "doomed")  # observed as an event: withdrawn
    recorder.wait_for(lambda: ("DELETED", "doomed") in [(t, n) for t, n, _ in recorder.events()])
    lists = api.request_count("list", "httproutes")
    api.withdraw_kind("httproutes")  # 404 on every version, every verb; the watch ends
    wait_until(lambda: api.request_count("list", "httproutes") >= lists + 2, what="a 404 list")
    assert informer.not_served_since is not None
    clock.offset += 3600.0  # an hour of nothing but 404s
    lists = api.request_count("list", "httproutes")
    wait_until(lambda: api.request_count("list", "httproutes") >= lists + 2, what="404 lists")
    # Never handed over as empty; the deletion seen before stays applied.
    assert len(recorder.replaces()) == 1, recorder.replaces()
    api.apply(route_object("during"))  # written while the kind was not served
    api.restore_kind("httproutes")
    back = time.monotonic()
    recorder.wait_for(lambda: len(recorder.replaces()) == 2, timeout=10)
    assert time.monotonic() - back < 3.5  # within the probe interval (2 s), not a minute
    assert [n for _, n in names(recorder.replaces()[1])] == ["during", "kept"]
    assert informer.not_served_since is None


def test_a_silent_watch_is_started_again_and_what_changed_meanwhile_arrives(
    api: KubeApiServer, start: Any
) -> None:
    silences: list[str] = []
    settings = WatchSettings(backoff_initial=0.05, backoff_maximum=0.3, watch_silence_limit=1.0)
    _, recorder = start(settings=settings, on_silent=silences.append)
    watching(api)
    # The next watch gets its 200 and then nothing: no event, no bookmark, no end.
    api.silence_next_watches("watch=true", times=1)
    api.cut_watches()
    wait_until(lambda: api.outages.silences_pending() == 0, what="the silent watch taken")
    silent_from = time.monotonic()
    api.apply(service("meanwhile"))
    recorder.wait_for(lambda: len(recorder.events()) == 1, timeout=10)
    # Within the limit (1 s) of the silence, plus a margin; resumed, not listed again.
    assert time.monotonic() - silent_from < 3.0
    assert silences == ["Service"]
    assert [(t, n) for t, n, _ in recorder.events()] == [("ADDED", "meanwhile")]
    assert len(recorder.replaces()) == 1


def test_a_watch_that_gets_no_answer_at_all_is_started_again(
    api: KubeApiServer, start: Any
) -> None:
    silences: list[str] = []
    settings = WatchSettings(backoff_initial=0.05, backoff_maximum=0.3, watch_silence_limit=1.0)
    _, recorder = start(settings=settings, on_silent=silences.append)
    watching(api)
    api.stop(black_hole=True)  # connections are accepted and never answered
    api.apply(service("meanwhile"))
    wait_until(lambda: len(silences) >= 1, what="the unanswered watch found silent")
    api.start()
    back = time.monotonic()
    recorder.wait_for(lambda: len(recorder.events()) == 1, timeout=10)
    assert time.monotonic() - back < 3.0
    assert set(silences) == {"Service"}


def test_the_default_silence_limit_is_twice_the_bookmark_period() -> None:
    # The API server sends a watch that asks for bookmarks (each does) one about every
    # minute: two minutes of nothing is a dead watch, found in well under five.
    assert WatchSettings().watch_silence_limit == 120.0


def test_an_api_server_back_after_an_outage_is_seen_within_seconds(
    api: KubeApiServer, start: Any
) -> None:
    # Default settings: the backoff a deployment gets.
    _, recorder = start(settings=WatchSettings())
    watching(api)
    api.stop()  # connections refused
    api.apply(service("during"))
    time.sleep(8.5)  # long enough for an uncapped doubling backoff to reach 8 s
    api.start()
    back = time.monotonic()
    recorder.wait_for(lambda: len(recorder.events()) == 1, timeout=40)
    assert time.monotonic() - back < 3.5  # the probe interval (2 s), plus a margin


def test_http_410_on_a_watch_relists(api: KubeApiServer, start: Any) -> None:
    api.apply(service("kept"))
    informer, recorder = start()
    watching(api)
    api.fail_next("GET", "watch=true", 410, message="too old resource version")
    api.cut_watches()
    recorder.wait_for(lambda: len(recorder.replaces()) == 2)
    assert [n for _, n in names(recorder.replaces()[1])] == ["kept"]
    api.apply(service("after"))
    recorder.wait_for(lambda: len(recorder.events()) == 1)
    assert informer.resource_version == str(api.resource_version)


def test_an_expired_continue_token_lists_again_from_the_start(
    api: KubeApiServer, start: Any
) -> None:
    for index in range(5):
        api.apply(service(f"s{index}"))
    # The second page's continue token has expired (410): the list starts over, whole.
    api.fail_next("GET", "continue=", 410, message="continue parameter is too old")
    _, recorder = start(settings=WatchSettings(page_size=2, backoff_initial=0.05))
    [listed] = recorder.replaces()
    assert [n for _, n in names(listed)] == [f"s{i}" for i in range(5)]
    # One page, the expired one, then three pages again.
    assert api.request_count("list", "services") == 5
