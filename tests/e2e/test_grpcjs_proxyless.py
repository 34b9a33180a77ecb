"""End to end with grpc-js and grpc-js-xds (Node.js, tests/grpcjs/probe.js): `dragoman
serve` on a manifest directory, counting gRPC health servers on loopback, and the Node
client dialing `xds:///` targets with the README's proxyless bootstrap in the file
GRPC_XDS_BOOTSTRAP names: every call counted, on the client and on the backends, while an
endpoint moves.

As in test_grpc_proxyless.py (grpcio), the client runs seeing a private /etc/hosts that names
the external backend, which an ExternalName target makes it resolve itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from tests.support import grpc_e2e
from tests.support.grpc_e2e import (
    EXTERNAL_ADDRESS,
    EXTERNAL_HOST,
    GATEWAY_PORT,
    MOVED_HOST,
    NODE_ID,
    CountingHealth,
    Probe,
    counting_health_server,
    fails_at_once,
    grpcjs_probe,
    manifests,
    private_hosts,
    readme_bootstrap,
    web_slice,
)
from tests.support.harness import DragomanProcess, free_port, write_manifest
from tests.support.mtls import material

CALLS = 25  # per target and phase
SERVER = ""  # the health of the server itself: every backend answers it SERVING


@dataclass
class World:
    root: Path
    dragoman: DragomanProcess
    probe: Probe
    backends: dict[str, CountingHealth]
    pod_port: int
    port: int

    def write(self, name: str, text: str) -> None:
        write_manifest(self.root / "manifests", name, text)

    def serving(self, target: str, service: str, within: float = 20) -> dict[str, str]:
        """Check until SERVING (configuration reaches the client on its own time)."""
        deadline = time.monotonic() + within
        while True:
            answer = self.probe.check(target, service, timeout=5)
            if answer.get("status") == "SERVING" or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    def seen(self) -> dict[str, int]:
        """The calls for the server's own health each backend answered so far."""
        return {name: servicer.checks[SERVER] for name, servicer in self.backends.items()}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    servers: list[grpc.Server] = []
    backends: dict[str, CountingHealth] = {}
    dragoman: DragomanProcess | None = None
    probe: Probe | None = None
    try:
        pod, pod_port, backends["pod-a"] = counting_health_server("127.0.0.2", 0, "pod-a")
        servers.append(pod)
        moved, _, backends["pod-b"] = counting_health_server("127.0.0.3", pod_port, "pod-b")
        servers.append(moved)
        outside, port, backends["external"] = counting_health_server(
            EXTERNAL_ADDRESS, 0, "external"
        )
        servers.append(outside)

        directory = tmp_path / "manifests"
        directory.mkdir()
        for name, text in manifests(pod_port, port).items():
            (directory / name).write_text(textwrap.dedent(text))
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(directory, xds, tmp_path / "dragoman.log").start()

        hosts = tmp_path / "hosts"
        hosts.write_text(f"{EXTERNAL_ADDRESS} {EXTERNAL_HOST} {EXTERNAL_HOST}.\n")
        bootstrap = tmp_path / "bootstrap.json"
        bootstrap.write_text(json.dumps(readme_bootstrap(xds, {"type": "insecure"})))
        env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP": str(bootstrap)}
        probe = Probe(
            private_hosts(hosts, grpcjs_probe("--lifetime", "180")), env, tmp_path / "probe.log"
        )
        yield World(tmp_path, dragoman, probe, backends, pod_port, port)
    finally:
        if probe is not None:
            probe.stop()
        if dragoman is not None:
            dragoman.stop()
        for server in servers:
            server.stop(None)


def _counted_calls(world: World, target: str, backend: str) -> None:
    """CALLS calls through `target`: every one answered, and by `backend` alone."""
    before = world.seen()
    answers = [world.probe.check(target, SERVER, timeout=5) for _ in range(CALLS)]
    failed = [answer for answer in answers if answer != {"status": "SERVING"}]
    assert not failed, (target, failed[:3], len(failed))
    after = world.seen()
    assert {name: after[name] - before[name] for name in after} == {
        name: CALLS if name == backend else 0 for name in after
    }, target


