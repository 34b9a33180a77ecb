"""`dragoman drain`: let an Envoy finish its requests before it is stopped.

Envoy exits at once on SIGTERM, dropping every request in flight. Draining first makes the
stop clean: the readiness check fails (so balancers stop sending), listeners drain gracefully
(HTTP/1 responses say `Connection: close`, HTTP/2 connections get GOAWAY, new connections are
still accepted until Envoy's --drain-time-s is over, then the listeners stop), and the
command returns once the listeners have stopped and no downstream connection is left, or
when its timeout runs out.
"""

from __future__ import annotations

import argparse
import http.client
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dragoman.commands.common import host_port
from dragoman.stop_signals import StopSignals

# Downstream connections of every listener together; the admin interface's are not counted.
CONNECTIONS_STAT = "server.total_connections"
LISTENERS_STAT = "listener_manager.total_listeners_active"
STOPPED_STAT = "listener_manager.listener_stopped"
_DRAIN_STATS = (CONNECTIONS_STAT, LISTENERS_STAT, STOPPED_STAT)
_DRAIN_STATS_FILTER = "^(" + "|".join(name.replace(".", "\\.") for name in _DRAIN_STATS) + ")$"


def duration(value: str) -> float:
    """A duration such as `45s`, `1m30s` or `500ms`, in seconds."""
    from dragoman.objects.durations import DURATION_EXPECTED, parse_duration

    seconds = parse_duration(value)
    if seconds is None:
        raise argparse.ArgumentTypeError(f"{value!r}: expected {DURATION_EXPECTED}")
    return seconds


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "drain",
        help="drain an Envoy (fail readiness, drain listeners, wait for its connections)",
        description="Fail Envoy's readiness, drain its listeners gracefully and wait until "
        "no downstream connection is left (or --timeout): Envoy's preStop step.",
    )
    admin = parser.add_mutually_exclusive_group(required=True)
    admin.add_argument(
        "--admin-socket", type=Path, metavar="PATH", help="Envoy's admin unix socket"
    )
    admin.add_argument(
        "--admin-address", type=host_port, metavar="HOST:PORT", help="Envoy's admin over TCP"
    )
    parser.add_argument(
        "--timeout",
        type=duration,
        default=45.0,
        metavar="DURATION",
        help="stop waiting after this long, connections left or not (default: 45s)",
    )
    parser.add_argument(
        "--interval", type=duration, default=0.5, metavar="DURATION", help="poll period"
    )
    parser.add_argument(
        "--after-sigterm",
        action="store_true",
        help="wait for SIGTERM (or SIGINT) first, then drain: a sidecar beside Envoy",
    )
    parser.add_argument(
        "--done-file",
        type=Path,
        metavar="PATH",
        help="create PATH when the drain is over (what Envoy's own preStop hook waits for)",
    )
    parser.set_defaults(run=run)


class AdminUnreachable(RuntimeError):
    """Envoy's admin interface did not answer."""


@dataclass(frozen=True)
class EnvoyAdminTarget:
    """Where Envoy's admin interface listens: a unix socket path or a TCP `host:port`."""

    socket_path: Path | None = None
    address: str | None = None
    timeout: float = 2.0

    def request(self, method: str, path: str) -> tuple[int, bytes]:
        """One request on a fresh connection: (status, body)."""
        connection = self._connection()
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read()
        except OSError as error:
            raise AdminUnreachable(f"{method} {path}: {error}") from None
        finally:
            connection.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            from dragoman.demo.admin import UnixHTTPConnection

            return UnixHTTPConnection(self.socket_path, self.timeout)
        host, _, port = (self.address or "").rpartition(":")
        return http.client.HTTPConnection(host.strip("[]"), int(port), timeout=self.timeout)

    def post(self, path: str) -> None:
        status, body = self.request("POST", path)
        if status != 200:
            raise AdminUnreachable(f"POST {path} answered {status}: {body[:200]!r}")

    def drain_state(self) -> DrainState:
        """The stats that say how far the drain is."""
        from urllib.parse import quote

        from dragoman.demo.admin import parse_stats

        status, body = self.request("GET", f"/stats?filter={quote(_DRAIN_STATS_FILTER)}")
        if status != 200:
            raise AdminUnreachable(f"GET /stats answered {status}")
        stats = parse_stats(body.decode(errors="replace"))
        missing = sorted(set(_DRAIN_STATS) - set(stats))
        if missing:
            raise AdminUnreachable(f"Envoy has no stat {', '.join(missing)}")
        return DrainState(
            connections=stats[CONNECTIONS_STAT],
            listeners=stats[LISTENERS_STAT],
            stopped=stats[STOPPED_STAT],
        )


@dataclass(frozen=True)
class DrainState:
    connections: int  # downstream connections of every listener (the admin's aside)
    listeners: int  # listeners Envoy has
    stopped: int  # listeners stopped so far (a counter: since Envoy started)


@dataclass(frozen=True)
class DrainOutcome:
    drained: bool  # listeners stopped and no connection left (False: the timeout came first)
    listeners_stopped: bool
    connections: int  # open when the command stopped waiting
    seconds: float


class DrainAdmin(Protocol):
    def post(self, path: str) -> None: ...
    def drain_state(self) -> DrainState: ...


def drain(
    admin: DrainAdmin,
    *,
    timeout: float,
    interval: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainOutcome:
    """Fail readiness, start the graceful drain, then poll until Envoy's listeners have
    stopped (after its --drain-time-s, during which balancers stop sending) and no
    connection is left.

    Connections reaching zero is not enough alone: until the listeners stop, a balancer that
    has not yet heard of the drain can still open new ones.
    """
    start = clock()
    before = admin.drain_state()
    admin.post("/healthcheck/fail")
    # Every listener: the Gateways' ones carry no traffic direction for `inboundonly` to pick.
    admin.post("/drain_listeners?graceful")
    state = admin.drain_state()
    while True:
        elapsed = clock() - start
        stopped = state.stopped - before.stopped >= before.listeners
        if (stopped and state.connections == 0) or elapsed >= timeout:
            drained = stopped and state.connections == 0
            return DrainOutcome(drained, stopped, state.connections, elapsed)
        sleep(max(0.0, min(interval, timeout - elapsed)))
        state = admin.drain_state()


def _wait_for_sigterm() -> None:
    stop = StopSignals()
    print("waiting for SIGTERM to drain Envoy", flush=True)
    stop.wait()


def run(args: argparse.Namespace) -> int:
    admin = EnvoyAdminTarget(socket_path=args.admin_socket, address=args.admin_address)
    if args.after_sigterm:
        _wait_for_sigterm()
    try:
        outcome = drain(admin, timeout=args.timeout, interval=args.interval)
    except AdminUnreachable as error:
        print(f"dragoman drain: Envoy's admin interface: {error}", file=sys.stderr)
        outcome = None
    if args.done_file is not None:
        args.done_file.touch()
    if outcome is None:
        return 1
    if not outcome.drained:
        print(
            f"dragoman drain: after {outcome.seconds:.1f}s, {outcome.connections} "
            "connections still open; the listeners "
            + ("have stopped" if outcome.listeners_stopped else "still accept"),
            file=sys.stderr,
        )
        return 1
    print(f"drained in {outcome.seconds:.1f}s", flush=True)
    return 0
