"""End to end: external names with an IPv4 and an IPv6 address, looked up with the family
`all`, and Envoy's Happy Eyeballs, with Envoy resolving the names and with the DNS check.

- `dead.eyeballs.e2e.test` (A 127.0.0.11, AAAA ::1): an echo backend listens on the IPv4
  address, nothing on the IPv6 one (a connection there is refused at once). A `logical`
  cluster gives its one host both addresses and Envoy races them: every request is
  answered. A `strict` cluster makes a host of each address, and the requests balanced to
  the IPv6 one fail: counted, the contrast that shows what the test would catch.
- `both.eyeballs.e2e.test` (the same addresses): an echo backend on each, on one port. The
  `dragoman.dev/dns-happy-eyeballs-first-family` annotation decides which family the host
  tries first, so which backend answers every request.

With the DNS check, dragoman resolves A and AAAA itself (`::1` and `127.0.0.11` allowed by
`allowedNetworks`, loopback being refused otherwise) and serves a logical cluster's checked
addresses as one EDS host with additional addresses, which Envoy races alike.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from dragoman.demo.dns import DnsResponder
from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from tests.support.harness import (
    DragomanProcess,
    diagnostics,
    free_port,
    get_json,
    rejected_updates,
    start_envoy,
    write_manifest,
)

V4, V6 = "127.0.0.11", "::1"
DEAD, BOTH = "dead.eyeballs.e2e.test", "both.eyeballs.e2e.test"
REQUESTS = 40
# Service name -> (external name, DNS annotations): each its own route, /<service>.
SERVICES = {
    "logical": (DEAD, {"dns-mode": "logical", "dns-lookup-family": "all"}),
    "strict": (DEAD, {"dns-mode": "strict", "dns-lookup-family": "all"}),
    "v6-first": (
        BOTH,
        {
            "dns-mode": "logical",
            "dns-lookup-family": "all",
            "dns-happy-eyeballs-first-family": "v6",
        },
    ),
    "v4-first": (
        BOTH,
        {
            "dns-mode": "logical",
            "dns-lookup-family": "all",
            "dns-happy-eyeballs-first-family": "v4",
        },
    ),
}


def manifests(listener: int, dead_port: int, both_port: int) -> str:
    documents = [
        f"""
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: e2e, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners: [{{name: http, protocol: HTTP, port: {listener}}}]
"""
    ]
    for name, (host, settings) in SERVICES.items():
        port = dead_port if host == DEAD else both_port
        notes = ", ".join(f"dragoman.dev/{key}: {value}" for key, value in settings.items())
        documents.append(
            f"""
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default, annotations: {{{notes}}}}}
spec: {{type: ExternalName, externalName: {host}, ports: [{{name: http, port: {port}}}]}}
"""
        )
    rules = ", ".join(
        f"{{matches: [{{path: {{type: PathPrefix, value: /{name}}}}}], "
        f"backendRefs: [{{name: {name}, port: {dead_port if host == DEAD else both_port}}}]}}"
        for name, (host, _) in SERVICES.items()
    )
    documents.append(
        f"""
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: eyeballs, namespace: default}}
spec:
  parentRefs: [{{name: e2e}}]
  rules: [{rules}]
"""
    )
    return "---".join(documents)


def closed_on_v6(port: int) -> bool:
    """Nothing listens on [::1]:port (a connection is refused)."""
    with socket.socket(socket.AF_INET6) as probe:
        return probe.connect_ex((V6, port)) != 0


def backends_on_both() -> tuple[EchoBackend, EchoBackend]:
    """An echo backend on each address, on one port number."""
    for _ in range(20):
        v6 = EchoBackend("v6", host=V6, port=free_port(V6))
        v6.start()
        try:
            return EchoBackend("v4", host=V4, port=v6.port).start(), v6
        except OSError:  # that number is taken on the IPv4 address: another one
            v6.stop()
    raise RuntimeError("no port free on both 127.0.0.11 and ::1")


@dataclass
class World:
    url: str
    dragoman: DragomanProcess
    envoy: EnvoyProcess

    def answer(self, path: str) -> str:
        """Which backend answered, or `HTTP <status>`."""
        status, data = get_json(self.url + path)
        return str(data.get("backend", f"HTTP {status}")) if status == 200 else f"HTTP {status}"

    def answers(self, path: str) -> Counter[str]:
        return Counter(self.answer(path) for _ in range(REQUESTS))

    def diagnostics(self) -> str:
        return diagnostics(self.dragoman.log(), self.envoy)


@pytest.fixture(scope="module", params=["envoy-resolves", "dns-check"])
def world(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[World]:
    root = tmp_path_factory.mktemp("happy-eyeballs")
    dead = EchoBackend("v4", host=V4, port=free_port(V4)).start()
    both_v4, both_v6 = backends_on_both()
    backends = [dead, both_v4, both_v6]
    dns = DnsResponder().start()
    try:
        assert closed_on_v6(dead.port), f"[::1]:{dead.port} is in use"
        for name in (DEAD, BOTH):
            dns.set_a(name, V4)
            dns.set_aaaa(name, V6)
        directory = root / "manifests"
        directory.mkdir()
        listener = free_port()
        write_manifest(directory, "eyeballs.yaml", manifests(listener, dead.port, both_v4.port))
        extra: list[str] = []
        if request.param == "dns-check":
            config = root / "dragoman.yaml"
            config.write_text(
                "externalNames:\n"
                f"  allowedNetworks: [{V4}/32, '{V6}/128']\n"
                f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}'], "
                "minInterval: 1s}\n"
            )
            extra = ["--config", str(config)]
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(directory, xds, root / "dragoman.log", extra).start()
        envoy = start_envoy(root, xds, dns.port)
        w = World(f"http://127.0.0.1:{listener}", dragoman, envoy)
        try:
            try:
                for path, backend in (("/logical", "v4"), ("/v6-first", "v6"), ("/v4-first", "v4")):
                    wait_until(lambda p=path, b=backend: w.answer(p) == b, timeout=20)
                # The strict cluster has both hosts once either has answered and one has not.
                wait_until(lambda: len(w.answers("/strict")) == 2, timeout=20)
            except TimeoutError:
                pytest.fail("Envoy never reached the names:\n" + w.diagnostics())
            yield w
        finally:
            envoy.stop()
            dragoman.stop()
    finally:
        dns.stop()
        for backend in backends:
            backend.stop()


@pytest.fixture(autouse=True)
def no_rejected_updates(world: World) -> Iterator[None]:
    yield
    assert rejected_updates(world.envoy) == {}, world.diagnostics()


def test_a_logical_cluster_races_the_families_and_loses_no_request(world: World) -> None:
    answers = world.answers("/logical")
    assert answers == Counter({"v4": REQUESTS}), world.diagnostics()


def test_a_strict_cluster_sends_some_requests_to_the_dead_address(world: World) -> None:
    """The contrast: a host of each address, balanced in turn; the IPv6 one refuses."""
    answers = world.answers("/strict")
    failed = sum(n for answer, n in answers.items() if answer != "v4")
    assert answers["v4"] > 0 and failed > 0, answers


@pytest.mark.parametrize(("path", "backend"), [("/v6-first", "v6"), ("/v4-first", "v4")])
def test_the_first_family_decides_which_address_is_tried_first(
    world: World, path: str, backend: str
) -> None:
    answers = world.answers(path)
    assert answers == Counter({backend: REQUESTS}), world.diagnostics()
