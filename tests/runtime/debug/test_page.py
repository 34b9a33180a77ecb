"""/debug in a real headless browser (Debian's chromium): the DOM names the objects being
served, a refused ExternalName shows its reason, a connected client's NACK is shown (and
what the client wrote cannot inject markup), and the screenshot is a picture."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.options import BuildOptions
from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig
from dragoman.snapshots.resources import CLUSTER, LISTENER
from tests.support.harness import free_port
from tests.support.served_world import GATEWAY, SERVICES, endpoints, until
from tests.support.xds_client import XdsClient

CHROMIUM_TIMEOUT_S = 90
HOSTILE_NACK = "bad <script>alert(1)</script> \x1b[31m listener"


def chromium(url: str, workdir: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary is not None, "Debian's chromium is needed (.ci/run installs it)"
    with tempfile.TemporaryDirectory(dir=workdir) as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1400,900",
                *mode,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=CHROMIUM_TIMEOUT_S,
            check=False,
        )


def test_the_debug_page_in_a_headless_browser(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, text in (
        ("gateway.yaml", GATEWAY),
        ("services.yaml", SERVICES),
        ("endpoints.yaml", endpoints("10.0.0.1", "10.0.0.2")),
    ):
        (manifests / name).write_text(textwrap.dedent(text))
    screenshot = tmp_path / "debug.png"

    async def scenario() -> tuple[subprocess.CompletedProcess[str], str]:
        config = ServeConfig(
            manifests=manifests,
            xds_address=f"127.0.0.1:{free_port()}",
            ops_address="127.0.0.1:0",
            build_options=BuildOptions(gateway_addresses=("203.0.113.10",)),
        )
        server = ManifestServer(config)
        stop = asyncio.Event()
        await server.start_ops()
        task = asyncio.create_task(server.run(stop))
        # The client's stream starts connecting when made: only once the server listens.
        await until(lambda: server.serving)
        channel = grpc.aio.insecure_channel(config.xds_address)
        client = XdsClient(channel, Node(id="envoy-7", cluster="default/edge"))
        try:
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            await client.subscribe(LISTENER)
            await client.nack(await client.receive(), HOSTILE_NACK)
            await until(lambda: server.metrics.nacks.labels("LDS")._value.get() == 1)
            assert server.ops is not None
            url = f"http://127.0.0.1:{server.ops.port}/debug"
            dom = await asyncio.to_thread(chromium, url, tmp_path, "--dump-dom")
            shot = await asyncio.to_thread(chromium, url, tmp_path, f"--screenshot={screenshot}")
            assert shot.returncode == 0, shot.stderr[-2000:]
        finally:
            client.cancel()
            await channel.close()
            stop.set()
            await asyncio.wait_for(task, 10)
        return dom, url

    dom, _ = asyncio.run(scenario())
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert "<svg" in page  # the picture is inline
    for name in (
        "Gateway/default/edge",
        "at 203.0.113.10",
        "http-8080 (http, port 8080)",
        "HTTPRoute/default/shop",
        "Service/default/web",
        "Service/default/partner",
        "default/web/80",
        "api.partner.example:443 (DNS)",
        "2 endpoints",
        "10.0.0.1:8080, 10.0.0.2:8080",
    ):
        assert name in page, name
    # The refused ExternalName, with its reason, in the picture and in the table.
    assert "Service/default/sneaky" in page
    assert "externalName 'localhost' points to localhost (UnsafeExternalName)" in page
    # The client and its NACK; its words are text, never markup.
    assert "envoy-7" in page and "NACK: bad &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>" not in page
    assert "\x1b" not in page
    # A picture: a PNG of the window's size with more than one colour's worth of bytes.
    data = screenshot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == 1400
    assert len(data) > 20_000, len(data)
