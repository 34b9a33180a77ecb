"""Faults injected into dragoman while a real Envoy carries steady traffic: what each costs.

    python benchmarks/faults.py                  # every scenario, realistic lengths (~9 min)
    python benchmarks/faults.py --quick          # every scenario in a few seconds each
    python benchmarks/faults.py --only 1,3,7     # some of them
    python benchmarks/faults.py --tree OTHER     # run `dragoman serve` from another checkout

Each scenario starts its own `dragoman serve` (a process: manifests, or `--kubernetes` against
the test suite's in-process API server), a real Envoy over ADS (state of the world), echo
backends on loopback and a DNS responder, and sends `--rate` requests a second through Envoy
for as long as it runs. It injects one fault, repairs it, and prints one row:

- sent, failed: requests through Envoy over the whole scenario, and those not answered 2xx;
- seen s: seconds from the fault until dragoman said so (its log), `-` if it never did;
- recovered s: seconds from the repair until the last failed request (0: none failed after
  the repair; `>N`: still failing when the scenario ended N s after the repair);
- RSS MiB, CPU s: dragoman's peak resident memory (VmHWM) and CPU seconds over the scenario
  (summed over its processes when it restarts);
- what else the scenario measures.

`--tree DIR` runs dragoman from another source tree (on PYTHONPATH), to compare with an
older version: a flag that tree's `serve` lacks is left out, and the row says so. The
harness (Envoy, backends, DNS, API server, traffic) is always this tree's. It prints figures;
nothing asserts on them. The load average is printed with them: other work on the machine
moves every timing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

import grpc  # noqa: E402
from envoy.config.core.v3.base_pb2 import Node  # noqa: E402
from envoy.service.discovery.v3 import ads_pb2_grpc  # noqa: E402
from xds_flood import cpu_seconds, peak_rss_mib  # noqa: E402

from dragoman.demo.dns import DnsResponder  # noqa: E402
from dragoman.demo.envoy import EnvoyProcess  # noqa: E402
from dragoman.demo.http import wait_until  # noqa: E402
from dragoman.demo.sample_backends import EchoBackend  # noqa: E402
from dragoman.envoy.bootstrap.envoy_bootstrap import (  # noqa: E402
    XdsClientTls,
    xds_tls_secret_files,
)
from dragoman.security.certgen import client_pair, new_authority, server_pair  # noqa: E402
from dragoman.security.identities import FLEET  # noqa: E402
from dragoman.snapshots.resources import CLUSTER  # noqa: E402
from tests.support import builders as b  # noqa: E402
from tests.support.harness import LAB_CONFIG, backend_of, free_port, start_envoy  # noqa: E402
from tests.support.kube_process import KubeDragomanProcess  # noqa: E402
from tests.support.kube_replica import deployed_tls  # noqa: E402
from tests.support.kubeapi import KubeApiServer  # noqa: E402
from tests.support.secret_volume import (  # noqa: E402
    client_files,
    server_arguments,
    swap_secret_volume,
    write_server_files,
)
from tests.support.serve_process import ServeProcess  # noqa: E402
from tests.support.steady_traffic import Traffic  # noqa: E402
from tests.support.xds_builders import delta_request, request  # noqa: E402

EXTERNAL = "partner.faults.test"


@dataclass(frozen=True)
class Lengths:
    """How long each part of a scenario lasts (seconds) and how big it is."""

    hold: float  # a fault left in place
    after: float  # traffic after the repair
    kind_outage: float  # a kind answering 404 (dragoman once withdrew it after 60 s or more)
    silent_cap: float  # how long to wait for a change behind a silent watch
    api_outage: float  # the API server refusing connections
    flood: float
    services: int  # Services in the world of the flood and the non-reading streams
    streams: int  # streams that never read
    stalled: int  # connections that never finish their handshake
    connection_age: float  # --xds-max-connection-age
    age_hold: float
    dns_names: int
    pauses: int  # in-place writes with a pause mid-write
    reconnect: float  # how long to wait for Envoy to reconnect with rotated files


DEFAULT = Lengths(10, 8, 90, 130, 30, 15, 1500, 300, 1000, 5, 35, 320, 4, 60)
QUICK = Lengths(3, 3, 5, 6, 3, 4, 200, 50, 200, 2, 15, 20, 2, 15)


@dataclass
class Row:
    number: str
    name: str
    sent: int = 0
    failed: int = 0
    seen_s: float | None = None
    seen_asked: bool = True  # whether the scenario looks for the fault in dragoman's log
    recovered_s: str = "-"
    rss_mib: float = 0.0
    cpu_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def _flags(path: Path, command: str) -> set[str]:
    """The flags `dragoman COMMAND --help` of the tree at `path` names."""
    help_text = subprocess.run(
        [sys.executable, "-m", "dragoman", command, "--help"],
        env={**os.environ, "PYTHONPATH": str(path)},
        cwd=tempfile.gettempdir(),  # `-m` puts the working directory first on the path
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(re.findall(r"--[a-z][a-z-]+", help_text))


@dataclass
class Tree:
    """Where `dragoman serve` comes from, and which of its flags that version knows."""

    path: Path
    flags: set[str]
    bootstrap_flags: set[str]

    @classmethod
    def at(cls, path: Path) -> Tree:
        return cls(path, _flags(path, "serve"), _flags(path, "bootstrap"))

    def flag(self, row: Row, name: str, *values: str) -> list[str]:
        """`[name, *values]` if this version knows the flag; else nothing, said in the row."""
        if name in self.flags:
            return [name, *values]
        row.notes.append(f"no {name} in this tree: run without it")
        return []


class Usage:
    """dragoman's peak RSS and CPU seconds, over every process a scenario started."""

    def __init__(self) -> None:
        self.rss = 0.0
        self.cpu: dict[int, float] = {}

    def take(self, pid: int | None) -> None:
        if pid is None:
            return
        with contextlib.suppress(OSError):
            self.rss = max(self.rss, peak_rss_mib(pid))
            self.cpu[pid] = cpu_seconds(pid)

    def into(self, row: Row) -> None:
        row.rss_mib, row.cpu_s = self.rss, sum(self.cpu.values())


