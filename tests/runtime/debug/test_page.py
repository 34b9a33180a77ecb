"""/debug in a real headless browser (Debian's chromium): the DOM names the objects being
served, a route's matches and weights, endpoints that are not ready; a refused ExternalName
shows its reason, a connected client's NACK is shown (and what the client wrote cannot
inject markup); the picture fits windows 1,000 and 1,600 pixels wide (its style sheet
applied under the strict Content-Security-Policy); and the page refreshes what it shows by
itself, its script allowed by that policy."""

from __future__ import annotations

import asyncio
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import grpc
from envoy.config.core.v3.base_pb2 import Node

from dragoman.dag.options import BuildOptions
from dragoman.runtime.debug.pages import CONTENT_SECURITY_POLICY
from dragoman.runtime.debug.view import DebugView
from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig
from dragoman.runtime.ops_server import OpsServer
from dragoman.snapshots.resources import CLUSTER, LISTENER
from tests.support.builders import (
    backend_ref,
    endpoint_slice,
    external_service,
    gateway,
    http_route,
    match,
    rule,
    service,
    yaml_text,
)
from tests.support.feature_manifests import every_feature_dag
from tests.support.harness import free_port
from tests.support.served_world import until
from tests.support.xds_client import XdsClient

CHROMIUM_TIMEOUT_S = 90
HOSTILE_NACK = "bad <script>alert(1)</script> \x1b[31m listener"
WIDTHS = (1000, 1600)
BOX_FILL = (0xF4, 0xF7, 0xFB)  # the fill of a served object's box (svg rect in STYLE)

MANIFESTS = {
    "gateway.yaml": yaml_text(
        gateway("edge", 8080),
        http_route(
            "shop",
            rules=[
                rule(backend_ref("partner", 443), matches=[match("/api")]),
                rule(backend_ref("sneaky", 80), matches=[match("/local")]),
                rule(
                    backend_ref("web", 80, weight=3),
                    backend_ref("canary", 80, weight=1),
                    matches=[match("/cart", method="POST")],
                ),
                rule(backend_ref("web", 80)),
            ],
            parents=["edge"],
        ),
    ),
    "services.yaml": yaml_text(
        service("web", 80, 8080),
        service("canary", 80, 8080),
        external_service("partner", "api.partner.example"),
        external_service("sneaky", "localhost", 80),
    ),
    "endpoints.yaml": yaml_text(
        endpoint_slice("web", 8080, "10.0.0.1", "10.0.0.2", not_ready=["10.0.0.3"]),
        endpoint_slice("canary", 8080, "10.0.1.1", ready=False),
    ),
}


def chromium(
    url: str, workdir: Path, *mode: str, width: int = 1400
) -> subprocess.CompletedProcess[str]:
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
                "--hide-scrollbars",
                # The page's console (a refused style or script is reported there).
                "--enable-logging=stderr",
                f"--user-data-dir={profile}",
                f"--window-size={width},900",
                *mode,
                url,
            ],
            capture_output=True,
            text=True,
            timeout=CHROMIUM_TIMEOUT_S,
            check=False,
        )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB(A) bytes of an 8-bit PNG (as chromium writes them)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        offset += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    step = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * step
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - step] if x >= step else 0
            up, corner = previous[x], previous[x - step] if x >= step else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                pa, pb, pc = abs(guess - left), abs(guess - up), abs(guess - corner)
                near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + near) & 0xFF
        rows.append(
            bytes(line) if step == 3 else b"".join(line[x : x + 3] for x in range(0, stride, 4))
        )
        previous = line
    return width, height, rows


def columns_with(data: bytes, colour: tuple[int, int, int]) -> tuple[int, list[int]]:
    """The image's width and the x of every pixel column where `colour` appears."""
    width, _, rows = png_pixels(data)
    wanted = bytes(colour)
    found = set()
    for row in rows:
        for x in range(width):
            if row[3 * x : 3 * x + 3] == wanted:
                found.add(x)
    return width, sorted(found)


