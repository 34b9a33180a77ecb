"""Startup: `dragoman serve` started → its xDS port answers with the whole configuration.

    python benchmarks/startup.py                       # N = 10,000, files and one file
    python benchmarks/startup.py --services 1000 --repeat 3
    python benchmarks/startup.py --layout files --delta
    python benchmarks/startup.py --no-phases           # the end-to-end figure alone
    python benchmarks/startup.py --size-check --services 50000 --layout files

The workload of the propagation benchmark (`propagation.py`): N ExternalName Services
`svcI.example.test`, one Gateway with an HTTP listener, one HTTPRoute per Service; one file
per Service (`files`) or every object in one file (`one-file`).

End to end, `dragoman serve` runs as a child process; from just before it is started, a
minimal ADS client (SotW, or delta with `--delta`) keeps trying to connect, asks for CDS as a
node of the Gateway, and stops the clock when a response holding all N clusters arrives.
Printed per run: the wall time, the child's CPU time (user + sys, from /proc) at that moment,
and the load average, since the machine may be shared (CPU time depends less on that).

With phases (the default), a second child process runs the steps of `dragoman serve`'s
startup one by one, as serve calls them, and prints each one's wall and CPU time:
interpreter start, imports (the worker process sharing the first load started before them,
as serve starts it), directory scan + read + decode + parse (with the builds and
translations of what is parsed so far that serve makes meanwhile when a worker shares the
load), the store, the build and the translation (what is left of them), publishing (gRPC
variants, cache), starting the xDS server and answering the first CDS request.

With `--size-check`, each layout is served once more, by a child kept running: besides the
time to serve every cluster, its memory once ready (resident, and its peak), its CPU time
while idle (one client connected, nothing changing; per minute, over `--idle` seconds: the
watcher's periodic rescan comes every 60 s), and `--changes` times one Service's file edited
(its port) until the connected client (over delta ADS, whatever `--delta` says: a SotW
response holds every cluster) receives the CDS response with the change: each change's
latency (inotify, load, build, translation, publishing, the response on the wire).
Each figure is printed with its target and the ratio to it; the time to serve, with the
ratio to the floor of the same run: interpreter start and imports (the child's phases).

Every child runs as an installed dragoman does, with its modules' bytecode compiled (pip
compiles a wheel's modules when it installs them): into a temporary cache, by a run that is
not counted, even where the environment says not to write bytecode.

It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NODE_CLUSTER = "default/bench"  # the Gateway of propagation.py's workload
CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
TICKS = os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def cpu_seconds(pid: int) -> float:
    """The process's user + sys time, with that of the children it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICKS


def cpu_time() -> float:
    """This process's CPU time, with that of the children it has waited for (a worker)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_workload(root: Path, services: int, one_file: bool) -> Any:
    """The workload's files written; returns it (a propagation.Workload: `change(i)`)."""
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from propagation import Workload

    listener, port0, port1 = free_port(), free_port(), free_port()
    workload = Workload(root, services, listener, (port0, port1), False, one_file)
    workload.write_all()
    return workload


# --- the client --------------------------------------------------------------------------