def pid_of(process: ServeProcess | KubeDragomanProcess) -> int | None:
    return process.process.pid if process.process is not None else None


def logged_after(log: Path, offset: int, pattern: str, since: float) -> float | None:
    """Seconds from `since` (time.monotonic()) to the time stamp of the first line of `log`
    after `offset` that matches `pattern`; None when none does."""
    found = re.compile(pattern)
    since += time.time() - time.monotonic()  # the log's stamps are the wall clock's
    with log.open("rb") as file:
        file.seek(offset)
        for line in file.read().decode(errors="replace").splitlines():
            if found.search(line):
                stamp = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S"))
                return stamp + int(line[20:23]) / 1000 - since
    return None


def seconds_until_logged(
    log: Path, offset: int, pattern: str, since: float, limit: float
) -> float | None:
    """Waits up to `limit` seconds for a line of `log` after `offset` that matches `pattern`;
    seconds from `since` (time.monotonic()) to its time stamp (None: none within `limit`)."""
    deadline = time.monotonic() + limit
    while True:
        seen = logged_after(log, offset, pattern, since)
        if seen is not None or time.monotonic() > deadline:
            return seen
        time.sleep(0.05)


def log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def recovery(traffic: TrafficGroup, repaired: float, ended: float) -> str:
    """Seconds from the repair until the last failed request; `>N` if still failing."""
    late = [t for t in traffic.failed_at if t >= repaired]
    if not late:
        return "0"
    if ended - late[-1] < 1.0:
        return f">{ended - repaired:.0f}"
    return f"{late[-1] - repaired:.1f}"


def wait_served(url_path: str, port: int, backend: str, limit: float) -> float | None:
    """Seconds until `backend` answers `url_path` through Envoy (None: not within `limit`)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        with contextlib.suppress(OSError):
            if backend_of(f"http://127.0.0.1:{port}{url_path}") == backend:
                return time.monotonic() - started
        time.sleep(0.1)
    return None


# ------------------------------------------------------------------------- worlds

# Requests a second one kept-alive connection carries through Envoy to the echo backends
# here (each request waits for the last): the rate is spread over enough connections.
PER_CONNECTION = 25.0


class TrafficGroup:
    """`rate` requests a second to `path`, over as many connections as that takes."""

    def __init__(self, port: int, rate: float, path: str) -> None:
        count = max(1, round(rate / PER_CONNECTION))
        self.flows = [Traffic(port, rate / count, (path,)).start() for _ in range(count)]

    def finish(self) -> None:
        for flow in self.flows:
            flow.stop.set()
        for flow in self.flows:
            flow.finish()

    @property
    def sent(self) -> int:
        return sum(flow.sent for flow in self.flows)

    @property
    def failed(self) -> int:
        return sum(flow.failed for flow in self.flows)

    @property
    def failed_at(self) -> list[float]:
        return sorted(t for flow in self.flows for t in flow.failed_at)


@dataclass
class Stage:
    """Backends, a DNS responder, an Envoy and traffic; dragoman is the scenario's."""

    root: Path
    rate: float
    backend_port: int = field(default_factory=lambda: free_port("127.0.0.2"))
    listener_port: int = field(default_factory=free_port)
    xds_port: int = field(default_factory=free_port)
    backends: list[EchoBackend] = field(default_factory=list)
    dns: DnsResponder | None = None
    envoy: EnvoyProcess | None = None
    traffic: TrafficGroup | None = None

    def start_backends(self) -> None:
        for name, host in (("web", "127.0.0.2"), ("wed", "127.0.0.3"), ("partner", "127.0.0.4")):
            backend = EchoBackend(name, host=host, port=self.backend_port)
            backend.start()
            self.backends.append(backend)
        self.dns = DnsResponder(ttl=60).start()
        self.dns.set_a(EXTERNAL, "127.0.0.4")

    def start_envoy(
        self, path: str, backend: str = "web", xds_tls: XdsClientTls | None = None
    ) -> None:
        assert self.dns is not None
        self.envoy = start_envoy(
            self.root, f"127.0.0.1:{self.xds_port}", self.dns.port, "default/edge", xds_tls=xds_tls
        )
        if wait_served(path, self.listener_port, backend, 30) is None:
            raise RuntimeError(f"Envoy never routed {path}:\n{self.envoy.log_tail()}")
        self.traffic = TrafficGroup(self.listener_port, self.rate, path)
        time.sleep(1.0)

    def into(self, row: Row) -> None:
        if self.traffic is not None:
            self.traffic.finish()
            row.sent, row.failed = self.traffic.sent, self.traffic.failed

    def stop(self) -> None:
        if self.traffic is not None:
            self.traffic.finish()
        if self.envoy is not None:
            self.envoy.stop()
        if self.dns is not None:
            self.dns.stop()
        for backend in self.backends:
            backend.stop()


