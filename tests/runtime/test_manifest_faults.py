"""`dragoman serve` when files cannot be read, are half written, or the process restarts:
what the last good version of each file defined stays served (a real serve process, asked
over xDS)."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

from tests.support.serve_process import ServeProcess

SERVICES = """
    apiVersion: gateway.networking.k8s.io/v1
    kind: Gateway
    metadata: {name: edge, namespace: default}
    spec:
      gatewayClassName: dragoman
      listeners: [{name: http, protocol: HTTP, port: 8080}]
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: default}
    spec: {selector: {app: web}, ports: [{port: 80, targetPort: 8080}]}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: wed, namespace: default}
    spec: {selector: {app: wed}, ports: [{port: 80, targetPort: 8080}]}
    """


def route(backend: str) -> str:
    return f"""
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: shop, namespace: default}}
        spec:
          parentRefs: [{{name: edge}}]
          rules: [{{backendRefs: [{{name: {backend}, port: 80}}]}}]
        """


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    tmp = directory / f".{name}.tmp"
    tmp.write_text(textwrap.dedent(text))
    tmp.rename(path)
    return path


def served_backend(clusters: set[str]) -> str:
    """Which of the two Services the route's cluster is, or "" when no route is served."""
    names = {name for name in clusters if "/web" in name or "/wed" in name}
    return "web" if any("/web" in n for n in names) else "wed" if names else ""


def world(tmp_path: Path) -> Path:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    write(manifests, "services.yaml", SERVICES)
    write(manifests, "route.yaml", route("web"))
    return manifests


def test_a_file_that_cannot_be_read_is_kept_and_its_repair_is_seen_at_once(
    tmp_path: Path,
) -> None:
    manifests = world(tmp_path)
    serve = ServeProcess(manifests, tmp_path / "dragoman.log", obey_permissions=True).start()
    try:
        serve.until(lambda clusters: served_backend(clusters) == "web")
        time.sleep(1.0)  # the kernel watch is up (a thread starts it after the first build)
        path = manifests / "route.yaml"
        path.chmod(0)
        time.sleep(1.0)  # the kernel reported the attribute change long ago
        assert served_backend(serve.clusters()) == "web", serve.log()
        assert "route.yaml: cannot read: Permission denied" in serve.log()
        assert serve.metric("dragoman_manifest_files_unreadable") == 1
        # While unreadable, the file changes and keeps its stamp (same size, same mtime):
        # only its permission says so when it is repaired.
        before = os.stat(path)
        path.write_text(textwrap.dedent(route("wed")))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert os.stat(path).st_size == before.st_size
        time.sleep(0.5)
        assert served_backend(serve.clusters()) == "web"
        repaired = time.monotonic()
        path.chmod(0o644)
        serve.until(lambda clusters: served_backend(clusters) == "wed", timeout=5.0)
        assert time.monotonic() - repaired < 3.0  # at once, not at the minute's rescan
        assert serve.metric("dragoman_manifest_files_unreadable") == 0
    finally:
        serve.stop()


def test_a_file_written_in_place_is_served_once_its_writer_closes_it(tmp_path: Path) -> None:
    manifests = world(tmp_path)
    serve = ServeProcess(manifests, tmp_path / "dragoman.log").start()
    try:
        serve.until(lambda clusters: served_backend(clusters) == "web")
        time.sleep(1.0)  # the watch is up; a quiet moment: a change would be applied at once
        text = textwrap.dedent(route("wed"))
        half = text.index("  rules:")
        with (manifests / "route.yaml").open("w") as writing:  # truncated, then half written
            writing.write(text[:half])
            writing.flush()
            seen = set()
            for _ in range(10):  # a pause of a second and more, mid-write
                seen.add(served_backend(serve.clusters()))
                time.sleep(0.1)
            assert seen == {"web"}, serve.log()
            writing.write(text[half:])
        serve.until(lambda clusters: served_backend(clusters) == "wed", timeout=5.0)
    finally:
        serve.stop()


