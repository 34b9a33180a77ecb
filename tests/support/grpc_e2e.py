"""The proxyless gRPC end-to-end tests' world: manifests for the xDS clients of grpcio and
grpc-js (tests/grpcjs), gRPC health servers as backends that count the calls they answer, the
README's bootstrap, and the probe processes that dial `xds:///` targets.

gRPC resolves an ExternalName's host with its own resolver, which cannot be pointed at a
test DNS responder, and the machine's own names are single labels (or localhost) that
dragoman refuses. So the client runs in a user and mount namespace of its own that sees a
private /etc/hosts naming the external backend (`private_hosts`); the machine's file is
never touched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from concurrent import futures
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.support.builders import endpoint_slice, yaml_text

EXTERNAL_HOST = "backend.grpc.test"
EXTERNAL_ADDRESS = "127.0.0.5"
GATEWAY_PORT = 18080  # a Gateway listener port: only part of the names gRPC clients dial
MOVED_HOST = "moved.grpc.test"  # a route hostname whose one rule is a redirect
PROBE = Path(__file__).parent / "grpc_probe.py"
# grpc-js and grpc-js-xds, pinned by package-lock.json, installed by `npm ci` (`make test`).
GRPCJS_DIR = Path(__file__).parents[1] / "grpcjs"
README = Path(__file__).parents[2] / "README.md"
NODE_ID = "grpc-e2e"


def manifests(pod_port: int, port: int) -> dict[str, str]:
    """Every Service port is `port`, where the external backend listens (an in-cluster-first
    ExternalName falls back to the same port of its host); pods listen on `pod_port`."""
    return {
        "services.yaml": f"""
            apiVersion: v1
            kind: Service
            metadata: {{name: web, namespace: default}}
            spec:
              selector: {{app: web}}
              ports: [{{name: grpc, port: {port}, targetPort: {pod_port}}}]
            ---
            apiVersion: v1
            kind: Service
            metadata: {{name: outside, namespace: default}}
            spec:
              type: ExternalName
              externalName: {EXTERNAL_HOST}.
              ports: [{{port: {port}}}]
            ---
            apiVersion: v1
            kind: Service
            metadata:
              name: hybrid
              namespace: default
              annotations: {{dragoman.dev/prefer-service: web}}
            spec:
              type: ExternalName
              externalName: {EXTERNAL_HOST}
              ports: [{{port: {port}}}]
            """,
        "slices.yaml": web_slice("127.0.0.2", pod_port),
        "routes.yaml": f"""
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {{name: gw, namespace: default}}
            spec:
              gatewayClassName: dragoman
              listeners: [{{name: http, protocol: HTTP, port: {GATEWAY_PORT}}}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: GRPCRoute
            metadata: {{name: greeter, namespace: default}}
            spec:
              parentRefs: [{{name: gw}}]
              hostnames: [greeter.grpc.test]
              rules:
                - matches: [{{method: {{service: grpc.health.v1.Health, method: Check}}}}]
                  backendRefs: [{{name: web, port: {port}}}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {{name: shop, namespace: default}}
            spec:
              parentRefs: [{{name: gw}}]
              hostnames: [shop.grpc.test]
              rules:
                - matches: [{{path: {{type: PathPrefix, value: /grpc.health.v1.Health}}}}]
                  # gRPC clients get what they can do of it (gRFC A44), and accept it.
                  retry: {{attempts: 2, codes: [400, 503], backoff: 100ms}}
                  backendRefs: [{{name: outside, port: {port}}}]
                - matches: [{{path: {{type: PathPrefix, value: /old}}}}]
                  filters: [{{type: RequestRedirect, requestRedirect: {{hostname: new.test}}}}]
                - matches: [{{headers: [{{name: x-tenant, value: blue}}]}}]
                  backendRefs: [{{name: missing, port: 80}}]
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {{name: moved, namespace: default}}
            spec:
              parentRefs: [{{name: gw}}]
              hostnames: [{MOVED_HOST}]
              rules:
                # gRPC clients cannot follow a redirect: every call fails, at once.
                - filters: [{{type: RequestRedirect, requestRedirect: {{hostname: new.test}}}}]
            """,
    }


def web_slice(
    address: str, port: int, ready: bool = True, zone: str = "zone-a", name: str = "web-1"
) -> str:
    """A slice of `web` (its port grpc) as a manifest file; `zone` "" leaves the endpoint
    without one."""
    return yaml_text(
        endpoint_slice(
            "web", {"grpc": port}, address, ready=ready, name=name, zones={address: zone}
        )
    )


class CountingHealth(health.HealthServicer):
    """grpcio's Health service, counting the Checks it answers by the service asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.checks: Counter[str] = Counter()

    def Check(  # the gRPC method's name
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self.checks[request.service] += 1
        return super().Check(request, context)


def health_server(address: str, port: int, name: str) -> tuple[grpc.Server, int]:
    """A gRPC server whose Health service knows only the service `name` (and the server's
    own, ""): a Check for `name` answers SERVING here and NOT_FOUND on every other backend."""
    server, bound, _ = counting_health_server(address, port, name)
    return server, bound


def fails_at_once(probe: Probe, target: str) -> dict[str, str]:
    """The answer to a call that must fail with UNAVAILABLE (a redirect, a rule without a
    valid backend), checked to have come before gRPC's 15 s wait for a missing resource."""
    started = time.monotonic()
    answer = probe.check(target, "", timeout=10)
    assert answer.get("error", "").startswith("UNAVAILABLE"), (target, answer)
    assert time.monotonic() - started < 5, (target, answer)
    return answer


def counting_health_server(
    address: str, port: int, name: str
) -> tuple[grpc.Server, int, CountingHealth]:
    """`health_server`, with the servicer that counts the calls it answered."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = CountingHealth()
    servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"{address}:{port}")
    server.start()
    return server, bound, servicer


def readme_bootstrap(server_uri: str, channel_creds: dict[str, object]) -> dict[str, object]:
    """The proxyless bootstrap the README shows (section "Proxyless gRPC"), pointed at
    `server_uri` with `channel_creds` and the tests' node id: what the tests dial with is
    what users are told to write."""
    section = README.read_text().split("\n## Proxyless gRPC\n", 1)[1]
    text = section.split("```json\n", 1)[1].split("```", 1)[0]
    bootstrap: dict[str, object] = json.loads(text)
    servers = bootstrap["xds_servers"]
    node = bootstrap["node"]
    assert isinstance(servers, list) and len(servers) == 1 and isinstance(node, dict)
    servers[0] |= {"server_uri": server_uri, "channel_creds": [channel_creds]}
    node["id"] = NODE_ID
    return bootstrap


def grpcjs_probe(*arguments: str) -> list[str]:
    """The command running tests/grpcjs/probe.js (grpc_probe.py's protocol, on grpc-js)."""
    node = shutil.which("node")
    assert node, (
        "the grpc-js proxyless tests need Node.js (`node` and `npm`, version 18 or later) on "
        "the PATH: install it (Debian: apt-get install nodejs npm), then run `make test`"
    )
    installed = GRPCJS_DIR / "node_modules" / "@grpc" / "grpc-js-xds" / "package.json"
    assert installed.is_file(), (
        f"grpc-js-xds is not installed in {GRPCJS_DIR}: run `npm ci` there (`make test` does)"
    )
    return [node, str(GRPCJS_DIR / "probe.js"), *arguments]


def private_hosts(hosts: Path, command: list[str]) -> list[str]:
    """`command` run seeing `hosts` as /etc/hosts, in namespaces of its own."""
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    unshare = shutil.which("unshare")
    assert unshare, "the test needs util-linux unshare (a private /etc/hosts)"
    namespaces = [unshare, "--user", "--map-root-user", "--mount"]
    return [*namespaces, "sh", "-c", script, str(hosts), *command]


class Probe:
    """The grpc_probe.py process: one health check per call, answered in order."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.stderr = log.open("wb")
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            text=True,
        )

    def check(self, target: str, service: str, timeout: float = 10) -> dict[str, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"target": target, "service": service, "timeout": timeout}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the gRPC client exited ({self.process.poll()})"
        answer: dict[str, str] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.stderr.close()