def gateway_yaml(port: int) -> str:
    return b.yaml_text(b.gateway("edge", port))


def services_yaml(port: int, extra: int = 0) -> str:
    documents = []
    for name, address in (("web", "127.0.0.2"), ("wed", "127.0.0.3")):
        documents += [b.service(name, 80, port), b.endpoint_slice(name, port, address)]
    for i in range(extra):  # Services of their own hostnames, for the size of what is served
        name = f"bulk{i:05d}"
        documents += [
            b.service(name, 80, port),
            b.endpoint_slice(name, port, "127.0.0.2"),
            b.http_route(name, name, 80, parents=("edge",), hostnames=[f"{name}.example"]),
        ]
    return b.yaml_text(*documents)


def route_yaml(backend: str) -> str:
    return b.yaml_text(b.http_route("shop", [("/shop", backend, 80)], parents=("edge",)))


def write(directory: Path, name: str, text: str) -> None:
    tmp = directory / f".{name}.tmp"
    tmp.write_text(text)
    tmp.rename(directory / name)


@contextlib.contextmanager
def manifest_world(
    root: Path,
    rate: float,
    args: list[str],
    *,
    extra: int = 0,
    obey_permissions: bool = False,
    xds_tls: XdsClientTls | None = None,
) -> Iterator[tuple[Stage, ServeProcess]]:
    stage = Stage(root, rate)
    manifests = root / "manifests"
    manifests.mkdir()
    write(manifests, "gateway.yaml", gateway_yaml(stage.listener_port))
    write(manifests, "services.yaml", services_yaml(stage.backend_port, extra))
    write(manifests, "route.yaml", route_yaml("web"))
    serve = ServeProcess(manifests, root / "dragoman.log", args, obey_permissions=obey_permissions)
    serve.xds_address = f"127.0.0.1:{stage.xds_port}"
    try:
        stage.start_backends()
        serve.start(listen_timeout=60)
        stage.start_envoy("/shop", xds_tls=xds_tls)
        yield stage, serve
    finally:
        stage.stop()
        serve.stop()


@contextlib.contextmanager
def kube_world(
    root: Path, rate: float
) -> Iterator[tuple[Stage, KubeApiServer, KubeDragomanProcess]]:
    stage = Stage(root, rate)
    api = KubeApiServer(bookmark_interval=1.0)
    api.apply(b.gateway_class())
    api.apply(b.gateway("edge", stage.listener_port))
    for name, address in (("web", "127.0.0.2"), ("wed", "127.0.0.3")):
        api.apply(b.service(name, 80, stage.backend_port))
        api.apply(b.endpoint_slice(name, stage.backend_port, address))
    api.apply(b.http_route("shop", [("/shop", "web", 80)], parents=("edge",)))
    kubeconfig = api.write_kubeconfig(root / "kubeconfig")
    dragoman = KubeDragomanProcess(
        kubeconfig, f"127.0.0.1:{stage.xds_port}", free_port(), root / "dragoman.log"
    )
    try:
        stage.start_backends()
        dragoman.start(ready_timeout=60)
        stage.start_envoy("/shop")
        yield stage, api, dragoman
    finally:
        stage.stop()
        dragoman.stop()
        api.close()


# ---------------------------------------------------------------------- scenarios


@dataclass
class Run:
    tree: Tree
    lengths: Lengths
    rate: float
    workdir: Path

    def root(self, name: str) -> Path:
        path = self.workdir / name
        path.mkdir()
        return path


