"""End to end: per-type Envoys whose bootstrap names its cluster for dragoman something else
than `dragoman-xds` (`xds_cluster`, as in many hand-written bootstraps).

- `serve --xds-cluster-name xds_cluster` with a bootstrap from `dragoman bootstrap
  --xds-transport per-type --xds-cluster-name xds_cluster`: EDS clusters and RDS listeners
  warm, and requests reach the pods;
- an Envoy whose bootstrap has no `xds_cluster`: Envoy refuses the clusters and listeners,
  and dragoman's log names the cluster and the flag;
- an Envoy whose `xds_cluster` leads elsewhere (CDS and LDS come through `dragoman-xds`): it
  ACKs, but its EDS subscription never arrives, and dragoman's log says so, naming the node.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dragoman.demo.envoy import EnvoyProcess
from dragoman.demo.http import wait_until
from dragoman.demo.sample_backends import EchoBackend
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_message, bootstrap_yaml, xds_cluster
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from tests.support.builders import endpoint_slice, gateway, http_route, service, yaml_text
from tests.support.harness import DragomanProcess, free_port, get_json


def web_manifests(listener: int, port: int) -> str:
    """A Gateway `e2e` and one pod-backed Service `web` (port 80 → `port` on 127.0.0.2)."""
    return yaml_text(
        gateway("e2e", listener),
        service("web", 80, port),
        endpoint_slice("web", port, "127.0.0.2"),
        http_route("web", "web", 80, parents=("e2e",)),
    )


def envoy(root: Path, name: str, bootstrap: str) -> EnvoyProcess:
    workdir = root / name
    workdir.mkdir()
    admin = workdir / "admin.sock"
    bootstrap = bootstrap.replace("/tmp/dragoman-envoy-admin.sock", str(admin))
    process = EnvoyProcess(bootstrap, workdir, admin, workdir / "envoy.log", concurrency=1)
    process.start()
    return process


def test_per_type_envoys_with_another_name_for_the_xds_cluster(tmp_path: Path) -> None:
    port = free_port("127.0.0.2")
    listener = free_port()
    backend = EchoBackend("web", host="127.0.0.2", port=port).start()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(web_manifests(listener, port))
    xds = f"127.0.0.1:{free_port()}"
    dragoman = DragomanProcess(
        manifests, xds, tmp_path / "dragoman.log", ["--xds-cluster-name", "xds_cluster"]
    ).start()
    # The bootstrap the CLI prints, as a user would take it.
    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "dragoman",
            "bootstrap",
            "--xds-address",
            xds,
            "--xds-transport",
            "per-type",
            "--xds-cluster-name",
            "xds_cluster",
            "--node-id",
            "named-right",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert "xds_cluster" in printed and "dragoman-xds" not in printed
    lacking = bootstrap_yaml(xds, node_id="lacking", node_cluster="edge", xds_transport="per-type")
    # A cluster by that name, leading to a port where nothing listens.
    elsewhere = bootstrap_message(
        xds, node_id="elsewhere", node_cluster="edge", xds_transport="per-type"
    )
    dead = xds_cluster("127.0.0.1", free_port(), system_resolver=False, name="xds_cluster")
    elsewhere.static_resources.clusters.append(dead)
    elsewhere_yaml = dump_yaml(to_json_mapping(elsewhere))
    proxies = []
    try:
        proxies.append(envoy(tmp_path, "right", printed))
        wait_until(
            lambda: get_json(f"http://127.0.0.1:{listener}/")[1].get("backend") == "web",
            timeout=20,
        )
        proxies.append(envoy(tmp_path, "lacking", lacking))
        wait_until(lambda: "has no bootstrap cluster named 'xds_cluster'" in dragoman.log(), 20)
        hint = [line for line in dragoman.log().splitlines() if "has no bootstrap cluster" in line]
        assert all("'lacking'" in line and "--xds-cluster-name" in line for line in hint), hint
        proxies.append(envoy(tmp_path, "elsewhere", elsewhere_yaml))
        # The default wait is Envoy's initial fetch timeout (15 s). (Envoy asks for listeners
        # only once its clusters are initialised, 15 s later still: the RDS side of the
        # warning is shown in tests/xds/server/test_dependent_streams.py.)
        wait_until(lambda: "opened none" in dragoman.log(), timeout=40)
        warned = [line for line in dragoman.log().splitlines() if "opened none" in line]
        assert all("'elsewhere'" in line for line in warned), warned
        assert "per-type EDS stream" in warned[0] and "'xds_cluster'" in warned[0], warned
        # The Envoy configured right still serves.
        assert get_json(f"http://127.0.0.1:{listener}/")[1].get("backend") == "web"
    finally:
        for proxy in proxies:
            proxy.stop()
        dragoman.stop()
        backend.stop()