def test_the_debug_page_in_a_headless_browser(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name, text in MANIFESTS.items():
        (manifests / name).write_text(text)
    shots = {width: tmp_path / f"debug-{width}.png" for width in WIDTHS}

    async def scenario() -> tuple[subprocess.CompletedProcess[str], list[str]]:
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
        logs = []
        try:
            await client.subscribe(CLUSTER)
            await client.receive_acked()
            await client.subscribe(LISTENER)
            await client.nack(await client.receive(), HOSTILE_NACK)
            await until(lambda: server.metrics.nacks.labels("LDS")._value.get() == 1)
            assert server.ops is not None
            url = f"http://127.0.0.1:{server.ops.port}/debug"
            dom = await asyncio.to_thread(chromium, url, tmp_path, "--dump-dom")
            for width, shot in shots.items():
                taken = await asyncio.to_thread(
                    chromium, url, tmp_path, f"--screenshot={shot}", width=width
                )
                assert taken.returncode == 0, taken.stderr[-2000:]
                logs.append(taken.stderr)
        finally:
            client.cancel()
            await channel.close()
            stop.set()
            await asyncio.wait_for(task, 10)
        return dom, [dom.stderr, *logs]

    dom, logs = asyncio.run(scenario())
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
        "10.0.0.1:8080, 10.0.0.2:8080",
        # A route's matches and weight shares, on its edges.
        ">prefix /api</text>",
        ">prefix /cart POST</text>",
        ">75% (weight 3)</text>",
        ">25% (weight 1)</text>",
        # Endpoints that are not ready, greyed; a cluster with none ready, greyed whole.
        ">2 endpoints, 1 not ready</text>",
        'class="muted">not ready: 10.0.0.3:8080</text>',
        '<g class="node idle"><title>endpoints of default/canary/80</title>',
    ):
        assert name in page, name
    # The refused ExternalName, with its reason, in the picture and in the table; the
    # picture's line links to the table's row.
    assert "Service/default/sneaky" in page
    assert "externalName 'localhost' points to localhost (UnsafeExternalName)" in page
    assert '<a href="#problem-' in page and '<tr id="problem-' in page
    # The client and its NACK; its words are text, never markup: the one script is the page's.
    assert "envoy-7" in page and "NACK: bad &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script") == 1
    assert "\x1b" not in page
    # The strict policy refused nothing the page holds.
    for log in logs:
        assert "Content Security Policy" not in log, log[-2000:]
    # Each picture is a screenshot of the window's width in which the graph fits: boxes are
    # drawn (their fill, from the style sheet) from the left edge to near the right one,
    # the Endpoints column included, and none is cut at the right edge.
    for width, shot in shots.items():
        image_width, xs = columns_with(shot.read_bytes(), BOX_FILL)
        assert image_width == width
        assert xs and xs[0] < 0.1 * width, (width, xs[:3])
        assert 0.85 * width < xs[-1] < width - 5, (width, xs[-3:])


def test_the_page_refreshes_what_it_shows_without_a_reload(tmp_path: Path) -> None:
    """The first answer shows nothing built; the page's script fetches it again and puts
    the later answer in place (counting its refreshes: a reload would start at none)."""
    views = [DebugView(), DebugView(dag=every_feature_dag())]
    answers: list[DebugView] = []

    def next_view() -> DebugView:
        answers.append(views[min(len(answers), 1)])
        return answers[-1]

    async def scenario() -> subprocess.CompletedProcess[str]:
        ops = OpsServer("127.0.0.1:0", live=lambda: "", ready=lambda: "", debug_view=next_view)
        await ops.start()
        try:
            url = f"http://127.0.0.1:{ops.port}/debug?refresh=1"
            return await asyncio.to_thread(
                chromium, url, tmp_path, "--dump-dom", "--virtual-time-budget=4000"
            )
        finally:
            await ops.stop()

    dom = asyncio.run(scenario())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Content Security Policy" not in dom.stderr, dom.stderr[-2000:]
    page = dom.stdout
    assert len(answers) >= 2
    assert "Nothing built yet." not in page
    assert "Gateway/default/edge" in page
    assert 'data-refreshes="' in page
    assert 'id="refreshed">updated ' in page


def test_the_policy_allows_the_pages_own_style_and_script_only() -> None:
    policy = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["connect-src"] == "'self'"
    for directive in ("style-src", "script-src"):
        assert policy[directive].startswith("'sha256-"), policy[directive]
        assert "unsafe" not in policy[directive] and "*" not in policy[directive]