def restart_with_a_broken_file(run: Run) -> Row:
    row = Row("1", "restart, broken file")
    usage = Usage()
    root = run.root("broken")
    args = run.tree.flag(row, "--state-dir", str(root / "state"))
    with manifest_world(root, run.rate, args) as (stage, serve):
        assert stage.traffic is not None
        offset, broken = log_size(serve.log_path), time.monotonic()
        write(serve.manifests, "route.yaml", "kind: HTTPRoute\nspec: {rules: [\n")  # a typo
        row.seen_s = seconds_until_logged(
            serve.log_path, offset, r"route\.yaml: invalid YAML", broken, 10
        )
        time.sleep(1.0)
        usage.take(pid_of(serve))
        serve.stop(kill=True)
        serve.start(listen_timeout=60)
        time.sleep(run.lengths.hold)
        repaired = time.monotonic()
        write(serve.manifests, "route.yaml", route_yaml("web"))
        time.sleep(run.lengths.after)
        usage.take(pid_of(serve))
        stage.into(row)
        row.recovered_s = recovery(stage.traffic, repaired, time.monotonic())
    usage.into(row)
    return row


def dns_config(root: Path, dns_port: int) -> Path:
    path = root / "dns.yaml"
    path.write_text(
        LAB_CONFIG + "externalNames:\n"
        "  allowedNetworks: [127.0.0.4/32, 127.0.0.5/32]\n"
        "  dnsCheck:\n"
        "    enabled: true\n"
        f"    resolvers: ['127.0.0.1:{dns_port}']\n"
    )
    return path


def external_yaml(port: int, names: int) -> str:
    documents = [
        b.external_service("partner", EXTERNAL, port),
        b.http_route("partner", [("/partner", "partner", port)], parents=("edge",)),
    ]
    for i in range(names):
        documents += [
            b.external_service(f"other{i}", f"other{i}.faults.test", port),
            b.http_route(
                f"other{i}", f"other{i}", port, parents=("edge",), hostnames=[f"o{i}.example"]
            ),
        ]
    return b.yaml_text(*documents)


def seconds_until_answered(serve: ServeProcess, since: float, limit: float) -> float:
    """Seconds from `since` until a fresh ADS stream gets its first CDS answer."""
    while time.monotonic() - since < limit:
        try:
            serve.clusters()
        except Exception:  # not answered within the probe's own timeout: ask again
            continue
        return time.monotonic() - since
    return float("inf")


def restart_during_a_dns_outage(run: Run) -> Row:
    row = Row("2", "restart, DNS down")
    usage = Usage()
    root = run.root("dns")
    stage = Stage(root, run.rate)
    manifests = root / "manifests"
    manifests.mkdir()
    black_hole: socket.socket | None = None
    serve: ServeProcess | None = None
    try:
        stage.start_backends()
        assert stage.dns is not None
        dns_port = stage.dns.port
        for i in range(run.lengths.dns_names):
            stage.dns.set_a(f"other{i}.faults.test", "127.0.0.5")
        write(manifests, "gateway.yaml", gateway_yaml(stage.listener_port))
        write(manifests, "external.yaml", external_yaml(stage.backend_port, run.lengths.dns_names))
        args = ["--config", str(dns_config(root, dns_port))]
        args += run.tree.flag(row, "--state-dir", str(root / "state"))
        serve = ServeProcess(manifests, root / "dragoman.log", args)
        serve.xds_address = f"127.0.0.1:{stage.xds_port}"
        serve.start(listen_timeout=120)
        stage.start_envoy("/partner", "partner")
        assert stage.traffic is not None
        usage.take(pid_of(serve))
        serve.stop()
        stage.dns.stop()
        # The resolver is down: its port takes queries and never answers.
        black_hole = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        black_hole.bind(("127.0.0.1", dns_port))
        offset, restarted = log_size(serve.log_path), time.monotonic()
        serve.start(listen_timeout=180)
        first_xds = seconds_until_answered(serve, restarted, 180)
        # Envoy retries with a backoff (up to 30 s): the fault is what it gets once back.
        assert stage.envoy is not None
        envoy = stage.envoy
        wait_until(lambda: envoy.stat("control_plane.connected_state", 0) == 1, timeout=60)
        row.notes.append(f"Envoy back on xDS {time.monotonic() - restarted:.1f} s after it")
        row.notes.append(
            f"first xDS {first_xds:.1f} s after the restart ({run.lengths.dns_names + 1} names)"
        )
        time.sleep(run.lengths.hold)
        usage.take(pid_of(serve))
        black_hole.close()
        black_hole = None
        stage.dns = DnsResponder(port=dns_port, ttl=60).start()
        stage.dns.set_a(EXTERNAL, "127.0.0.4")
        for i in range(run.lengths.dns_names):
            stage.dns.set_a(f"other{i}.faults.test", "127.0.0.5")
        repaired = time.monotonic()
        time.sleep(run.lengths.after + 5)  # the check's next round
        # A check fails only after its timeouts (and only once its kept answers' TTLs run
        # out): looked for in the log at the end.
        failing = r"DNS check: \S+: [A-Za-z]|does not resolve"
        row.seen_s = logged_after(serve.log_path, offset, failing, restarted)
        usage.take(pid_of(serve))
        stage.into(row)
        row.recovered_s = recovery(stage.traffic, repaired, time.monotonic())
    finally:
        if black_hole is not None:
            black_hole.close()
        stage.stop()
        if serve is not None:
            serve.stop()
    usage.into(row)
    return row


