"""The backend-failover scenario of the public Gateway API benchmark
(howardjohn/gateway-api-bench, `tests/backendfailover`) on dragoman, once per mode.

    python benchmarks/failover.py                 # 60 s per mode, both failure variants
    python benchmarks/failover.py --quick         # 20 s per mode
    python benchmarks/failover.py --duration 120 --rate 200 --variants 503

The original: a Service with three pods that are always healthy and one that flips, 22 s
healthy then 22 s refusing every TCP connection with a reset (iptables REJECT), five times;
16 HTTPRoutes of 16 rules each (256 paths, `retry.attempts: 0`); one client that sends a GET
every 5 ms, one after the other, to the next path in turn, and counts the answers that were not
200 and which pod answered. Its modes: nothing, retries, outlier detection (Envoy Gateway's
`healthCheck.passive`: 5 consecutive 5xx, gateway errors or local-origin failures,
`baseEjectionTime` 10 s, `maxEjectionPercent` 100, `splitExternalLocalOriginErrors`, panic
threshold 0) and active health checks (`/healthz`, 1 s interval and timeout, thresholds 1).

Here, on loopback: four endpoints (`tests.support.policy_backends`, in this process) of one
pod-backed Service, `dragoman serve` and one real Envoy (the harness of
`benchmarks/gateway_bench.py`), 50 HTTPRoutes with one path each, and the same one client at
`--rate` (100) requests per second through one keep-alive connection, each request to the next
route in turn. One endpoint flaps: `--period` (5 s) healthy, then as long failing, for
`--duration` (60 s). Each mode runs on a fresh dragoman and Envoy, with the original's
settings: none; retry (every rule `retry: {attempts: 2, codes: [503]}`); passive (a
BackendPolicy `healthCheck.passive` with the original's values and `panicThreshold: 0`);
active (`healthCheck.active`, the original's values); passive + retry.

Deviations: the flap is 5 s / 5 s (the original's 22 s / 22 s), and the run is a duration
rather than five flaps; 50 routes of one rule, not 16 of 16; two failure variants, `503` (the
endpoint answers every request 503) and `refused` (its port closed: new connections refused,
open ones closed unanswered at their next request; the original's reset is on every packet);
`retry` names code 503, since GEP-1731 retries connection errors by itself but a status only
when named. Requests sent to the failing endpoint are counted by the endpoint (503s answered,
requests dropped unanswered) and, when refused, by Envoy's count of connections that host
refused (`cx_connect_fail` on `/clusters`); active checks are counted by the endpoints
(`/healthz`), and not among them. The check rate is measured again with one route. The
client waits for each answer, so on a loaded machine it sends fewer than `--rate` (retries
slow it more): passive's cut is reckoned per request sent.

An external primary (an ExternalName resolved by the test DNS responder) with a BackendPolicy
`failover` to an external secondary, both checked every 250 ms (2 failures to be unhealthy),
takes the same traffic; the primary fails `--failovers` times (and recovers): the seconds from
its first failed check to the first request the secondary answers.

Prints a table per variant and the targets met or missed, with ratios against the no-policy
run of the same variant and the one-route run. It is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from gateway_bench import Client, World, gateway_object, load_average  # noqa: E402
from propagation import GATEWAY, free_port, start_envoy  # noqa: E402

from dragoman.demo.dns import DnsResponder  # noqa: E402
from tests.support.builders import (  # noqa: E402
    backend_policy,
    backend_ref,
    endpoint_slice,
    external_service,
    http_route,
    match,
    rule,
    service,
)
from tests.support.policy_backends import Flaps, PolicyBackend, flapping  # noqa: E402

Object = dict[str, Any]

HOST = "failover.example.com"
POOL = ("127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24")  # the last one flaps
HEALTH_PATH = "/healthz"
RETRY = {"attempts": 2, "codes": [503]}
PASSIVE = {
    "consecutive5XxErrors": 5,
    "consecutiveGatewayErrors": 5,
    "consecutiveLocalOriginFailures": 5,
    "baseEjectionTime": "10s",
    "maxEjectionPercent": 100,
    "splitExternalLocalOriginErrors": True,
}
ACTIVE = {
    "type": "HTTP",
    "interval": "1s",
    "timeout": "1s",
    "healthyThreshold": 1,
    "unhealthyThreshold": 1,
    "http": {"path": HEALTH_PATH, "expectedStatuses": [200]},
}
# mode: (the rules' retry, the BackendPolicy's healthCheck)
MODES: dict[str, tuple[Object | None, Object | None]] = {
    "none": (None, None),
    "retry": (RETRY, None),
    "passive": (None, {"passive": PASSIVE, "panicThreshold": 0}),
    "active": (None, {"active": ACTIVE, "panicThreshold": 0}),
    "passive+retry": (RETRY, {"passive": PASSIVE, "panicThreshold": 0}),
}
VARIANTS = ("503", "refused")
PRIMARY, SECONDARY = "primary.bench.test", "secondary.bench.test"
PRIMARY_IP, SECONDARY_IP = "127.0.0.25", "127.0.0.26"
FAILOVER_CHECK = {
    "type": "HTTP",
    "interval": "250ms",
    "unhealthyThreshold": 2,
    "http": {"path": HEALTH_PATH},
}
TARGETS = {"failover_s": 2.0, "passive_cut": 0.8, "check_growth": 1.2}


# --- the world -----------------------------------------------------------------------------


def pool_objects(
    routes: int, retry: Object | None, health: Object | None, port: int
) -> list[Object]:
    """The Service of four endpoints, its policy, and `routes` HTTPRoutes to it."""
    objects: list[Object] = [
        service("backend", 80, port),
        endpoint_slice("backend", port, *POOL),
    ]
    if health is not None:
        objects.append(backend_policy("backend", "backend", spec={"healthCheck": health}))
    for i in range(routes):
        found = rule(backend_ref("backend", 80), matches=[match(f"/r{i}")])
        if retry is not None:
            found["retry"] = retry
        objects.append(route(f"r{i}", [found]))
    return objects


def route(name: str, rules: list[Object]) -> Object:
    return http_route(name, rules=rules, parents=[GATEWAY])


@contextmanager
def served(objects: Sequence[Object], dns_port: int) -> Iterator[World]:
    """dragoman and one Envoy serving `objects` (the harness of gateway_bench)."""
    workdir = Path(tempfile.mkdtemp(prefix="fob-"))  # short: Envoy's admin socket lives below
    made = World(workdir, "manifests", listener_port=free_port(), xds_port=free_port())
    try:
        made.manifests.mkdir()
        made.write("gateway", gateway_object(made.listener_port))
        made.write("world", *objects)
        made.start_dragoman()
        made.envoy = start_envoy(workdir, 0, made.xds_port, dns_port, delta=False)
        yield made
    finally:
        made.close()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def backends(hosts: Sequence[str], port: int) -> Iterator[list[PolicyBackend]]:
    started: list[PolicyBackend] = []
    try:
        for k, host in enumerate(hosts):
            started.append(PolicyBackend(f"b{k}", host, port).start())
        yield started
    finally:
        for backend in started:
            if not backend.behaviour.refusing:
                backend.stop()


async def until_every_route_answers(client: Client, routes: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for i in range(routes):
        while (await client.ask(HOST, f"/r{i}"))[0] != 200:
            if time.monotonic() > deadline:
                raise TimeoutError(f"/r{i} never answered 200")
            await asyncio.sleep(0.05)


# --- the client ---------------------------------------------------------------------------


@dataclass
class Traffic:
    sent: int = 0
    failed: int = 0  # not 200, or no answer
    ended: float = 0.0  # monotonic


async def steady(client: Client, routes: int, rate: float, duration: float) -> Traffic:
    """One request after another at `rate` per second, to the next route each time."""
    traffic = Traffic()
    began = time.monotonic()
    while time.monotonic() - began < duration:
        status, _ = await client.ask(HOST, f"/r{traffic.sent % routes}")
        traffic.sent += 1
        traffic.failed += status != 200
        await asyncio.sleep(max(0.0, began + traffic.sent / rate - time.monotonic()))
    traffic.ended = time.monotonic()
    return traffic


# --- one mode -----------------------------------------------------------------------------


@dataclass
class ModeFigures:
    variant: str
    mode: str
    sent: int
    client_failures: int
    to_failing: int  # requests (every attempt) the flapping endpoint got while failing
    back_s: list[float]  # per recovery: seconds until it answered a request again
    missed_windows: int  # recoveries it got no request before failing again
    checks_per_s: float  # active checks per second per healthy endpoint


def connect_failures(made: World, host: str, port: int) -> int:
    assert made.envoy is not None
    needle = f"::{host}:{port}::cx_connect_fail::"
    return sum(
        int(line.rsplit("::", 1)[1])
        for line in made.envoy.clusters_text().splitlines()
        if needle in line and "/backend/" in line
    )


def recoveries(
    flaps: Flaps, flapper: PolicyBackend, period: float, ended: float
) -> tuple[list[float], int]:
    """Per recovery: seconds until the endpoint answered a request; and the healthy windows
    it got none in (a window the traffic's end cut short is left out)."""
    with flapper.seen.lock:
        served = [t for t, path, status in flapper.seen.answers if path != HEALTH_PATH]
    back, missed = [], 0
    for recovered in flaps.recovered_at:
        first = next((t for t in served if t >= recovered), None)
        if first is not None and first - recovered < period:
            back.append(first - recovered)
        elif recovered + period <= ended:
            missed += 1
    return back, missed


def run_mode(variant: str, mode: str, args: argparse.Namespace, dns_port: int) -> ModeFigures:
    retry, health = MODES[mode]
    port = free_port(POOL)
    with (
        backends(POOL, port) as pool,
        served(pool_objects(args.routes, retry, health, port), dns_port) as made,
    ):
        flapper = pool[-1]

        async def session() -> tuple[float, int, int, Flaps, Traffic]:
            client = Client(made.listener_port)
            try:
                await until_every_route_answers(client, args.routes)
                began, checks_before = time.monotonic(), checks_of(pool[:-1])
                refused_before = connect_failures(made, flapper.address[0], port)
                with flapping(flapper, variant, args.period) as flaps:
                    traffic = await steady(client, args.routes, args.rate, args.duration)
                return began, checks_before, refused_before, flaps, traffic
            finally:
                client.close()

        began, checks_before, refused_before, flaps, traffic = asyncio.run(session())
        elapsed = traffic.ended - began
        with flapper.seen.lock:
            answered = [
                t
                for t, path, status in flapper.seen.answers
                if status != 200 and path != HEALTH_PATH and t >= began
            ]
            dropped = [t for t in flapper.seen.dropped_at if t >= began]
        refused = connect_failures(made, flapper.address[0], port) - refused_before
        back, missed = recoveries(flaps, flapper, args.period, traffic.ended)
        checks = checks_of(pool[:-1]) - checks_before
    return ModeFigures(
        variant,
        mode,
        traffic.sent,
        traffic.failed,
        len(answered) + len(dropped) + refused,
        back,
        missed,
        checks / elapsed / (len(POOL) - 1) if health and "active" in health else 0.0,
    )


def checks_with_routes(routes: int, seconds: float, dns_port: int) -> float:
    """Active checks per second per endpoint, with `routes` routes and no traffic."""
    port = free_port(POOL)
    health = {"active": ACTIVE, "panicThreshold": 0}
    with (
        backends(POOL, port) as pool,
        served(pool_objects(routes, None, health, port), dns_port) as made,
    ):
        asyncio.run(answered(made, routes))
        before = checks_of(pool)
        time.sleep(seconds)
        after = checks_of(pool)
    return (after - before) / seconds / len(pool)


async def answered(made: World, routes: int) -> None:
    client = Client(made.listener_port)
    try:
        await until_every_route_answers(client, routes)
    finally:
        client.close()


def checks_of(pool: Sequence[PolicyBackend]) -> int:
    return sum(len(backend.requests_to(HEALTH_PATH)) for backend in pool)


# --- external failover --------------------------------------------------------------------


def failover_objects(port: int) -> list[Object]:
    return [
        external_service("primary", PRIMARY, port),
        external_service("secondary", SECONDARY, port),
        backend_policy(
            "primary",
            "primary",
            spec={"healthCheck": {"active": FAILOVER_CHECK}, "failover": [{"name": "secondary"}]},
        ),
        backend_policy("secondary", "secondary", spec={"healthCheck": {"active": FAILOVER_CHECK}}),
        route("r0", [rule(backend_ref("primary", port), matches=[match("/r0")])]),
    ]


def failover_seconds(dns: DnsResponder, times: int, rate: float) -> list[float]:
    """Per failure of the primary: its first failed check → the secondary's first request."""
    dns.set_a(PRIMARY, PRIMARY_IP)
    dns.set_a(SECONDARY, SECONDARY_IP)
    port = free_port((PRIMARY_IP, SECONDARY_IP))
    found: list[float] = []
    onset: list[float] = []
    with (
        backends((PRIMARY_IP, SECONDARY_IP), port) as (primary, secondary),
        served(failover_objects(port), dns.port) as made,
    ):
        asyncio.run(fail_over(primary, secondary, made, times, rate, found, onset))
    print(
        "external failover, the primary's failure → secondary: "
        + ", ".join(f"{s:.2f}" for s in onset)
        + " s"
    )
    return found


async def fail_over(
    primary: PolicyBackend,
    secondary: PolicyBackend,
    made: World,
    times: int,
    rate: float,
    found: list[float],
    onset: list[float],
) -> None:
    client = Client(made.listener_port)
    try:
        await until_every_route_answers(client, 1)
        for _ in range(times):
            await steady(client, 1, rate, 2.0)
            failed = time.monotonic()
            primary.behaviour.failing = True
            await steady(client, 1, rate, 4.0)
            primary.behaviour.failing = False
            with primary.seen.lock:
                check = min(
                    t for t, path, s in primary.seen.answers if path == HEALTH_PATH and t >= failed
                )
            with secondary.seen.lock:
                took = [t for t, path, _ in secondary.seen.answers if path != HEALTH_PATH]
            first = next((t for t in took if t >= failed), None)
            found.append(first - check if first is not None else float("inf"))
            onset.append(first - failed if first is not None else float("inf"))
            await steady(client, 1, rate, 3.0)  # given back
    finally:
        client.close()


# --- the report ---------------------------------------------------------------------------


def verdict(name: str, met: bool, detail: str) -> str:
    return f"  {'MET ' if met else 'MISS'} {name}: {detail}"


def table(rows: list[ModeFigures]) -> list[str]:
    lines = [
        f"{'variant':8} {'mode':14} {'sent':>6} {'client fail':>11} {'to failing':>10} "
        f"{'back s (median/max)':>20} {'missed':>6} {'checks/s/ep':>11}"
    ]
    for r in rows:
        back = f"{statistics.median(r.back_s):.2f}/{max(r.back_s):.2f}" if r.back_s else "-"
        lines.append(
            f"{r.variant:8} {r.mode:14} {r.sent:6d} {r.client_failures:11d} {r.to_failing:10d} "
            f"{back:>20} {r.missed_windows:6d} {r.checks_per_s:11.2f}"
        )
    return lines


def verdicts(rows: list[ModeFigures], checks: dict[int, float], failover: list[float]) -> list:
    found = []
    by = {(r.variant, r.mode): r for r in rows}
    for r in rows:
        if r.mode in ("retry", "passive+retry"):
            found.append(
                verdict(
                    f"{r.variant} {r.mode}: zero client failures",
                    r.client_failures == 0,
                    f"{r.client_failures} of {r.sent}",
                )
            )
        if r.mode == "passive" and (r.variant, "none") in by:
            # Per request sent: under load the client's pace differs from mode to mode.
            floor = by[(r.variant, "none")]
            base = floor.to_failing / floor.sent if floor.to_failing else 0.0
            cut = 1 - (r.to_failing / r.sent) / base if base and r.sent else 0.0
            found.append(
                verdict(
                    f"{r.variant} passive cuts requests to the failing endpoint by >= 80%",
                    cut >= TARGETS["passive_cut"],
                    f"{r.to_failing} of {r.sent} sent vs {floor.to_failing} of {floor.sent} "
                    f"without a policy: cut {cut:.0%} per request sent",
                )
            )
    if len(checks) == 2 and min(checks.values()) > 0:
        one, many = checks[1], max(k for k in checks)
        growth = checks[many] / one
        found.append(
            verdict(
                "health-check traffic does not grow with routes",
                growth <= TARGETS["check_growth"],
                f"{checks[many]:.2f}/s/endpoint at {many} routes vs {one:.2f} at 1: x{growth:.2f}",
            )
        )
    if failover:
        worst = max(failover)
        found.append(
            verdict(
                "failover within 2 s of the first failed check",
                worst <= TARGETS["failover_s"],
                f"{', '.join(f'{s:.2f}' for s in failover)} s; worst/target "
                f"{worst / TARGETS['failover_s']:.2f}",
            )
        )
    return found


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of traffic per mode")
    p.add_argument("--quick", action="store_true", help="20 s per mode, one failover")
    p.add_argument("--rate", type=float, default=100.0, help="requests per second")
    p.add_argument("--period", type=float, default=5.0, help="seconds healthy, then failing")
    p.add_argument("--routes", type=int, default=50)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--failovers", type=int, default=3)
    p.add_argument("--check-seconds", type=float, default=10.0, help="to count active checks")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.quick:
        args.duration, args.failovers, args.check_seconds = 20.0, 1, 5.0
    print(f"load average before: {load_average()}, {os.cpu_count()} cores", flush=True)
    rows: list[ModeFigures] = []
    with DnsResponder() as dns:
        for variant in args.variants.split(","):
            for mode in args.modes.split(","):
                figures = run_mode(variant, mode, args, dns.port)
                rows.append(figures)
                print(table([figures])[-1], f" load {load_average()}", flush=True)
        checks = {
            routes: checks_with_routes(routes, args.check_seconds, dns.port)
            for routes in sorted({1, args.routes})
        }
        failover = failover_seconds(dns, args.failovers, args.rate)
    print()
    print(
        f"{args.duration:.0f} s per mode at {args.rate:.0f} requests/s through {args.routes} "
        f"routes; flapping {args.period:.0f} s healthy / {args.period:.0f} s failing"
    )
    print("\n".join(table(rows)))
    print(
        "active checks per second per endpoint, no traffic: "
        + ", ".join(f"{n} route(s) {rate:.2f}" for n, rate in checks.items())
    )
    print(
        "external failover, first failed check → secondary: "
        + ", ".join(f"{s:.2f}" for s in failover)
        + " s"
    )
    print("targets:")
    print("\n".join(verdicts(rows, checks, failover)))
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
