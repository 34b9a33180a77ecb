"""End to end: hostile manifests written into the directory `dragoman serve` watches. The
process keeps running, each bad file or filter is reported, and a real Envoy keeps getting
every other update (no update it refuses, so nothing else on the listener freezes)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.builders import (
    Object,
    backend_ref,
    endpoint_slice,
    gateway,
    http_route,
    match,
    rule,
    service,
    yaml_text,
)
from tests.support.harness import (
    DragomanProcess,
    backend_of,
    diagnostics,
    free_port,
    rejected_updates,
    start_envoy,
    write_manifest,
)


def route_to_web(name: str, path: str, *filters: Object) -> str:
    """A route of the Gateway `hostile` sending `path` to web, through `filters`."""
    to_web = rule(backend_ref("web", 80), matches=[match(path)], filters=filters or None)
    return yaml_text(http_route(name, rules=[to_web], parents=["hostile"]))


@dataclass
class World:
    manifests: Path
    url: str
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def backend_of(self, path: str) -> str:
        return backend_of(self.url + path)

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)

    def alive(self) -> bool:
        return self.dragoman.process is not None and self.dragoman.process.poll() is None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("hostile")
    manifests = root / "manifests"
    manifests.mkdir()
    listener_port = free_port()
    web_port = free_port("127.0.0.2")
    (manifests / "base.yaml").write_text(
        yaml_text(
            gateway("hostile", listener_port),
            service("web", 80, web_port),
            endpoint_slice("web", web_port, "127.0.0.2"),
        )
    )
    (manifests / "good.yaml").write_text(route_to_web("good", "/good"))
    web = EchoBackend("web", host="127.0.0.2", port=web_port)
    web.start()
    dns = DnsResponder()
    dns.start()
    xds_address = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(manifests, xds_address, root / "dragoman.log").start()
    envoy = start_envoy(root, xds_address, dns.port, node_cluster="default/hostile")
    w = World(manifests, f"http://127.0.0.1:{listener_port}", dragoman, envoy)
    try:
        try:
            wait_until(lambda: w.backend_of("/good") == "web", timeout=20)
        except TimeoutError:
            pytest.fail("Envoy never routed the manifests:\n" + w.diagnostics())
        yield w
    finally:
        envoy.stop()
        dragoman.stop()
        dns.stop()
        web.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()
    assert world.alive(), world.diagnostics()


def filter_of(kind: str, body: Object) -> Object:
    field = "urlRewrite" if kind == "URLRewrite" else kind[0].lower() + kind[1:]
    return {"type": kind, field: body}


@pytest.mark.parametrize(
    "bad",
    [
        filter_of("ResponseHeaderModifier", {"set": [{"name": "x-a", "value": "a\r\nb"}]}),
        filter_of("ResponseHeaderModifier", {"set": [{"name": "host", "value": "a"}]}),
        filter_of("RequestHeaderModifier", {"add": [{"name": "x-a", "value": "a\0"}]}),
        filter_of("URLRewrite", {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/a\nb"}}),
    ],
    ids=["response-crlf", "response-host", "request-nul", "rewrite-lf"],
)
def test_a_bad_header_route_does_not_freeze_its_listener(world: World, bad: Object) -> None:
    world_write(world, "bad.yaml", route_to_web("bad", "/bad", bad))
    try:
        wait_until(lambda: world.backend_of("/bad") == "HTTP 500", timeout=10)
        assert world.backend_of("/good") == "web"
        # Later edits on the same listener still arrive.
        world_write(world, "later.yaml", route_to_web("later", "/later"))
        wait_until(lambda: world.backend_of("/later") == "web", timeout=10)
        assert "HTTPRoute/default/bad" in world.dragoman.log()
    finally:
        for name in ("bad.yaml", "later.yaml"):
            (world.manifests / name).unlink(missing_ok=True)
    wait_until(lambda: world.backend_of("/later") == "HTTP 404", timeout=10)


HOSTILE_FILES = {
    # The probe's 80 KB file that killed `serve` with SIGSEGV.
    "flow.yaml": "x: " + "[" * 40_000 + "]" * 40_000 + "\n",
    "block.yaml": "x:\n" + "- " * 40_000 + "a\n",
    "deep.json": '{"x": ' + "[" * 5_000 + "]" * 5_000 + "}",
    "big-int.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: n, generation: "
    + "9" * 5_000
    + "}\n",
    "bomb.yaml": 'a0: &a0 ["lol"]\n'
    + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)),
}


def test_hostile_files_are_skipped_and_other_edits_keep_arriving(world: World) -> None:
    for name, text in HOSTILE_FILES.items():
        (world.manifests / f".{name}.tmp").write_text(text)
        (world.manifests / f".{name}.tmp").rename(world.manifests / name)
    try:
        world_write(world, "after.yaml", route_to_web("after", "/after"))
        wait_until(lambda: world.backend_of("/after") == "web", timeout=20)
        assert world.alive(), world.diagnostics()
        log = world.dragoman.log()
        for name in HOSTILE_FILES:
            assert f"{name}: invalid" in log, (name, world.diagnostics())
        assert world.backend_of("/good") == "web"
    finally:
        for name in [*HOSTILE_FILES, "after.yaml"]:
            (world.manifests / name).unlink(missing_ok=True)
    wait_until(lambda: world.backend_of("/after") == "HTTP 404", timeout=10)


def world_write(world: World, name: str, text: str) -> None:
    write_manifest(world.manifests, name, text)


def test_serve_starts_with_hostile_files_present(tmp_path: Path, world: World) -> None:
    """Before, a deep JSON file or a huge integer made `serve` exit at start."""
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("base.yaml", "good.yaml"):
        (manifests / name).write_text((world.manifests / name).read_text())
    for name, text in HOSTILE_FILES.items():
        (manifests / name).write_text(text)
    second = DragomanProcess(manifests, f"127.0.0.1:{free_port()}", tmp_path / "second.log")
    second.start()  # fails the test if the process exits or never listens
    try:
        wait_until(lambda: "update from" in second.log(), timeout=10)
        log = second.log()
        for name in HOSTILE_FILES:
            assert f"{name}: invalid" in log, (name, log[-3000:])
        assert second.process is not None and second.process.poll() is None
    finally:
        second.stop()