def an_unreadable_file(run: Run) -> Row:
    row = Row("3", "unreadable file")
    row.notes.append("replaced by a mode-000 file, then chmod 644")
    usage = Usage()
    root = run.root("unreadable")
    with manifest_world(root, run.rate, [], obey_permissions=True) as (stage, serve):
        assert stage.traffic is not None
        time.sleep(1.0)  # the kernel watch is up
        path = serve.manifests / "route.yaml"
        offset, broken = log_size(serve.log_path), time.monotonic()
        # Replaced by a file no one may read (a writer with the wrong mode or umask): its
        # repair, `chmod 644`, leaves its mtime, size and inode as they were.
        unreadable = serve.manifests / ".route.yaml.tmp"
        unreadable.write_text(route_yaml("web"))
        unreadable.chmod(0)
        unreadable.rename(path)
        row.seen_s = seconds_until_logged(
            serve.log_path, offset, r"route\.yaml: cannot read", broken, run.lengths.hold
        )
        time.sleep(max(0.0, broken + run.lengths.hold - time.monotonic()))
        repaired = time.monotonic()
        path.chmod(0o644)
        time.sleep(run.lengths.after)
        usage.take(pid_of(serve))
        stage.into(row)
        row.recovered_s = recovery(stage.traffic, repaired, time.monotonic())
    usage.into(row)
    return row


def xds_client_certificate_rotation(run: Run) -> Row:
    """Envoy's xDS client certificate and CA replaced in place, as a mounted Secret is (the
    `..data` swap), then dragoman restarted with a certificate of the new CA, trusting only
    it: Envoy keeps serving what it holds, and must reconnect with the files it re-read.
    Recovered: seconds from the restart until a route changed after it is served (`>N`:
    Envoy still cut off). The bootstrap is the one the tree's `dragoman bootstrap` writes:
    with file-based SDS where it offers `--xds-tls-sds-dir`, else naming the files inline."""
    row = Row("4", "xDS client cert rotation", seen_asked=False)
    usage = Usage()
    root = run.root("rotation")
    first = new_authority("first CA")
    volume, server_dir, sds = root / "xds-tls", root / "server", root / "sds"
    for directory in (volume, server_dir, sds):
        directory.mkdir()
    swap_secret_volume(volume, client_files(first, client_pair(first, "fleet", FLEET)))
    write_server_files(server_dir, server_pair(first, ["localhost"]), first)
    by_sds = "--xds-tls-sds-dir" in run.tree.bootstrap_flags
    tls = XdsClientTls(
        trusted_ca=str(volume / "ca.crt"),
        certificate=str(volume / "tls.crt"),
        private_key=str(volume / "tls.key"),
        server_name="localhost",
        sds_directory=str(sds) if by_sds else "",
    )
    if by_sds:
        for name, text in xds_tls_secret_files(tls).items():
            (sds / name).write_text(text)
    else:
        row.notes.append("no bootstrap --xds-tls-sds-dir in this tree: the files named inline")
    with manifest_world(root, run.rate, server_arguments(server_dir), xds_tls=tls) as (
        stage,
        serve,
    ):
        assert stage.traffic is not None
        second = new_authority("second CA")
        swap_secret_volume(volume, client_files(second, client_pair(second, "fleet", FLEET)))
        usage.take(pid_of(serve))
        serve.stop()
        write_server_files(server_dir, server_pair(second, ["localhost"]), second)
        serve.start(listen_timeout=60)
        restarted = time.monotonic()
        write(serve.manifests, "route.yaml", route_yaml("wed"))
        served = wait_served("/shop", stage.listener_port, "wed", run.lengths.reconnect)
        row.recovered_s = (
            f"{time.monotonic() - restarted:.1f}"
            if served is not None
            else f">{run.lengths.reconnect:.0f}"
        )
        time.sleep(1.0)
        usage.take(pid_of(serve))
        stage.into(row)
    usage.into(row)
    return row


