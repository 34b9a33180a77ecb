"""What dragoman's Prometheus metrics cost the controller: full builds and EDS fast-path
updates of translate.py's store, timed with the metrics observer and without.

    python benchmarks/metrics.py                 # N = 10,000 Services, 4 runs of each
    python benchmarks/metrics.py --size 2000 --repeat 6 --eds-updates 50

Each run is a fresh process (a full build's heap growth would otherwise slow whichever
setting runs later), in the order off, on, on, off, off, on, ... so that drift in the
machine's load hits both settings alike. The fan-out side (xDS hooks per response and per
ACK) and the size of a scrape with 1,000 streams connected are measured by
`fanout.py --metrics`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import subprocess
import sys
import time

from translate import endpoint_slice, synthesize

from dragoman.runtime.controller import Controller
from dragoman.runtime.metrics import Metrics
from dragoman.store import Store
from dragoman.xds.server.snapshot_cache import SnapshotCache


def child(size: int, metrics: bool, eds_updates: int) -> None:
    """One full build, then `eds_updates` EDS fast-path updates; prints seconds as JSON."""
    store = Store.from_objects(synthesize(size))
    controller = Controller(SnapshotCache())
    if metrics:
        observer = Metrics()
        observer.state.controller = controller
        controller.observers.append(observer.built)
    gc.collect()
    started = time.perf_counter()
    controller.update(store)
    full = time.perf_counter() - started
    eds = []
    for generation in range(1, eds_updates + 1):
        slices = dict(store.endpoint_slices)
        changed = endpoint_slice(0, generation)
        slices[(changed.meta.namespace, changed.meta.name)] = changed
        store = dataclasses.replace(store, endpoint_slices=slices)
        started = time.perf_counter()
        result = controller.update(store)
        eds.append(time.perf_counter() - started)
        assert result.kind == "endpoints", result.kind
    print(json.dumps({"full": full, "eds": eds}))


def hook_costs(calls: int = 200_000) -> dict[str, float]:
    """Seconds per call of each hook the hot paths call, measured alone: a bound on what the
    metrics add that the machine's noise cannot hide."""
    from dragoman.runtime.controller import UpdateResult
    from dragoman.snapshots.resources import CLUSTER
    from dragoman.xds.protocol.events import Ack
    from dragoman.xds.protocol.sotw_stream import SotwStream
    from dragoman.xds.protocol.wire import SotwResponse
    from dragoman.xds.server.stream_registry import ConnectedStream

    metrics = Metrics()
    hooks = metrics.xds_callbacks()
    assert hooks.on_response is not None and hooks.on_event is not None
    on_response, on_event = hooks.on_response, hooks.on_event
    stream = ConnectedStream(1, "ADS", "ipv4:127.0.0.1:1", SotwStream())
    response = SotwResponse(CLUSTER, "v1", "1", {}, b"")
    ack = Ack(CLUSTER, "v1", "1")
    result = UpdateResult("endpoints", 0.001)
    costs = {}
    for name, call in (
        ("per response sent", lambda: on_response(stream, response)),
        ("per ACK", lambda: (on_response(stream, response), on_event(stream, ack))),
        ("per build", lambda: metrics.built(result)),
    ):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        costs[name] = (time.perf_counter() - started) / calls
    costs["per ACK"] -= costs["per response sent"]
    return costs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="Services (default 10,000)")
    parser.add_argument("--repeat", type=int, default=4, help="runs of each setting")
    parser.add_argument("--eds-updates", type=int, default=20, help="EDS updates per run")
    parser.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.size, args.child == "on", args.eds_updates)
        return 0
    full: dict[str, list[float]] = {"off": [], "on": []}
    eds: dict[str, list[float]] = {"off": [], "on": []}
    for index in range(args.repeat):
        for setting in ("off", "on") if index % 2 == 0 else ("on", "off"):
            output = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    setting,
                    "--size",
                    str(args.size),
                    "--eds-updates",
                    str(args.eds_updates),
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            timings = json.loads(output)
            full[setting].append(timings["full"])
            eds[setting].extend(timings["eds"])
    print(f"dragoman metrics cost, N={args.size:,} Services, Python {sys.version.split()[0]}")
    for name, seconds in hook_costs().items():
        print(f"  hook {name:<18} {seconds * 1e6:6.2f} µs")
    for name, runs in (("full build", full), ("EDS fast path", eds)):
        off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
        best_off, best_on = min(runs["off"]), min(runs["on"])
        print(
            f"  {name:<14} median off {off * 1000:8.1f} ms, on {on * 1000:8.1f} ms "
            f"({(on - off) / off * 100:+.1f}%); best off {best_off * 1000:8.1f} ms, "
            f"on {best_on * 1000:8.1f} ms ({(best_on - best_off) / best_off * 100:+.1f}%); "
            f"{len(runs['off'])} runs each"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
