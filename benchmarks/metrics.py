"""What dragoman's Prometheus metrics cost the controller: full builds and EDS fast-path
updates of translate.py's store, timed with the metrics observer and without, interleaved.

    python benchmarks/metrics.py                 # N = 10,000 Services, 3 full builds each
    python benchmarks/metrics.py --size 2000 --repeat 5 --eds-repeat 50

The fan-out side (xDS hooks per response and per ACK) and the size of a scrape with 1,000
streams connected are measured by `fanout.py --metrics`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import time
from collections.abc import Callable

from translate import endpoint_slice, synthesize

from dragoman.runtime.controller import Controller
from dragoman.runtime.metrics import Metrics
from dragoman.store import Store
from dragoman.xds.cache import SnapshotCache


def controller(metrics: bool) -> Controller:
    made = Controller(SnapshotCache())
    if metrics:
        observer = Metrics()
        observer.state.controller = made
        made.observers.append(observer.built)
    return made


def timed(run: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="Services (default 10,000)")
    parser.add_argument("--repeat", type=int, default=3, help="full builds per setting")
    parser.add_argument("--eds-repeat", type=int, default=30, help="EDS updates per setting")
    args = parser.parse_args(argv)
    store = Store.from_objects(synthesize(args.size))
    full: dict[bool, list[float]] = {False: [], True: []}
    eds: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeat):
        for metrics in (False, True):  # interleaved: drift in the machine's load hits both
            made = controller(metrics)
            full[metrics].append(timed(lambda made=made: made.update(store)))
            current = store
            for generation in range(1, args.eds_repeat // args.repeat + 1):
                slices = dict(current.endpoint_slices)
                changed = endpoint_slice(0, generation)
                slices[(changed.meta.namespace, changed.meta.name)] = changed
                current = dataclasses.replace(current, endpoint_slices=slices)
                eds[metrics].append(timed(lambda made=made, current=current: made.update(current)))
    print(f"dragoman metrics cost, N={args.size:,} Services, Python {sys.version.split()[0]}")
    for name, runs in (("full build", full), ("EDS fast path", eds)):
        off, on = statistics.median(runs[False]), statistics.median(runs[True])
        best_off, best_on = min(runs[False]), min(runs[True])
        print(
            f"  {name:<14} median off {off * 1000:8.1f} ms, on {on * 1000:8.1f} ms "
            f"({(on - off) / off * 100:+.1f}%); best off {best_off * 1000:8.1f} ms, "
            f"on {best_on * 1000:8.1f} ms ({(best_on - best_off) / best_off * 100:+.1f}%); "
            f"{len(runs[False])} runs each"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