def one_flooding_client(run: Run) -> Row:
    row = Row("5", "one flooding client", seen_asked=False)
    usage = Usage()
    root = run.root("flood")
    with manifest_world(root, run.rate, [], extra=run.lengths.services) as (stage, serve):
        pid = pid_of(serve)
        assert pid is not None
        before, started = cpu_seconds(pid), time.monotonic()
        flooder = subprocess.Popen(
            [sys.executable, str(HERE / "xds_flood.py"), "--flood-only", str(stage.xds_port),
             "delta", str(run.lengths.flood), "0"],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        sent, received = (
            int(n) for n in flooder.communicate(timeout=run.lengths.flood + 30)[0].split()
        )
        cores = (cpu_seconds(pid) - before) / (time.monotonic() - started)
        row.notes.append(
            f"{run.lengths.services} Services; flooder sent {sent} requests, got {received}; "
            f"dragoman {cores:.2f} cores while flooded"
        )
        usage.take(pid)
        stage.into(row)
    usage.into(row)
    return row


def a_kind_answering_404(run: Run) -> Row:
    row = Row("6", "kind 404 (Kubernetes)")
    usage = Usage()
    root = run.root("kind")
    with kube_world(root, run.rate) as (stage, api, dragoman):
        assert stage.traffic is not None
        offset, withdrawn = log_size(dragoman.log_path), time.monotonic()
        api.withdraw_kind("httproutes")
        row.seen_s = seconds_until_logged(
            dragoman.log_path,
            offset,
            r"httproutes\S*: (no longer served|not served)",
            withdrawn,
            10,
        )
        api.apply(b.http_route("during", [("/during", "wed", 80)], parents=("edge",)))
        time.sleep(max(0.0, withdrawn + run.lengths.kind_outage - time.monotonic()))
        repaired = time.monotonic()
        api.restore_kind("httproutes")
        served = wait_served("/during", stage.listener_port, "wed", 90)
        row.notes.append(
            f"404 for {run.lengths.kind_outage:.0f} s; a route added meanwhile served "
            + (f"{served:.1f} s after the kind came back" if served is not None else "never (90 s)")
        )
        time.sleep(run.lengths.after)
        usage.take(pid_of(dragoman))
        stage.into(row)
        row.recovered_s = recovery(stage.traffic, repaired, time.monotonic())
    usage.into(row)
    return row


def an_in_place_write_with_a_pause(run: Run) -> Row:
    row = Row("7", "in-place write, paused", seen_asked=False)
    usage = Usage()
    root = run.root("in-place")
    with manifest_world(root, run.rate, []) as (stage, serve):
        time.sleep(1.0)
        for i in range(run.lengths.pauses):
            text = route_yaml("wed" if i % 2 == 0 else "web")
            half = text.index("rules:")
            with (serve.manifests / "route.yaml").open("w") as writing:  # truncated, half written
                writing.write(text[:half])
                writing.flush()
                time.sleep(1.5)  # a writer's pause
                writing.write(text[half:])
            time.sleep(2.0)  # a quiet moment: the next change would be applied at once
        row.notes.append(f"{run.lengths.pauses} writes, each paused 1.5 s mid-file")
        usage.take(pid_of(serve))
        stage.into(row)
    usage.into(row)
    return row


async def never_reading(port: int, count: int) -> list[grpc.aio.Channel]:
    """`count` connections, each with an ADS stream that asks for clusters and never reads
    (no BDP probing: the window stays at 64 KiB)."""
    channels = []
    for i in range(count):
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", 0), ("faults.channel", i)]
        )
        call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).StreamAggregatedResources()
        await call.write(request(CLUSTER, node=Node(id=f"stalled-{i}", cluster="default/edge")))
        channels.append(channel)
    return channels


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def streams_that_never_read(run: Run) -> Row:
    row = Row("8", "streams never reading", seen_asked=False)
    usage = Usage()
    root = run.root("never-reading")
    with manifest_world(root, run.rate, [], extra=run.lengths.services) as (stage, serve):
        pid = pid_of(serve)
        assert pid is not None
        before = rss_mib(pid)

        async def scenario() -> tuple[float, float]:
            channels = await never_reading(stage.xds_port, run.lengths.streams)
            await asyncio.sleep(run.lengths.hold)
            held = rss_mib(pid)
            for channel in channels:
                await channel.close()
            await asyncio.sleep(run.lengths.after)
            return held, rss_mib(pid)

        held, after = asyncio.run(scenario())
        row.notes.append(
            f"{run.lengths.streams} streams, {run.lengths.services} Services: RSS {before:.0f} "
            f"MiB before, {held:.0f} held, {after:.0f} after they closed"
        )
        tracebacks = serve.log().count("Traceback")
        row.notes.append(f"{tracebacks} tracebacks logged")
        usage.take(pid)
        stage.into(row)
    usage.into(row)
    return row