def test_grpcjs_clients_reach_services_and_route_hostnames_and_follow_an_endpoint(
    world: World,
) -> None:
    web = f"xds:///web.default.svc.cluster.local:{world.port}"
    outside = f"xds:///outside.default.svc.cluster.local:{world.port}"
    hybrid = f"xds:///hybrid.default.svc.cluster.local:{world.port}"
    greeter = f"xds:///greeter.grpc.test:{GATEWAY_PORT}"
    shop = f"xds:///shop.grpc.test:{GATEWAY_PORT}"
    targets = [
        (web, "pod-a"),  # a pod-backed Service
        (greeter, "pod-a"),  # a GRPCRoute hostname
        (shop, "external"),  # an HTTPRoute hostname, to an ExternalName
        (outside, "external"),  # an ExternalName: an aggregate over LOGICAL_DNS
        (hybrid, "pod-a"),  # in-cluster first: the pods while they are ready
    ]
    for target, service in targets:
        assert world.serving(target, service) == {"status": "SERVING"}, (
            target,
            world.dragoman.log()[-3000:],
        )
    for target, backend in targets:
        _counted_calls(world, target, backend)
    # The call really went where the target says: the other backend does not know the name.
    answer = world.probe.check(web, "external")
    assert answer.get("error", "").startswith("NOT_FOUND"), answer
    # A redirect fails the call, at once (and the rest of the RouteConfiguration is taken).
    fails_at_once(world.probe, f"xds:///{MOVED_HOST}:{GATEWAY_PORT}")
    assert "NACK" not in world.dragoman.log()

    # dragoman clients (CSDS) lists the Node client as gRPC, every type ACKed.
    shown = subprocess.run(
        [sys.executable, "-m", "dragoman", "clients", "--xds-address", world.dragoman.xds_address],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert shown.returncode == 0, shown.stderr
    rows = [line.split() for line in shown.stdout.splitlines() if line.startswith(NODE_ID)]
    types = {"CDS", "EDS", "LDS", "RDS"}
    assert {word for row in rows for word in row if word in types} == types, shown.stdout
    assert all(row[2] == "[gRPC]" and "acked" in row for row in rows), shown.stdout

    # The pod moves: calls keep being answered, each by one pod or the other, until every
    # call lands on the new one. Nothing is lost on the way.
    world.write("slices.yaml", web_slice("127.0.0.3", world.pod_port))
    before = world.seen()
    made = 0
    deadline = time.monotonic() + 30
    moved = {web: False, greeter: False}
    while not all(moved.values()) and time.monotonic() < deadline:
        for target in moved:
            at_b = world.seen()["pod-b"]
            answer = world.probe.check(target, SERVER, timeout=5)
            made += 1
            assert answer == {"status": "SERVING"}, (target, answer, made)
            moved[target] = world.seen()["pod-b"] > at_b
    assert all(moved.values()), (moved, world.dragoman.log()[-3000:])
    after = world.seen()
    assert after["pod-a"] - before["pod-a"] + after["pod-b"] - before["pod-b"] == made
    for target in (web, greeter, hybrid):
        _counted_calls(world, target, "pod-b")

    # No ready pod: the in-cluster-first Service falls back to its external host.
    world.write("slices.yaml", web_slice("127.0.0.3", world.pod_port, ready=False))
    assert world.serving(hybrid, "external") == {"status": "SERVING"}
    _counted_calls(world, hybrid, "external")
    log = world.dragoman.log()
    assert "NACK" not in log, log[-3000:]


def _bootstrap_verdict(tmp_path: Path, bootstrap: dict[str, object]) -> dict[str, str]:
    """What grpc-js-xds makes of `bootstrap` (probe.js --check-bootstrap)."""
    path = tmp_path / "bootstrap.json"
    path.write_text(json.dumps(bootstrap))
    env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP": str(path)}
    done = subprocess.run(
        grpcjs_probe("--check-bootstrap"), env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    verdict: dict[str, str] = json.loads(done.stdout)
    return verdict


def test_grpcjs_needs_the_node_locality_the_readme_bootstrap_has(tmp_path: Path) -> None:
    bootstrap = readme_bootstrap("127.0.0.1:18000", {"type": "insecure"})
    assert _bootstrap_verdict(tmp_path, bootstrap) == {"bootstrap": "valid"}
    node = bootstrap["node"]
    assert isinstance(node, dict)
    del node["locality"]  # grpcio and grpc-go do without; grpc-js-xds does not
    verdict = _bootstrap_verdict(tmp_path, bootstrap)
    assert verdict.get("error", "").endswith("locality field missing in node element"), verdict


def test_grpcjs_refuses_a_bootstrap_with_tls_channel_credentials(tmp_path: Path) -> None:
    """grpc-js-xds knows only the `insecure` and `google_default` channel credentials (no
    gRFC A65): the README's mutual TLS bootstrap, with real certificate files, is refused.
    The README says so; this fails when a release learns `tls`."""
    tls = material(tmp_path / "tls", grpc_clients=("greeter",))
    creds = {
        "type": "tls",
        "config": {
            "ca_certificate_file": str(tls.directory / "ca.crt"),
            "certificate_file": str(tls.directory / "grpc-greeter.crt"),
            "private_key_file": str(tls.directory / "grpc-greeter.key"),
        },
    }
    verdict = _bootstrap_verdict(tmp_path, readme_bootstrap("127.0.0.1:18000", creds))
    assert verdict.get("error", "").endswith(
        "xds_servers.channel_creds field: must contain at least one entry with a type in "
        "[google_default,insecure]"
    ), verdict


def test_without_node_the_grpcjs_tests_fail_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(grpc_e2e.shutil, "which", lambda name: None)
    with pytest.raises(AssertionError, match=r"need Node\.js .* apt-get install nodejs npm"):
        grpcjs_probe("--check-bootstrap")
