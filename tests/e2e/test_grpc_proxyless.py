"""End to end with grpcio's own xDS client: `dragoman serve` on a manifest directory, gRPC
health servers on loopback, and a proxyless client with the README's bootstrap dialing
`xds:///...` targets for a pod-backed Service, an ExternalName Service, an in-cluster-first
ExternalName, a GRPCRoute hostname and an HTTPRoute hostname.

gRPC resolves an ExternalName's host with its own resolver, which cannot be pointed at a
test DNS responder, and the machine's own names are single labels (or localhost) that
dragoman refuses. So the client runs in a user and mount namespace of its own that sees a
private /etc/hosts naming the external backend; the machine's file is never touched.
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

from tests.support.grpc_e2e import (
    EXTERNAL_ADDRESS,
    EXTERNAL_HOST,
    GATEWAY_PORT,
    MOVED_HOST,
    NODE_ID,
    PROBE,
    Probe,
    fails_at_once,
    health_server,
    manifests,
    private_hosts,
    readme_bootstrap,
    web_slice,
)
from tests.support.harness import DragomanProcess, free_port, write_manifest


@dataclass
class World:
    root: Path
    dragoman: DragomanProcess
    probe: Probe
    pod_port: int
    port: int

    def write(self, name: str, text: str) -> None:
        write_manifest(self.root / "manifests", name, text)

    def serving(self, target: str, service: str, within: float = 15) -> dict[str, str]:
        """Check until SERVING (configuration reaches the client on its own time)."""
        deadline = time.monotonic() + within
        while True:
            answer = self.probe.check(target, service, timeout=5)
            if answer.get("status") == "SERVING" or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    servers: list[grpc.Server] = []
    dragoman: DragomanProcess | None = None
    probe: Probe | None = None
    try:
        pod, pod_port = health_server("127.0.0.2", 0, "pod-a")
        servers.append(pod)
        moved, _ = health_server("127.0.0.3", pod_port, "pod-b")
        servers.append(moved)
        outside, port = health_server(EXTERNAL_ADDRESS, 0, "external")
        servers.append(outside)

        directory = tmp_path / "manifests"
        directory.mkdir()
        for name, text in manifests(pod_port, port).items():
            (directory / name).write_text(textwrap.dedent(text))
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(directory, xds, tmp_path / "dragoman.log").start()

        hosts = tmp_path / "hosts"
        hosts.write_text(f"{EXTERNAL_ADDRESS} {EXTERNAL_HOST} {EXTERNAL_HOST}.\n")
        bootstrap = readme_bootstrap(xds, {"type": "insecure"})
        env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP_CONFIG": json.dumps(bootstrap)}
        command = private_hosts(hosts, [sys.executable, str(PROBE), "--lifetime", "120"])
        probe = Probe(command, env, tmp_path / "probe.log")
        yield World(tmp_path, dragoman, probe, pod_port, port)
    finally:
        if probe is not None:
            probe.stop()
        if dragoman is not None:
            dragoman.stop()
        for server in servers:
            server.stop(None)


def test_grpc_clients_reach_services_and_route_hostnames_through_xds(world: World) -> None:
    web = f"xds:///web.default.svc.cluster.local:{world.port}"
    hybrid = f"xds:///hybrid.default.svc.cluster.local:{world.port}"
    greeter = f"xds:///greeter.grpc.test:{GATEWAY_PORT}"
    targets = [
        (web, "pod-a"),
        (f"xds:///outside.default.svc.cluster.local:{world.port}", "external"),
        (hybrid, "pod-a"),  # in-cluster first: the pods while they are ready
        (greeter, "pod-a"),
        (f"xds:///shop.grpc.test:{GATEWAY_PORT}", "external"),
    ]
    for target, service in targets:
        assert world.serving(target, service) == {"status": "SERVING"}, (
            target,
            world.dragoman.log()[-3000:],
        )
    # The call really went where the target says: the other backend does not know the name.
    answer = world.probe.check(web, "external")
    assert answer["error"].startswith("NOT_FOUND"), answer
    fails_at_once(world.probe, f"xds:///{MOVED_HOST}:{GATEWAY_PORT}")
    # gRPC accepted every resource it was sent (redirects and bad backends included).
    assert "NACK" not in world.dragoman.log()

    # dragoman clients (CSDS) lists the gRPC client with every type ACKed.
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
    # The CLIENT column (what the node says it is: "gRPC C-core ... 1.x") follows [gRPC].
    assert all(row[2] == "[gRPC]" and row[3] != "-" and "acked" in row for row in rows), (
        shown.stdout
    )

    # An endpoint change reaches the client through EDS: calls follow the pod.
    world.write("slices.yaml", web_slice("127.0.0.3", world.pod_port))
    for target in (web, greeter, hybrid):
        assert world.serving(target, "pod-b") == {"status": "SERVING"}, target

    # No ready pod: the in-cluster-first Service falls back to its external host.
    world.write("slices.yaml", web_slice("127.0.0.3", world.pod_port, ready=False))
    assert world.serving(hybrid, "external") == {"status": "SERVING"}
    assert "NACK" not in world.dragoman.log()


def test_grpc_clients_accept_the_clusters_backend_policies_shape(world: World) -> None:
    """Outlier detection, least request and ring hash are gRPC's own (gRFCs A50, A48, A42);
    what gRPC does not read (health checks, timeouts) must not make it refuse a cluster."""
    web = f"xds:///web.default.svc.cluster.local:{world.port}"
    outside = f"xds:///outside.default.svc.cluster.local:{world.port}"
    assert world.serving(web, "pod-a") == {"status": "SERVING"}
    world.write(
        "policies.yaml",
        """
        apiVersion: dragoman.dev/v1alpha1
        kind: BackendPolicy
        metadata: {name: web, namespace: default}
        spec:
          targetRefs: [{group: "", kind: Service, name: web}]
          healthCheck:
            active: {type: TCP, interval: 1s}
            passive: {consecutive5XxErrors: 3, failurePercentageThreshold: 90}
            panicThreshold: 0
          circuitBreaker: {maxParallelRequests: 100, maxConnections: 10}
          timeout: {tcp: {connectTimeout: 2s}, http: {connectionIdleTimeout: 30s}}
          loadBalancer: {type: LeastRequest}
        ---
        apiVersion: dragoman.dev/v1alpha1
        kind: BackendPolicy
        metadata: {name: outside, namespace: default}
        spec:
          targetRefs: [{group: "", kind: Service, name: outside}]
          loadBalancer: {type: Random}
        """,
    )
    # The clusters changed (a policy on each): calls keep working on the new ones.
    deadline = time.monotonic() + 15
    while "outlier_detection" not in world.dragoman.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2)
    for target, service in ((web, "pod-a"), (outside, "external")):
        assert world.serving(target, service) == {"status": "SERVING"}, target
    log = world.dragoman.log()
    assert "NACK" not in log, log[-3000:]
    world.write(
        "policies.yaml",
        """
        apiVersion: dragoman.dev/v1alpha1
        kind: BackendPolicy
        metadata: {name: web, namespace: default}
        spec:
          targetRefs: [{group: "", kind: Service, name: web}]
          loadBalancer:
            type: ConsistentHash
            consistentHash: {type: Header, header: {name: x-tenant}}
        """,
    )
    time.sleep(2)
    assert world.serving(web, "pod-a") == {"status": "SERVING"}
    log = world.dragoman.log()
    assert "NACK" not in log, log[-3000:]


def test_grpc_clients_take_endpoints_from_zone_less_zoned_and_mixed_slices(world: World) -> None:
    """Most development clusters (and many real ones) put no zone on their endpoints: gRPC
    must still accept the CLA (a locality is always present) and follow each change."""
    web = f"xds:///web.default.svc.cluster.local:{world.port}"
    assert world.serving(web, "pod-a") == {"status": "SERVING"}  # zoned (zone-a)
    world.write("slices.yaml", web_slice("127.0.0.3", world.pod_port, zone=""))
    assert world.serving(web, "pod-b") == {"status": "SERVING"}  # zone-less
    # Mixed: one zone-less pod, one zoned; calls reach both localities.
    world.write("slices.yaml", web_slice("127.0.0.2", world.pod_port, zone=""))
    world.write(
        "slices-2.yaml", web_slice("127.0.0.3", world.pod_port, zone="zone-b", name="web-2")
    )
    reached = set()
    deadline = time.monotonic() + 20
    while reached != {"pod-a", "pod-b"} and time.monotonic() < deadline:
        for name in ("pod-a", "pod-b"):
            if world.probe.check(web, name, timeout=5).get("status") == "SERVING":
                reached.add(name)
        time.sleep(0.1)
    assert reached == {"pod-a", "pod-b"}, world.dragoman.log()[-3000:]
    log = world.dragoman.log()
    assert "NACK" not in log, log[-3000:]


def test_with_the_dns_check_grpc_clients_connect_to_the_checked_addresses(tmp_path: Path) -> None:
    """No private /etc/hosts this time: the client never resolves the external name. dragoman
    resolves it through a DNS responder, checks it, and serves the address over EDS."""
    from dragoman.demo.dns import DnsResponder

    servers: list[grpc.Server] = []
    dragoman: DragomanProcess | None = None
    probe: Probe | None = None
    dns = DnsResponder().start()
    try:
        pod, pod_port = health_server("127.0.0.2", 0, "pod-a")
        servers.append(pod)
        outside, port = health_server(EXTERNAL_ADDRESS, 0, "external")
        servers.append(outside)
        dns.set_a(EXTERNAL_HOST, EXTERNAL_ADDRESS)
        directory = tmp_path / "manifests"
        directory.mkdir()
        for name, text in manifests(pod_port, port).items():
            (directory / name).write_text(textwrap.dedent(text))
        config = tmp_path / "dragoman.yaml"
        config.write_text(
            "endpoints: {allowedNetworks: [127.0.0.0/8]}\n"
            "externalNames:\n"
            f"  allowedNetworks: [{EXTERNAL_ADDRESS}/32]\n"
            f"  dnsCheck: {{enabled: true, resolvers: ['127.0.0.1:{dns.port}']}}\n"
        )
        xds = f"127.0.0.1:{free_port()}"
        dragoman = DragomanProcess(
            directory, xds, tmp_path / "dragoman.log", ["--config", str(config)]
        ).start()
        bootstrap = readme_bootstrap(xds, {"type": "insecure"})
        env = {"PATH": "/usr/bin:/bin", "GRPC_XDS_BOOTSTRAP_CONFIG": json.dumps(bootstrap)}
        command = [sys.executable, str(PROBE), "--lifetime", "60"]
        probe = Probe(command, env, tmp_path / "probe.log")
        world = World(tmp_path, dragoman, probe, pod_port, port)
        outside_target = f"xds:///outside.default.svc.cluster.local:{port}"
        assert world.serving(outside_target, "external") == {"status": "SERVING"}, dragoman.log()[
            -3000:
        ]
        # sessionAffinity ClientIP: gRPC accepts the ring-hash cluster (it hashes each call
        # itself, source_ip being a proxy's notion).
        (directory / "sticky.yaml").write_text(
            textwrap.dedent(
                f"""
                apiVersion: v1
                kind: Service
                metadata: {{name: sticky, namespace: default}}
                spec:
                  selector: {{app: sticky}}
                  sessionAffinity: ClientIP
                  ports: [{{name: grpc, port: {port}, targetPort: {pod_port}}}]
                ---
                apiVersion: discovery.k8s.io/v1
                kind: EndpointSlice
                metadata:
                  name: sticky-1
                  namespace: default
                  labels: {{kubernetes.io/service-name: sticky}}
                addressType: IPv4
                ports: [{{name: grpc, port: {pod_port}}}]
                endpoints: [{{addresses: [127.0.0.2]}}]
                """
            )
        )
        sticky = f"xds:///sticky.default.svc.cluster.local:{port}"
        assert world.serving(sticky, "pod-a") == {"status": "SERVING"}, dragoman.log()[-3000:]
        # The client resolved nothing (the name is unknown to its own resolver), and gRPC
        # accepted every resource.
        assert "NACK" not in dragoman.log()
    finally:
        if probe is not None:
            probe.stop()
        if dragoman is not None:
            dragoman.stop()
        dns.stop()
        for server in servers:
            server.stop(None)
