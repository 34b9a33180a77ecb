"""`dragoman serve`'s reload: files are decoded and parsed off the event loop every xDS
stream shares, so a large file delays no stream while it is read; and what the first load
made is never scanned by the cyclic collector."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from pathlib import Path

import pytest

from dragoman.envoy.translation.translator import translate
from dragoman.runtime import manifest_serving
from dragoman.runtime.controller import Controller
from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig
from dragoman.sources import parse_worker
from dragoman.store import Store
from tests.support.builders import gateway, yaml_text
from tests.support.feature_manifests import every_feature_dag
from tests.support.parse_workers import looking_patiently
from tests.support.served_digests import served_digests

DEPLOYMENT = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d{index}, namespace: default, labels: {{app: web, tier: t{index}}}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: "example/web:1", ports: [{{containerPort: 8080}}]}}]
"""


def test_reload_keeps_the_event_loop_responsive(tmp_path: Path) -> None:
    # Legal, large, and nothing dragoman serves: all the time goes to decoding and parsing
    # (enough documents that even the C loader takes well over 0.3 s).
    (tmp_path / "big.yaml").write_text("".join(DEPLOYMENT.format(index=i) for i in range(10000)))
    server = ManifestServer(ServeConfig(manifests=tmp_path, xds_address="127.0.0.1:0"))

    async def scenario() -> tuple[float, float]:
        lags: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lags.append(time.perf_counter() - before - 0.005)

        task = asyncio.create_task(ticker())
        started = time.perf_counter()
        await server.reload()
        took = time.perf_counter() - started
        done.set()
        await task
        return took, max(lags, default=took)

    took, worst_lag = asyncio.run(scenario())

    assert server.controller.dag is not None  # the reload happened and built
    # The loop went on ticking while the file was read: its worst stall is a small part of
    # the reload (parsed on the loop, the stall was the whole reload; with the worker's pipe
    # looked at every millisecond, most of it: 0.46 s of 0.51 s).
    assert took > 0.3, took
    assert worst_lag < took / 5, (worst_lag, took)


SERVICE = """---
apiVersion: v1
kind: Service
metadata: {{name: s{index}, namespace: default}}
spec: {{type: ExternalName, externalName: s{index}.example.test, ports: [{{port: 80}}]}}
"""


def test_the_first_load_is_frozen_before_the_collector_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the first load and build made is frozen while the collector is still paused:
    enabled first, its next collection would scan all of it (0.1 s at 10,000 Services,
    before the server starts)."""
    (tmp_path / "all.yaml").write_text("".join(SERVICE.format(index=i) for i in range(300)))
    server = ManifestServer(ServeConfig(manifests=tmp_path, xds_address="127.0.0.1:0"))
    collections: list[int] = []  # generations collected once the first load was in
    loaded = False
    reload = server.reload

    async def reload_and_mark(changed: object = None) -> None:
        nonlocal loaded
        await reload()
        loaded = True

    def on_collection(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and loaded:
            collections.append(info["generation"])

    class NotServing(Exception):
        pass

    async def not_serving(*_: object, **__: object) -> None:
        raise NotServing

    monkeypatch.setattr(server, "reload", reload_and_mark)
    monkeypatch.setattr(manifest_serving, "start_serving", not_serving)
    thresholds = gc.get_threshold()
    gc.callbacks.append(on_collection)
    try:
        with pytest.raises(NotServing):
            asyncio.run(server._serve(asyncio.Event()))
    finally:
        gc.callbacks.remove(on_collection)
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        gc.enable()
    assert loaded and server.controller.snapshots
    assert collections == []


ROUTE = """---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r{index}, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  hostnames: [r{index}.example.test]
  rules: [{{backendRefs: [{{name: s{index}, port: 80}}]}}]