def test_a_restart_serves_what_a_broken_file_last_served_until_it_is_fixed(
    tmp_path: Path,
) -> None:
    manifests = world(tmp_path)
    state = tmp_path / "state"
    args = ("--state-dir", str(state))
    serve = ServeProcess(manifests, tmp_path / "first.log", args).start()
    try:
        serve.until(lambda clusters: served_backend(clusters) == "web")
        write(manifests, "route.yaml", "kind: HTTPRoute\nspec: {rules: [\n")  # a typo
        time.sleep(0.5)
        assert served_backend(serve.clusters()) == "web"
    finally:
        serve.stop()
    restarted = ServeProcess(manifests, tmp_path / "second.log", args).start()
    try:
        # Served from the first request on, and the file still reported as broken.
        assert served_backend(restarted.clusters()) == "web", restarted.log()
        assert "route.yaml: invalid YAML" in restarted.log()
        assert "(still serving its previous version (1 objects))" in restarted.log()
        write(manifests, "route.yaml", route("wed"))  # fixed
        restarted.until(lambda clusters: served_backend(clusters) == "wed", timeout=5.0)
    finally:
        restarted.stop()
    # Without the state, a restart has nothing to serve for the broken file.
    write(manifests, "route.yaml", "kind: HTTPRoute\nspec: {rules: [\n")
    bare = ServeProcess(manifests, tmp_path / "third.log").start()
    try:
        assert served_backend(bare.clusters()) == ""
    finally:
        bare.stop()


EXTERNAL = "api.partner.test"
NAMES = 40  # more names than the check resolves at once


def external_world(manifests: Path, port: int) -> None:
    """A route to one external name, and Services for many more that no route uses."""
    extra = "".join(
        f"""
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: other{i}, namespace: default}}
        spec: {{type: ExternalName, externalName: other{i}.partner.test, ports: [{{port: 80}}]}}
        ---
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: other{i}, namespace: default}}
        spec:
          parentRefs: [{{name: edge}}]
          hostnames: [other{i}.example]
          rules: [{{backendRefs: [{{name: other{i}, port: 80}}]}}]
        """
        for i in range(NAMES)
    )
    write(
        manifests,
        "partner.yaml",
        f"""
        apiVersion: gateway.networking.k8s.io/v1
        kind: Gateway
        metadata: {{name: edge, namespace: default}}
        spec:
          gatewayClassName: dragoman
          listeners: [{{name: http, protocol: HTTP, port: 8080}}]
        ---
        apiVersion: v1
        kind: Service
        metadata: {{name: partner, namespace: default}}
        spec: {{type: ExternalName, externalName: {EXTERNAL}, ports: [{{port: {port}}}]}}
        ---
        apiVersion: gateway.networking.k8s.io/v1
        kind: HTTPRoute
        metadata: {{name: partner, namespace: default}}
        spec:
          parentRefs: [{{name: edge}}]
          hostnames: [partner.example]
          rules: [{{backendRefs: [{{name: partner, port: {port}}}]}}]
        {extra}
        """,
    )


def serves_partner(clusters: set[str]) -> bool:
    return any("partner" in name and "other" not in name for name in clusters)


def test_a_restart_while_dns_is_down_serves_at_once_what_the_check_last_accepted(
    tmp_path: Path,
) -> None:
    import socket

    from dragoman.demo.dns import DnsResponder

    dns = DnsResponder(ttl=60).start()
    dns.set_a(EXTERNAL, "127.0.0.2")
    for i in range(NAMES):
        dns.set_a(f"other{i}.partner.test", "127.0.0.3")
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    external_world(manifests, 8443)
    timeout_s = 3
    config = tmp_path / "dns.yaml"
    config.write_text(
        "endpoints: {allowedNetworks: [127.0.0.0/8]}\n"
        "externalNames:\n"
        "  allowedNetworks: [127.0.0.2/32, 127.0.0.3/32]\n"
        "  dnsCheck:\n"
        "    enabled: true\n"
        f"    resolvers: ['127.0.0.1:{dns.port}']\n"
        f"    timeout: {timeout_s}s\n"
    )
    args = ("--state-dir", str(tmp_path / "state"), "--config", str(config))
    first = ServeProcess(manifests, tmp_path / "first.log", args).start()
    try:
        first.until(serves_partner)
        time.sleep(0.5)  # the answers are kept
    finally:
        first.stop()
    port = dns.port
    dns.stop()
    # The resolver is down: its port takes queries and never answers (each one times out).
    black_hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    black_hole.bind(("127.0.0.1", port))
    try:
        restarted = ServeProcess(manifests, tmp_path / "second.log", args)
        started = time.monotonic()
        restarted.start()
        try:
            clusters = restarted.clusters()
            seconds = time.monotonic() - started
            assert serves_partner(clusters), restarted.log()
            # Served before a single check could time out, let alone 40 names' worth.
            assert seconds < timeout_s, f"{seconds:.1f} s"
            time.sleep(timeout_s + 1)  # the checks time out: what was accepted stays
            assert serves_partner(restarted.clusters()), restarted.log()
        finally:
            restarted.stop()
    finally:
        black_hole.close()