def a_silent_watch_and_an_api_outage(run: Run) -> list[Row]:
    silent, refused = Row("9a", "silent watch"), Row("9b", "API refusing")
    usage = Usage()
    root = run.root("watch")
    with kube_world(root, run.rate) as (stage, api, dragoman):
        assert stage.traffic is not None
        offset, silenced = log_size(dragoman.log_path), time.monotonic()
        api.silence_next_watches("httproutes")
        api.cut_watches()  # every watch starts again; the routes' one hears nothing
        time.sleep(2.0)
        api.apply(b.http_route("quiet", [("/quiet", "wed", 80)], parents=("edge",)))
        served = wait_served("/quiet", stage.listener_port, "wed", run.lengths.silent_cap)
        silent.seen_s = seconds_until_logged(
            dragoman.log_path, offset, r"httproutes\S*: (nothing arrived|no answer)", silenced, 1
        )
        silent.recovered_s = (
            f"{served:.1f}" if served is not None else f">{run.lengths.silent_cap:.0f}"
        )
        silent.notes.append("recovered: a change made 2 s into the silence reaches Envoy")
        sent, failed = stage.traffic.sent, stage.traffic.failed
        silent.sent, silent.failed = sent, failed
        offset, stopped = log_size(dragoman.log_path), time.monotonic()
        api.stop()
        api.apply(b.http_route("outage", [("/outage", "wed", 80)], parents=("edge",)))
        refused.seen_s = seconds_until_logged(
            dragoman.log_path,
            offset,
            r"(?i)refused|retrying|unreachable",
            stopped,
            run.lengths.api_outage,
        )
        time.sleep(max(0.0, stopped + run.lengths.api_outage - time.monotonic()))
        api.start()
        served = wait_served("/outage", stage.listener_port, "wed", 90)
        refused.recovered_s = f"{served:.1f}" if served is not None else ">90"
        refused.notes.append(
            f"refused {run.lengths.api_outage:.0f} s; "
            "recovered: a change made meanwhile reaches Envoy"
        )
        usage.take(pid_of(dragoman))
        stage.into(refused)
        refused.sent, refused.failed = refused.sent - sent, refused.failed - failed
    usage.into(silent)
    usage.into(refused)
    silent.notes.append("RSS/CPU: both parts")
    return [silent, refused]


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def stalled_tls_handshakes(run: Run) -> Row:
    row = Row("10", "stalled TLS handshakes", seen_asked=False)
    usage = Usage()
    root = run.root("handshakes")
    envoy_tls, server_flags = deployed_tls(root)
    tls = XdsClientTls(
        trusted_ca=str(envoy_tls / "ca.crt"),
        certificate=str(envoy_tls / "tls.crt"),
        private_key=str(envoy_tls / "tls.key"),
        server_name="dragoman.dragoman-system.svc",
    )
    stage = Stage(root, run.rate)
    manifests = root / "manifests"
    manifests.mkdir()
    write(manifests, "gateway.yaml", gateway_yaml(stage.listener_port))
    write(manifests, "services.yaml", services_yaml(stage.backend_port))
    write(manifests, "route.yaml", route_yaml("web"))
    serve = ServeProcess(manifests, root / "dragoman.log", server_flags)
    serve.xds_address = f"127.0.0.1:{stage.xds_port}"
    sockets: list[socket.socket] = []
    try:
        stage.start_backends()
        serve.start()
        stage.start_envoy("/shop", xds_tls=tls)
        pid = pid_of(serve)
        assert pid is not None
        before = fds(pid)
        for _ in range(run.lengths.stalled):
            with contextlib.suppress(OSError):
                sockets.append(socket.create_connection(("127.0.0.1", stage.xds_port), timeout=2))
        time.sleep(1.0)
        held = fds(pid)
        time.sleep(7.0)
        later = fds(pid)
        row.notes.append(
            f"{len(sockets)} silent connections: dragoman's fds {before} before, {held} after 1 s, "
            f"{later} after 8 s"
        )
        usage.take(pid)
        stage.into(row)
    finally:
        for sock in sockets:
            sock.close()
        stage.stop()
        serve.stop()
    usage.into(row)
    return row


def connection_age(run: Run) -> Row:
    row = Row("11", "max connection age", seen_asked=False)
    usage = Usage()
    root = run.root("age")
    args = run.tree.flag(row, "--xds-max-connection-age", f"{run.lengths.connection_age:g}s")
    with manifest_world(root, run.rate, args) as (stage, serve):
        assert stage.envoy is not None

        def counters() -> tuple[int, int, int]:
            assert stage.envoy is not None
            stats = stage.envoy.stats()
            connections = sum(
                v
                for k, v in stats.items()
                if re.fullmatch(r"cluster\.[^.]*xds[^.]*\.upstream_cx_total", k)
            )
            return (
                stats.get("listener_manager.listener_modified", 0),
                stats.get("cluster_manager.cluster_modified", 0),
                connections,
            )

        first = counters()
        time.sleep(run.lengths.age_hold)
        last = counters()
        row.notes.append(
            f"age {run.lengths.connection_age:g} s over {run.lengths.age_hold:.0f} s: "
            f"{last[2] - first[2]} reconnects, listener_modified +{last[0] - first[0]}, "
            f"cluster_modified +{last[1] - first[1]}"
        )
        usage.take(pid_of(serve))
        stage.into(row)
    usage.into(row)
    return row


