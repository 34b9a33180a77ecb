"""`dragoman serve`'s reload: files are decoded and parsed off the event loop every xDS
stream shares, so a large file delays no stream while it is read."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig

DEPLOYMENT = """---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: d{index}, namespace: default, labels: {{app: web, tier: t{index}}}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: "example/web:1", ports: [{{containerPort: 8080}}]}}]
"""


def test_reload_keeps_the_event_loop_responsive(tmp_path: Path) -> None:
    # Legal, large, and nothing dragoman serves: all the time goes to decoding and parsing
    # (enough documents that even the C loader takes well over 0.3 s).
    (tmp_path / "big.yaml").write_text("".join(DEPLOYMENT.format(index=i) for i in range(10000)))
    server = ManifestServer(ServeConfig(manifests=tmp_path, xds_address="127.0.0.1:0"))

    async def scenario() -> tuple[float, float]:
        lags: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            while not done.is_set():
                before = time.perf_counter()
                await asyncio.sleep(0.005)
                lags.append(time.perf_counter() - before - 0.005)

        task = asyncio.create_task(ticker())
        started = time.perf_counter()
        await server.reload()
        took = time.perf_counter() - started
        done.set()
        await task
        return took, max(lags, default=took)

    took, worst_lag = asyncio.run(scenario())

    assert server.controller.dag is not None  # the reload happened and built
    # The loop went on ticking while the file was read: its worst stall is a small part of
    # the reload (parsed on the loop, the stall was the whole reload).
    assert took > 0.3, took
    assert worst_lag < took / 3, (worst_lag, took)
