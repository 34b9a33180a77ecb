"""What `dragoman serve --manifests` loads: heavy libraries only when the configuration needs
them. `cryptography` (about 9 MiB of the process) is loaded by the first certificate to
check, `prometheus_client` and `importlib.metadata` (about 7 MiB) by the operations server
that serves metrics, the `kubernetes` client only in Kubernetes mode.

Each case runs the real command in a fresh interpreter, waits until it serves xDS, reads
`sys.modules` from inside that process and stops it with SIGTERM.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.builders import (
    external_service,
    gateway,
    http_route,
    listener,
    listener_tls,
    yaml_text,
)
from tests.support.certificates import certificate_authority
from tests.support.harness import free_port

# Runs `dragoman serve` on the main thread (its signal handlers need it); a second thread
# waits for the xDS port, prints the loaded modules, then stops the server.
PROBE = textwrap.dedent(
    """
    import json, os, signal, socket, sys, threading, time
    from dragoman.cli import main

    port = int(sys.argv[2])

    def probe():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        loaded = sorted(sys.modules)
        print(json.dumps(loaded), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=probe, daemon=True).start()
    sys.exit(main([
        "serve", "--manifests", sys.argv[1], "--xds-address", f"127.0.0.1:{port}",
        *sys.argv[3:],
    ]))
    """
)

SERVICE = yaml_text(
    external_service("web", "web.example.test", 80, port_name="http"),
    http_route("web", "web", 80),
)
HTTP_GATEWAY = yaml_text(gateway(port=8080))


def loaded_while_serving(manifests: Path, *args: str) -> set[str]:
    """Modules loaded (and their top-level packages) while serving `manifests`."""
    completed = subprocess.run(
        [sys.executable, "-c", PROBE, str(manifests), str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    modules = set(json.loads(completed.stdout.splitlines()[-1]))
    return modules | {name.split(".")[0] for name in modules}


def test_plaintext_serving_of_routes_loads_neither_cryptography_nor_kubernetes(
    tmp_path: Path,
) -> None:
    (tmp_path / "gateway.yaml").write_text(HTTP_GATEWAY)
    (tmp_path / "web.yaml").write_text(SERVICE)
    loaded = loaded_while_serving(tmp_path, "--metrics-address", "off")
    assert {"dragoman", "grpc", "yaml"} <= loaded  # the probe saw a serving process
    assert "cryptography" not in loaded
    assert "kubernetes" not in loaded
    assert "prometheus_client" not in loaded and "importlib.metadata" not in loaded


def test_the_operations_server_loads_prometheus_client(tmp_path: Path) -> None:
    (tmp_path / "gateway.yaml").write_text(HTTP_GATEWAY)
    (tmp_path / "web.yaml").write_text(SERVICE)
    loaded = loaded_while_serving(tmp_path, "--metrics-address", f"127.0.0.1:{free_port()}")
    assert "prometheus_client" in loaded
    assert "cryptography" not in loaded


def test_a_certificate_to_check_loads_cryptography(tmp_path: Path) -> None:
    """The same probe sees `cryptography` once an HTTPS listener's Secret must be checked."""
    pem = certificate_authority().issue("web.example.test")
    (tmp_path / "gateway.yaml").write_text(
        yaml_text(
            gateway(
                listeners=[
                    listener(
                        "https",
                        8443,
                        "HTTPS",
                        tls=listener_tls({"kind": "Secret", "name": "web-tls"}),
                    )
                ]
            )
        )
    )
    (tmp_path / "secret.yaml").write_text(pem.secret_yaml("web-tls"))
    (tmp_path / "web.yaml").write_text(SERVICE)
    loaded = loaded_while_serving(tmp_path, "--metrics-address", "off")
    assert "cryptography" in loaded
    assert "kubernetes" not in loaded
