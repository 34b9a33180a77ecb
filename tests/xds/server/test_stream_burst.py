"""A burst of new streams the server has not taken up yet (a reconnect storm: the server takes
one a turn of its event loop) is served whole. gRPC's own bound on such streams cancels them
at random once 1,000 wait; the server's bound is `XdsLimits.max_waiting_streams`."""

from __future__ import annotations

import asyncio
import json
import select
import subprocess
import sys
import time

from dragoman.dag.model import ALL_GATEWAYS
from dragoman.xds.server.grpc_server import bound_port, start_xds_server
from dragoman.xds.server.limits import XdsLimits
from dragoman.xds.server.snapshot_cache import SnapshotCache
from tests.support.xds_builders import eds_cluster, snapshot

# Past gRPC's default soft bound (1,000), where it cancels some at random (61 and 62 of
# 1,500 in two runs).
STREAMS = 1500
# After the last request is handed to gRPC: time for the server's gRPC threads to read it.
SETTLE_S = 1.0
SENT_TIMEOUT_S = 60.0


def test_a_burst_of_waiting_streams_is_served_whole() -> None:
    async def scenario() -> dict[str, object]:
        cache = SnapshotCache()
        cache.set_snapshots({ALL_GATEWAYS: snapshot(clusters=[eds_cluster("a")])})
        server = await start_xds_server(cache, "127.0.0.1:0")
        address = f"127.0.0.1:{bound_port(server)}"
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.stream_burst", address, str(STREAMS)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # The event loop is held on purpose until every stream has arrived: none is taken
            # up meanwhile, so all of them wait in gRPC at once, as in a storm.
            assert child.stdout is not None
            readable, _, _ = select.select([child.stdout], [], [], SENT_TIMEOUT_S)
            assert readable, f"the streams were not all sent within {SENT_TIMEOUT_S:.0f} s"
            assert child.stdout.readline().strip() == "sent"
            time.sleep(SETTLE_S)
            loop = asyncio.get_running_loop()
            line = await asyncio.wait_for(loop.run_in_executor(None, child.stdout.readline), 120)
            return dict(json.loads(line))
        finally:
            child.kill()
            child.wait()
            await server.stop(None)

    outcome = asyncio.run(scenario())
    assert outcome == {"answered": STREAMS, "failed": {}}


def test_the_bound_on_waiting_streams_is_never_below_the_connections_allowed() -> None:
    def waiting(limits: XdsLimits) -> tuple[int | None, int | None]:
        options = dict(limits.grpc_options())
        return (
            options.get("grpc.server.max_pending_requests"),
            options.get("grpc.server.max_pending_requests_hard_limit"),
        )

    assert waiting(XdsLimits()) == (10_000, 10_000)
    assert waiting(XdsLimits(max_connections=25_000)) == (25_000, 25_000)
    assert waiting(XdsLimits(max_connections=None, max_waiting_streams=2_000)) == (2_000, 2_000)


def test_a_stream_may_wait_five_minutes_to_be_taken_up() -> None:
    options = dict(XdsLimits().grpc_options())
    assert options["grpc.server_max_unrequested_time_in_server"] == 300  # gRPC's own: 30 s
