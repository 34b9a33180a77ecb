"""Memory of `dragoman serve` holding N Services: its RSS, and what keeps it allocated.

    python benchmarks/memory.py                         # N = 10,000, one file per Service
    python benchmarks/memory.py --services 1000 --clients 1
    python benchmarks/memory.py --pod-backed            # half the Services with slices
    python benchmarks/memory.py --one-file              # every object in one file
    python benchmarks/memory.py --no-tracemalloc        # the RSS figures alone

The workload of the propagation benchmark (`propagation.py`): N Services (ExternalName
`svcI.example.test`, or every odd one pod-backed with `--pod-backed`), one Gateway with an
HTTP listener, one HTTPRoute per Service; one file per Service, or every object in one file.

RSS: `dragoman serve` runs as a child process. `--clients` minimal ADS clients (SotW, the
client of `startup.py`) connect as nodes of the Gateway, ask for CDS and keep their streams
open once a response holding all N clusters arrived, as idle Envoys would. After `--settle`
seconds (the server trims freed memory once it has been quiet for a while) its RSS is read
three times, a second apart; printed with its peak (VmHWM) and the load average.

What stays allocated (unless `--no-tracemalloc`): a second child process runs serve's own
loop (`ManifestServer.run`) in-process with `tracemalloc` tracing from after the imports,
connects the same clients, waits as long, collects garbage and takes a snapshot. Every live
allocation is charged to the innermost frame of its traceback inside the `dragoman` package
(the dragoman code that asked for it, directly or through the YAML loader, a dataclass'
`__init__` or the standard library); allocations with no dragoman frame are charged to the
innermost frame's top-level package. Printed: the total by dragoman module, and the lines
holding most. tracemalloc sees Python's allocations only (not protobuf's upb arenas, gRPC's C
core, or allocator overhead), and its own bookkeeping inflates that child's RSS: compare its
figures with each other, and RSS with the first child's.

It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import linecache
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from propagation import Workload, free_port, load, rss_mib, stop, workspace  # noqa: E402
from startup import clusters_answered  # noqa: E402

MIB = 1024 * 1024
# Deep enough to reach a dragoman frame below the YAML loader and dataclasses; every frame
# more slows each traced allocation.
FRAMES = 16
# tracemalloc slows the child several times over.
TRACED_SLOWER = 4


def write_workload(root: Path, args: argparse.Namespace) -> None:
    ports = (free_port(), free_port())
    Workload(root, args.services, free_port(), ports, args.pod_backed, args.one_file).write_all()


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Clients:
    """`count` ADS clients, each holding its stream open after all clusters arrived."""

    def __init__(self, port: int, services: int, count: int, timeout: float) -> None:
        self.hold = threading.Event()
        self.received = [threading.Event() for _ in range(count)]
        deadline = time.monotonic() + timeout
        self.threads = [
            threading.Thread(
                target=clusters_answered,
                args=(port, services, False, deadline),
                kwargs={"received": event, "hold": self.hold},
                daemon=True,
            )
            for event in self.received
        ]
        for thread in self.threads:
            thread.start()

    def wait_all(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(e.wait(max(0.0, deadline - time.monotonic())) for e in self.received)

    def close(self) -> None:
        self.hold.set()
        for thread in self.threads:
            thread.join(10)


# --- RSS of `dragoman serve` ---------------------------------------------------------------


def serve_rss(manifests: Path, args: argparse.Namespace) -> None:
    port = free_port()
    dragoman = str(Path(sys.executable).parent / "dragoman")
    command = [dragoman, "serve", "--manifests", str(manifests), "--metrics-address", "off"]
    command += ["--xds-address", f"127.0.0.1:{port}", "--listener-address", "127.0.0.1"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clients: Clients | None = None
    try:
        clients = Clients(port, args.services, args.clients, args.timeout)
        if not clients.wait_all(args.timeout):
            raise TimeoutError("the clients did not all receive every cluster")
        ready = time.monotonic() - started
        at_ready = rss_mib(process.pid)
        print(
            f"all {args.clients} clients served {args.services:,} clusters after {ready:.1f} s;"
            f" RSS then {at_ready:6.1f} MiB   ({load()})"
        )
        time.sleep(args.settle)
        samples = []
        for _ in range(3):
            samples.append(rss_mib(process.pid))
            time.sleep(1.0)
        print(
            f"steady RSS ({args.settle:.0f} s later, 3 samples): "
            + "  ".join(f"{s:6.1f}" for s in samples)
            + f" MiB   peak {peak_rss_mib(process.pid):6.1f} MiB   ({load()})"
        )
    finally:
        if clients is not None:
            clients.close()
        stop(process)


# --- tracemalloc, in a child process running serve's loop ----------------------------------


def tracemalloc_child(
    manifests: Path, services: int, clients: int, settle: float, timeout: float
) -> None:
    import importlib
    import tracemalloc

    # What `dragoman serve` imports before it runs: not counted.
    importlib.import_module("dragoman.cli")
    importlib.import_module("dragoman.commands.serve")
    from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig

    port = free_port()
    server = ManifestServer(ServeConfig(manifests=manifests, xds_address=f"127.0.0.1:{port}"))
    tracemalloc.start(FRAMES)

    async def main() -> tracemalloc.Snapshot:
        stopping = asyncio.Event()
        running = asyncio.create_task(server.run(stopping))
        connected = Clients(port, services, clients, timeout)
        try:
            waiting = asyncio.create_task(asyncio.to_thread(connected.wait_all, timeout))
            await asyncio.wait([waiting, running], return_when=asyncio.FIRST_COMPLETED)
            if running.done():  # the server failed, or stopped
                connected.hold.set()
                await running
                raise RuntimeError("the server stopped before every client was served")
            if not waiting.result():
                raise TimeoutError("the clients did not all receive every cluster")
            await asyncio.sleep(settle)
            gc.collect()
            return tracemalloc.take_snapshot()
        finally:
            await asyncio.to_thread(connected.close)
            stopping.set()
            await running

    snapshot = asyncio.run(main())
    rss = rss_mib(os.getpid())
    tracemalloc.stop()
    # The clients' own allocations are the benchmark's, not the server's.
    snapshot = snapshot.filter_traces(
        [
            tracemalloc.Filter(False, str(HERE / "startup.py"), all_frames=True),
            tracemalloc.Filter(False, __file__),
            tracemalloc.Filter(False, "*/grpc/_channel.py", all_frames=True),
            tracemalloc.Filter(False, tracemalloc.__file__),
        ]
    )
    package = str(Path(importlib.import_module("dragoman").__file__).parent) + os.sep
    modules: dict[str, list[int]] = {}
    lines: dict[tuple[str, int], list[int]] = {}
    for statistic in snapshot.statistics("traceback"):
        frames = list(statistic.traceback)  # oldest first
        mine = next((f for f in reversed(frames) if f.filename.startswith(package)), None)
        if mine is not None:
            relative = mine.filename[len(package) :].removesuffix(".py")
            module = "dragoman." + relative.replace(os.sep, ".").removesuffix(".__init__")
            where = (mine.filename, mine.lineno)
        else:
            innermost = frames[-1].filename
            module = f"(no dragoman frame) {_package_of(innermost)}"
            where = (innermost, frames[-1].lineno)
        for table, key in ((modules, module), (lines, where)):
            entry = table.setdefault(key, [0, 0])  # type: ignore[arg-type]
            entry[0] += statistic.size
            entry[1] += statistic.count
    print(
        json.dumps(
            {
                "total": sum(size for size, _ in modules.values()),
                "rss": rss,
                "by_worker": server.directory.parsed_by_worker,
                "modules": sorted(([k, *v] for k, v in modules.items()), key=lambda e: -e[1]),
                "lines": [
                    [f"{_short(path, package)}:{number}", size, count, _source(path, number)]
                    for (path, number), (size, count) in sorted(
                        lines.items(), key=lambda item: -item[1][0]
                    )[:60]
                ],
            }
        ),
        flush=True,
    )


def _package_of(filename: str) -> str:
    for marker in ("site-packages" + os.sep, "lib" + os.sep + "python"):
        if marker in filename:
            tail = filename.split(marker, 1)[1]
            parts = tail.split(os.sep)
            return parts[1] if marker.startswith("lib") and len(parts) > 1 else parts[0]
    return filename


def _short(path: str, package: str) -> str:
    if path.startswith(package):
        return "dragoman/" + path[len(package) :]
    return _package_of(path) + ":" + os.path.basename(path)


def _source(path: str, number: int) -> str:
    return linecache.getline(path, number).strip()[:70]


def tracemalloc_breakdown(manifests: Path, args: argparse.Namespace) -> None:
    command = [sys.executable, str(Path(__file__).resolve()), "--tracemalloc-child"]
    command += [str(manifests), str(args.services), str(args.clients), str(args.settle)]
    command.append(str(args.timeout * TRACED_SLOWER))
    child = subprocess.run(command, check=False, capture_output=True, text=True)
    if child.returncode != 0:
        print(f"\ntracemalloc child failed ({child.returncode}):\n{child.stderr[-3000:]}")
        return
    figures = json.loads(child.stdout.strip().splitlines()[-1])
    print(
        f"\ntracemalloc: {figures['total'] / MIB:.1f} MiB live after startup and "
        f"{args.clients} clients served (that child's RSS {figures['rss']:.1f} MiB, with "
        f"tracemalloc's own; {figures['by_worker']} files parsed by the worker; {load()})"
    )
    print(f"  {'by dragoman module':58s} {'MiB':>7s} {'blocks':>9s}")
    for module, size, count in figures["modules"][: args.top]:
        print(f"  {module:58s} {size / MIB:7.2f} {count:9,d}")
    print(f"  {'top lines':58s} {'MiB':>7s} {'blocks':>9s}")
    for where, size, count, source in figures["lines"][: args.top]:
        print(f"  {where:58s} {size / MIB:7.2f} {count:9,d}   {source}")


# --- report ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--pod-backed", action="store_true", help="every odd Service with pods")
    parser.add_argument("--one-file", action="store_true", help="every object in one file")
    parser.add_argument("--clients", type=int, default=10, help="ADS clients (default: 10)")
    parser.add_argument("--settle", type=float, default=6.0, help="seconds before RSS is read")
    parser.add_argument("--top", type=int, default=25, help="modules and lines printed")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false")
    parser.add_argument("--tracemalloc-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tracemalloc_child:
        manifests, services, clients, settle, timeout = args.tracemalloc_child
        tracemalloc_child(
            Path(manifests), int(services), int(clients), float(settle), float(timeout)
        )
        return 0

    with workspace("memory-") as workdir:
        manifests = workdir / "manifests"
        write_workload(manifests, args)
        layout = "one file" if args.one_file else "one file per Service"
        kinds = "half pod-backed" if args.pod_backed else "ExternalName"
        print(f"== N = {args.services:,} Services ({kinds}), {layout}, {args.clients} clients ==")
        serve_rss(manifests, args)
        if args.tracemalloc:
            tracemalloc_breakdown(manifests, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