def clusters_answered(
    port: int,
    services: int,
    delta: bool,
    deadline: float,
    *,
    received: threading.Event | None = None,
    hold: threading.Event | None = None,
) -> int:
    """Connects (retrying until the server listens), asks for CDS over ADS, and returns the
    number of clusters of the first response holding at least `services` of them. With
    `hold`, the stream stays open (as a connected Envoy's would) until `hold` is set; then
    `received` is set once that response has arrived."""
    import grpc
    from envoy.config.core.v3.base_pb2 import Node
    from envoy.service.discovery.v3 import ads_pb2_grpc
    from envoy.service.discovery.v3.discovery_pb2 import (
        DeltaDiscoveryRequest,
        DiscoveryRequest,
    )

    node = Node(id="startup-bench", cluster=NODE_CLUSTER)
    options = [("grpc.max_receive_message_length", 512 * 1024 * 1024)]
    while time.monotonic() < deadline:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        done = threading.Event()

        def requests(done: threading.Event = done) -> Iterator[object]:
            if delta:
                yield DeltaDiscoveryRequest(node=node, type_url=CDS)
            else:
                yield DiscoveryRequest(node=node, type_url=CDS)
            done.wait(max(0.0, deadline - time.monotonic()))

        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel)
        method = stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources
        try:
            for response in method(requests(), timeout=max(0.1, deadline - time.monotonic())):
                if len(response.resources) >= services:
                    if hold is not None:
                        if received is not None:
                            received.set()
                        hold.wait(max(0.0, deadline - time.monotonic()))
                    return len(response.resources)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            time.sleep(0.01)  # not listening yet
        finally:
            done.set()
            channel.close()
    raise TimeoutError("no complete CDS response before the deadline")


class HeldStream:
    """An ADS stream asking for CDS as a node of the Gateway, held open (as a connected
    Envoy's): each response is acknowledged, and (arrival time, clusters in it) queued."""

    def __init__(self, port: int, delta: bool) -> None:
        import grpc
        from envoy.config.core.v3.base_pb2 import Node
        from envoy.service.discovery.v3 import ads_pb2_grpc

        self.delta = delta
        self.node = Node(id="startup-bench-held", cluster=NODE_CLUSTER)
        self.responses: queue.Queue[tuple[float, int]] = queue.Queue()
        self._requests: queue.Queue[object | None] = queue.Queue()
        options = [("grpc.max_receive_message_length", 512 * 1024 * 1024)]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(self.channel)
        self._method = stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _request(self, nonce: str = "", version: str = "") -> object:
        from envoy.service.discovery.v3.discovery_pb2 import (
            DeltaDiscoveryRequest,
            DiscoveryRequest,
        )

        if self.delta:
            return DeltaDiscoveryRequest(node=self.node, type_url=CDS, response_nonce=nonce)
        return DiscoveryRequest(
            node=self.node, type_url=CDS, response_nonce=nonce, version_info=version
        )

    def _outgoing(self) -> Iterator[object]:
        yield self._request()
        while (request := self._requests.get()) is not None:
            yield request

    def _run(self) -> None:
        import grpc

        try:
            for response in self._method(self._outgoing()):
                self.responses.put((time.monotonic(), len(response.resources)))
                version = "" if self.delta else response.version_info
                self._requests.put(self._request(response.nonce, version))
        except grpc.RpcError:
            pass  # closed

    def next_response(self, timeout: float) -> tuple[float, int]:
        return self.responses.get(timeout=timeout)

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()
        self._thread.join(5)


# --- end to end --------------------------------------------------------------------------