def a_large_delta_reconnect(run: Run) -> Row:
    row = Row("12", "50,000-resource reconnect", seen_asked=False)
    usage = Usage()
    root = run.root("reconnect")
    names = [f"namespace-{i % 100:03d}/service-name-{i:06d}/8080" for i in range(50_000)]
    version = "0123456789abcdef" * 4
    reconnect = delta_request(
        CLUSTER, ["*", *names], initial=dict.fromkeys(names, version),
        node=Node(id="reconnecting", cluster="default/edge"),
    )  # fmt: skip

    async def send(port: int) -> str:
        options = [
            ("grpc.max_send_message_length", 64 << 20),
            ("grpc.max_receive_message_length", 64 << 20),
        ]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
            call = ads_pb2_grpc.AggregatedDiscoveryServiceStub(channel).DeltaAggregatedResources()
            started = time.monotonic()
            try:
                await call.write(reconnect)
                response = await asyncio.wait_for(call.read(), 30)
            except grpc.aio.AioRpcError as error:
                return f"refused: {error.code().name}"
            except TimeoutError:
                return "no answer in 30 s"
            finally:
                call.cancel()
            removed = len(response.removed_resources)
            return f"answered in {time.monotonic() - started:.2f} s ({removed} removed)"

    with manifest_world(root, run.rate, []) as (stage, serve):
        outcome = asyncio.run(send(stage.xds_port))
        row.notes.append(f"{reconnect.ByteSize() / 2**20:.1f} MiB request: {outcome}")
        time.sleep(1.0)
        usage.take(pid_of(serve))
        stage.into(row)
    usage.into(row)
    return row


SCENARIOS: dict[str, Callable[[Run], Row | list[Row]]] = {
    "1": restart_with_a_broken_file,
    "2": restart_during_a_dns_outage,
    "3": an_unreadable_file,
    "4": xds_client_certificate_rotation,
    "5": one_flooding_client,
    "6": a_kind_answering_404,
    "7": an_in_place_write_with_a_pause,
    "8": streams_that_never_read,
    "9": a_silent_watch_and_an_api_outage,
    "10": stalled_tls_handshakes,
    "11": connection_age,
    "12": a_large_delta_reconnect,
}


def print_table(rows: list[Row], run: Run, started_load: tuple[float, ...]) -> None:
    mode = "quick" if run.lengths == QUICK else "default lengths"
    print(f"\ndragoman from {run.tree.path}; {run.rate:g} requests/s through Envoy; {mode}")
    header = (
        f"{'#':>3} {'fault':<26} {'sent':>6} {'failed':>6} {'seen s':>7} {'recovered s':>11} "
        f"{'RSS MiB':>8} {'CPU s':>6}  notes"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        seen = f"{row.seen_s:.1f}" if row.seen_s is not None else "-" if row.seen_asked else "n/a"
        print(
            f"{row.number:>3} {row.name:<26} {row.sent:>6} {row.failed:>6} {seen:>7} "
            f"{row.recovered_s:>11} {row.rss_mib:>8.0f} {row.cpu_s:>6.1f}  {'; '.join(row.notes)}"
        )
    ended_load = os.getloadavg()
    print(
        "load average (1, 5, 15 min): at start "
        + ", ".join(f"{x:.2f}" for x in started_load)
        + "; at end "
        + ", ".join(f"{x:.2f}" for x in ended_load)
        + f"; {os.cpu_count()} CPUs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every scenario in a few seconds")
    parser.add_argument("--only", default="", help="scenario numbers, comma-separated")
    parser.add_argument("--rate", type=float, default=180.0, help="requests a second")
    parser.add_argument("--tree", type=Path, default=ROOT, help="run dragoman from this tree")
    parser.add_argument("--keep", action="store_true", help="keep the logs (the path is printed)")
    args = parser.parse_args()
    tree = Tree.at(args.tree.resolve())
    # The dragoman processes import the tree's package, and only its: the working directory
    # would come first on their path.
    os.environ["PYTHONPATH"] = str(tree.path)
    chosen = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    started_load = os.getloadavg()
    rows: list[Row] = []
    workdir = tempfile.mkdtemp(prefix="dragoman-faults-")
    if args.keep:
        print(f"logs in {workdir}", file=sys.stderr)
    try:
        os.chdir(workdir)
        run = Run(tree, QUICK if args.quick else DEFAULT, args.rate, Path(workdir))
        for number in chosen:
            started = time.monotonic()
            try:
                made = SCENARIOS[number](run)
            except Exception as error:  # one scenario failing does not hide the others
                made = Row(number, SCENARIOS[number].__name__, notes=[f"failed: {error!r}"[:300]])
            for row in made if isinstance(made, list) else [made]:
                rows.append(row)
                print(f"[{time.monotonic() - started:5.1f} s] {row}", file=sys.stderr, flush=True)
        print_table(rows, run, started_load)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