"""
GATEWAY = "---\n" + yaml_text(gateway())  # `gw`, HTTP on 8080


def _routes_before_their_services(root: Path, count: int, one_file: bool = False) -> None:
    """A Gateway, `count` routes (and one to a Service that does not exist), then (in scan
    order) their Services; one Service defined twice, its first definition (port 80) the one
    that counts. Each in a file of its own (with one that is not YAML, another of a control
    character), or all in one file, in that order."""
    again = SERVICE.format(index=0).replace("port: 80", "port: 81")
    if one_file:
        routes = "".join(ROUTE.format(index=i) for i in range(count + 1))
        services = "".join(SERVICE.format(index=i) for i in range(count))
        (root / "all.yaml").write_text(GATEWAY + routes + services + again)
        return
    (root / "a-gateway.yaml").write_text(GATEWAY)
    (root / "b-routes").mkdir()
    (root / "c-services").mkdir()
    for i in range(count):
        (root / "b-routes" / f"r{i:04}.yaml").write_text(ROUTE.format(index=i))
        (root / "c-services" / f"s{i:04}.yaml").write_text(SERVICE.format(index=i))
    (root / "b-routes" / "missing.yaml").write_text(ROUTE.format(index=count))
    (root / "c-services" / "broken.yaml").write_text("kind: Service\nmetadata: {name: [}\n")
    (root / "c-services" / "control.yaml").write_text(SERVICE.format(index="\x07"))
    (root / "d-again.yaml").write_text(again)


def _first_load(root: Path) -> ManifestServer:
    server = ManifestServer(ServeConfig(manifests=root, xds_address="127.0.0.1:0"))
    asyncio.run(server.reload())
    return server


@pytest.mark.parametrize("one_file", [False, True], ids=["files", "one-file"])
def test_the_first_load_builds_what_is_parsed_so_far_while_a_worker_parses_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_file: bool
) -> None:
    """Shared with a worker process (by files, or by the documents of one large file), the
    first load builds and translates the objects parsed so far (routes whose Services are
    not parsed yet, a Service defined twice): what it then publishes is what a build of
    everything at once publishes."""
    _routes_before_their_services(tmp_path, 150, one_file)
    with monkeypatch.context() as patch:
        patch.setattr(parse_worker, "SHARE_FROM", 10**9)  # no worker
        patch.setattr(parse_worker, "SHARE_BYTES", 10**12)
        alone = _first_load(tmp_path)
    assert alone.directory.parsed_by_worker == 0
    monkeypatch.setattr(parse_worker, "SHARE_FROM", 100)
    monkeypatch.setattr(parse_worker, "SHARE_BYTES", 10_000)
    monkeypatch.setattr(parse_worker, "idle_cpus", lambda: 1.5)  # whatever runs the tests
    looking_patiently(monkeypatch)
    prepared: list[int] = []
    prepare = Controller.prepare

    def counted(self: Controller, store: Store) -> None:
        prepared.append(len(store.http_routes) + len(store.services))
        prepare(self, store)

    monkeypatch.setattr(Controller, "prepare", counted)

    shared = _first_load(tmp_path)

    assert shared.directory.parsed_by_worker > 0
    assert len(prepared) >= 2 and prepared == sorted(prepared), prepared
    assert served_digests(shared.controller) == served_digests(alone.controller) != {}
    assert shared.controller.dag is not None and alone.controller.dag is not None
    assert shared.controller.dag.problems == alone.controller.dag.problems
    assert shared.controller.dag.statuses == alone.controller.dag.statuses
    assert any(p.reason == "BackendNotFound" for p in shared.controller.dag.problems)
    assert shared._reported == alone._reported  # the files' own errors
    assert one_file or len(alone._reported) >= 2
    # Later loads are this process's alone: nothing prepared.
    prepared.clear()
    changed = "all.yaml" if one_file else "c-services/s0001.yaml"
    (tmp_path / changed).write_text(SERVICE.format(index=1).replace("80", "82"))
    asyncio.run(shared.reload([changed]))
    assert prepared == []
    assert shared.controller.store is not None
    assert shared.controller.store.services[("default", "s1")].ports[0].port == 82


def test_a_failing_build_of_what_is_parsed_so_far_leaves_the_first_build_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _routes_before_their_services(tmp_path, 150)
    with monkeypatch.context() as patch:
        patch.setattr(parse_worker, "SHARE_FROM", 10**9)
        alone = _first_load(tmp_path)
    monkeypatch.setattr(parse_worker, "SHARE_FROM", 100)
    monkeypatch.setattr(parse_worker, "idle_cpus", lambda: 1.5)
    looking_patiently(monkeypatch)
    calls = 0

    def failing(self: Controller, store: Store) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("a bug")

    monkeypatch.setattr(Controller, "prepare", failing)

    with caplog.at_level(logging.ERROR, logger="dragoman.runtime.manifest_serving"):
        shared = _first_load(tmp_path)

    assert calls == 1  # not tried again once it failed
    assert "building the first load's objects as they came failed" in caplog.text
    assert "RuntimeError: a bug" in caplog.text
    assert served_digests(shared.controller) == served_digests(alone.controller) != {}


def test_a_build_and_translation_of_every_feature_leave_no_garbage_cycle() -> None:
    """What the first build makes is frozen for the cyclic collector (above): a reference
    cycle it dropped would never be freed (a failover chain followed by a closure calling
    itself was one per Service: 60,000 objects at 10,000 Services)."""
    translate(every_feature_dag())  # (anything made once per process, made)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        translate(every_feature_dag())
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()