def end_to_end(manifests: Path, services: int, delta: bool) -> dict[str, float | str]:
    port = free_port()
    dragoman = str(Path(sys.executable).parent / "dragoman")
    command = [dragoman, "serve", "--manifests", str(manifests)]
    command += ["--xds-address", f"127.0.0.1:{port}", "--metrics-address", "off"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        clusters = clusters_answered(port, services, delta, started + 300)
        wall = time.monotonic() - started
        cpu = cpu_seconds(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return {"wall": wall, "cpu": cpu, "clusters": clusters, "load": load()}


# --- the size check: memory, idle CPU and one change, at N ---------------------------

# The targets (the project's, for 50,000 Services with 50,000 HTTPRoutes).
READY_TARGET_S = {10_000: 2.0, 50_000: 12.0}
RSS_TARGET_MIB = 600.0
CHANGE_TARGET_MS = 50.0
IDLE_TARGET_S_PER_MINUTE = 1.0


def memory_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory now and its peak, in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return (
        int(fields["VmRSS"].split()[0]) / 1024,
        int(fields["VmHWM"].split()[0]) / 1024,
    )


@contextlib.contextmanager
def serving(manifests: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    dragoman = str(Path(sys.executable).parent / "dragoman")
    command = [dragoman, "serve", "--manifests", str(manifests)]
    command += ["--xds-address", f"127.0.0.1:{port}", "--metrics-address", "off"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def size_check(
    workload: Any, services: int, delta: bool, idle_s: float, changes: int
) -> dict[str, Any]:
    """Serves the workload; ready time, memory, idle CPU and change latencies."""
    port = free_port()
    started = time.monotonic()
    with serving(workload.root, port) as process:
        clusters_answered(port, services, delta, started + 600)
        figures: dict[str, Any] = {"wall": time.monotonic() - started}
        figures["cpu"] = cpu_seconds(process.pid)
        figures["rss ready"], _ = memory_mib(process.pid)
        # Delta: over SotW each response carries all N clusters, which this client would
        # spend most of a change's time decoding.
        held = HeldStream(port, delta=True)
        try:
            _, clusters = held.next_response(120)
            assert clusters >= services, f"{clusters} clusters in the first response"
            time.sleep(1.0)  # the first response's serialization settles
            cpu_before = cpu_seconds(process.pid)
            time.sleep(idle_s)
            figures["idle"] = (cpu_seconds(process.pid) - cpu_before) * 60 / idle_s
            latencies = []
            for change in range(changes):
                written = time.monotonic()
                workload.change((change * 7919) % services)  # spread over the files
                arrived, _ = held.next_response(60)
                latencies.append((arrived - written) * 1000)
                time.sleep(0.3)  # one change at a time, not a burst
            figures["changes ms"] = latencies
        finally:
            held.close()
        figures["rss"], figures["peak"] = memory_mib(process.pid)
    figures["load"] = load()
    return figures


def ready_floor(delta: bool) -> float:
    """The time to serve one Service: starting the interpreter, imports, xDS."""
    with workspace() as workdir:
        write_workload(workdir / "manifests", 1, False)
        return float(end_to_end(workdir / "manifests", 1, delta)["wall"])


def report_size_check(figures: dict[str, Any], services: int, floor: float) -> None:
    target = READY_TARGET_S.get(services)
    judged = f"   target {target:g} s: x{figures['wall'] / target:.2f}" if target else ""
    print(
        f"start -> all clusters served      wall {figures['wall']:6.2f} s   "
        f"cpu {figures['cpu']:6.2f} s   x{figures['wall'] / floor:.1f} the floor{judged}"
    )
    print(f"  (floor: one Service served       wall {floor:6.2f} s)")
    rss_ratio = figures["peak"] / RSS_TARGET_MIB
    print(
        f"memory: ready {figures['rss ready']:.0f} MiB, after the changes {figures['rss']:.0f}"
        f" MiB, peak {figures['peak']:.0f} MiB   target {RSS_TARGET_MIB:g} MiB: x{rss_ratio:.2f}"
    )
    idle = figures["idle"]
    print(
        f"idle CPU: {idle:.2f} s per minute   "
        f"target {IDLE_TARGET_S_PER_MINUTE:g} s: x{idle / IDLE_TARGET_S_PER_MINUTE:.2f}"
    )
    latencies = sorted(figures["changes ms"])
    if latencies:
        median = statistics.median(latencies)
        print(
            f"one change -> CDS response: median {median:.0f} ms, max {latencies[-1]:.0f} ms"
            f" of {len(latencies)}   target {CHANGE_TARGET_MS:g} ms (published; this is"
            f" more: the watcher and the wire too): x{median / CHANGE_TARGET_MS:.2f}"
        )
    print(f"  ({figures['load']})")


# --- phases, in a child process ----------------------------------------------------------


def phases_child(manifests: Path, started_at: float) -> None:
    """Runs serve's startup steps one by one; prints their times as JSON lines."""
    # Before anything of dragoman is imported: the interpreter's own start.
    wall0, cpu0 = time.time(), cpu_time()
    marks: list[tuple[str, float, float]] = [("interpreter start", wall0 - started_at, cpu0)]

    def mark(name: str) -> None:
        nonlocal wall0, cpu0
        wall, cpu = time.time(), cpu_time()
        marks.append((name, wall - wall0, cpu - cpu0))
        wall0, cpu0 = wall, cpu

    import asyncio
    import importlib

    # As `dragoman serve` does: the worker sharing the first load started first, then what
    # serve imports before it runs.
    from dragoman.commands.early_start import first_load_worker

    parse_worker = first_load_worker(["serve", "--manifests", str(manifests)])
    importlib.import_module("dragoman.cli")
    importlib.import_module("dragoman.commands.serve")
    from dragoman.runtime.manifest_serving import ManifestServer, ServeConfig

    mark("imports")
    server = ManifestServer(
        ServeConfig(manifests=manifests, xds_address="127.0.0.1:0"), parse_worker
    )
    result = server._load(None)
    mark("scan + read + decode + parse (+ builds)")
    controller = server.controller
    timed: dict[str, float] = {}

    def timing(name: str, function: Any) -> Any:
        def timed_call(*args: object, **kwargs: object) -> object:
            wall, cpu = time.time(), cpu_time()
            try:
                return function(*args, **kwargs)
            finally:
                timed[name + " wall"] = timed.get(name + " wall", 0.0) + time.time() - wall
                timed[name + " cpu"] = timed.get(name + " cpu", 0.0) + cpu_time() - cpu

        return timed_call

    from dragoman import store as store_module
    from dragoman.dag.incremental import IncrementalBuild
    from dragoman.envoy.translation.translator import Translation
    from dragoman.snapshots.gc_pause import cyclic_gc_paused, settle_for_serving

    # The build and translation the load prepared (as serve's first load does, with a
    # worker): what is left of them is timed.
    if controller.builder is None or controller.translation is None:
        controller.builder = IncrementalBuild(controller.build_options)
        controller.translation = Translation(controller.translate_options)
    # Methods replaced by timed wrappers, on purpose: mypy refuses assigning to a method.
    builder, translation = controller.builder, controller.translation
    builder.build = timing("build", builder.build)  # type: ignore[method-assign]
    translation.translate = timing("translate", translation.translate)  # type: ignore[method-assign]
    store_module.Store.from_objects = timing("store", store_module.Store.from_objects)  # type: ignore[method-assign]
    wall_before, cpu_before = time.time(), cpu_time()
    with cyclic_gc_paused():  # as serve's first load and build
        server._apply(result)
        settle_for_serving()  # frozen before the collector runs again, as serve does
    apply_wall, apply_cpu = time.time() - wall_before, cpu_time() - cpu_before
    for name in ("store", "build", "translate"):
        marks.append((name, timed.get(name + " wall", 0.0), timed.get(name + " cpu", 0.0)))
    spent_wall = sum(timed.get(n + " wall", 0.0) for n in ("store", "build", "translate"))
    spent_cpu = sum(timed.get(n + " cpu", 0.0) for n in ("store", "build", "translate"))
    marks.append(("publish (gRPC variants, cache)", apply_wall - spent_wall, apply_cpu - spent_cpu))
    wall0, cpu0 = time.time(), cpu_time()

    services = sum(1 for o in result.objects if o.key.kind == "Service")

    async def serve_first() -> int:
        from dragoman.runtime.serving import start_serving
        from dragoman.xds.server.grpc_server import bound_port

        stop = asyncio.Event()
        xds, _ = await start_serving(
            controller, "127.0.0.1:0", server.config.dns_check, stop, streams=server.streams
        )
        try:
            port = bound_port(xds)
            clusters = await asyncio.to_thread(
                clusters_answered, port, services, False, time.monotonic() + 120
            )
        finally:
            await xds.stop(grace=0)
        return clusters

    asyncio.run(serve_first())
    mark("start xDS + first CDS response")
    print(json.dumps({"marks": marks, "objects": len(result.objects)}), flush=True)


def phases(manifests: Path) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--phases-child", str(manifests)]
    output = subprocess.run(
        [*command, repr(time.time())], check=True, capture_output=True, text=True
    ).stdout
    figures: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    figures["load"] = load()
    return figures


# --- report ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="end-to-end runs per layout")
    parser.add_argument(
        "--layout", choices=("files", "one-file", "both"), default="both", help="default: both"
    )
    parser.add_argument("--delta", action="store_true", help="the client asks over delta ADS")
    parser.add_argument("--no-phases", dest="phases", action="store_false")
    parser.add_argument(
        "--size-check",
        action="store_true",
        help="also memory, idle CPU and one change's latency, with a server kept running",
    )
    parser.add_argument("--idle", type=float, default=65.0, help="idle seconds measured")
    parser.add_argument("--changes", type=int, default=10, help="changes measured one by one")
    parser.add_argument("--phases-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phases_child:
        phases_child(Path(args.phases_child[0]), float(args.phases_child[1]))
        return 0

    with workspace() as pycache:
        compiled_as_installed(pycache)
        return report(args)


def compiled_as_installed(pycache: Path) -> None:
    """The modules serving imports compiled into `pycache`, which the children read them
    from: dragoman's, and those of its dependencies (installed, maybe without bytecode)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(pycache)
    package = HERE.parent / "dragoman"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)
    ready_floor(delta=False)  # imports what serving does (and compiles it)


def too_large(manifests: Path) -> bool:
    """Whether a file is over dragoman's size limit (refused unread: nothing to serve)."""
    from dragoman.sources.decode import MAX_FILE_BYTES

    largest = max(path.stat().st_size for path in manifests.iterdir())
    if largest > MAX_FILE_BYTES:
        print(f"not run: a file of {largest:,} bytes, over the limit of {MAX_FILE_BYTES:,}")
    return largest > MAX_FILE_BYTES


def report(args: argparse.Namespace) -> int:
    layouts = ["files", "one-file"] if args.layout == "both" else [args.layout]
    for layout in layouts:
        with workspace() as workdir:
            manifests = workdir / "manifests"
            workload = write_workload(manifests, args.services, layout == "one-file")
            print(f"\n== N = {args.services:,}, {layout}, {'delta' if args.delta else 'SotW'} ==")
            if too_large(manifests):
                continue
            runs = []
            for _ in range(args.repeat):
                run = end_to_end(manifests, args.services, args.delta)
                runs.append(run)
                print(
                    f"start -> all {run['clusters']} clusters served   "
                    f"wall {run['wall']:5.2f} s   cpu {run['cpu']:5.2f} s   ({run['load']})"
                )
            if len(runs) > 1:
                walls = [float(r["wall"]) for r in runs]
                cpus = [float(r["cpu"]) for r in runs]
                print(
                    f"median of {len(runs)}                    wall {statistics.median(walls):5.2f}"
                    f" s   cpu {statistics.median(cpus):5.2f} s"
                )
            if args.phases:
                figures = phases(manifests)
                print(f"phases ({figures['objects']} objects; {figures['load']}):")
                total_wall = total_cpu = 0.0
                for name, wall, cpu in figures["marks"]:
                    total_wall += wall
                    total_cpu += cpu
                    print(f"  {name:40s} wall {wall:5.2f} s   cpu {cpu:5.2f} s")
                print(f"  {'total':40s} wall {total_wall:5.2f} s   cpu {total_cpu:5.2f} s")
            if args.size_check:
                print("size check (one server kept running):")
                figures = size_check(workload, args.services, args.delta, args.idle, args.changes)
                report_size_check(figures, args.services, ready_floor(args.delta))
    return 0


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="startup-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
