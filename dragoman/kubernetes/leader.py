"""Leader election through a coordination.k8s.io/v1 Lease, as client-go's leaderelection.

Every replica tries to acquire or renew the Lease every `retry_period`. A Lease held by
another replica counts as expired only after `lease_duration` has passed on *our* clock
since we last saw its record change, so clocks that disagree between nodes do not matter.
A leader that cannot renew for `renew_deadline` (shorter than `lease_duration`) steps
down before anyone else may take over. Writes carry the resourceVersion read, so two
replicas racing for an expired Lease cannot both win. On shutdown the leader releases the
Lease so that another replica takes over at once.

Why two leaders never overlap: a renewal counts from the moment its request was *sent*,
which is before the API server stored it, and so before any other replica can have seen
it. Another replica waits `lease_duration` from when it saw that record; we stop leading
`renew_deadline` after sending it, by a timer that fires whether or not a request is
still hanging, and `leading_now()` checks the same deadline on the clock for callers in
other threads (the status writer asks it right before every write).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from dragoman.kubernetes.client_errors import describe_error
from dragoman.xds.server.replica import replica_name

log = logging.getLogger("dragoman.kubernetes.leader")

LEASE_GROUP = "coordination.k8s.io"
LEASE_VERSION = "v1"
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    identity: str
    name: str = "dragoman-leader"
    namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    @property
    def request_timeout(self) -> float:
        """The bound on each Lease request: an attempt (a read, then a write) that hangs
        gives up while a retry still fits before the renew deadline."""
        return max(0.1, (self.renew_deadline - self.retry_period) / 2)

    def problems(self) -> list[str]:
        found = []
        if self.lease_duration < 1:
            found.append("the lease duration must be at least 1 second")
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            found.append("expected retry period < renew deadline < lease duration")
        if not self.identity:
            found.append("the holder identity must not be empty")
        return found


def default_identity() -> str:
    """The replica's name: the pod's (POD_NAME) or, outside a pod, host and pid."""
    return replica_name()


def default_namespace() -> str:
    """The namespace this pod runs in, or "default" outside a cluster."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as file:
            return file.read().strip() or "default"
    except OSError:
        return "default"


class LeaseConflict(Exception):
    """Someone else wrote the Lease between our read and our write."""


class LeaseClient:
    """Lease reads and writes as raw JSON (the Lease group has the custom-object URL shape,
    so the client sends our MicroTime strings untouched)."""

    def __init__(self, client: Any, request_timeout: float = 10.0) -> None:
        from kubernetes import client as k8s

        self.api = k8s.CustomObjectsApi(client)
        self.timeout = request_timeout

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            # Not preloaded: urllib3's response (the client's stubs say `object`).
            response: Any = self.api.get_namespaced_custom_object(
                LEASE_GROUP, LEASE_VERSION, namespace, "leases", name, **self._raw()
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return json.loads(response.data)

    def create(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(
            self.api.create_namespaced_custom_object,
            LEASE_GROUP,
            LEASE_VERSION,
            namespace,
            "leases",
            body,
        )

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._write(
            self.api.replace_namespaced_custom_object,
            LEASE_GROUP,
            LEASE_VERSION,
            namespace,
            "leases",
            name,
            body,
        )

    def _write(self, method: Callable[..., Any], *args: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            return json.loads(method(*args, **self._raw()).data)
        except ApiException as error:
            if error.status == 409:  # Conflict on update, AlreadyExists on create
                raise LeaseConflict(str(error.reason)) from None
            raise

    def _raw(self) -> dict[str, Any]:
        return {"_preload_content": False, "_request_timeout": self.timeout}


class Attempt(Enum):
    LEADING = "leading"  # we hold the Lease now
    HELD = "held"  # another replica holds it
    FAILED = "failed"  # could not tell: API error or a lost race


def micro_time(moment: datetime.datetime) -> str:
    """RFC 3339 with microseconds, as the API's MicroTime is written."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class LeaderElector:
    def __init__(
        self,
        leases: LeaseClient,
        settings: LeaseSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime.datetime] = _utc_now,
    ) -> None:
        self.leases = leases
        self.settings = settings
        self.clock = clock
        self.wall_clock = wall_clock
        self.is_leader = False
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        # When the request of the last successful attempt was sent, on `clock`.
        self._renewed_at = -math.inf
        self._step_down: asyncio.TimerHandle | None = None
        self._on_change: Callable[[bool], None] = lambda leading: None

    @property
    def identity(self) -> str:
        return self.settings.identity

    def leading_now(self) -> bool:
        """Whether we may act as the leader at this instant: we lead, and our last renewal,
        counted from when its request was sent, is younger than the renew deadline. Safe to
        call from any thread; it does not wait for the loop to notice a missed deadline."""
        return self.is_leader and self.clock() < self._renewed_at + self.settings.renew_deadline

    # ------------------------------------------------------------ one attempt

    def try_acquire_or_renew(self) -> Attempt:
        """Reads the Lease and takes or renews it if we may. Blocking."""
        settings = self.settings
        now = micro_time(self.wall_clock())
        lease = self.leases.get(settings.namespace, settings.name)
        if lease is None:
            spec: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": self._duration_seconds(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            }
            body = {
                "apiVersion": f"{LEASE_GROUP}/{LEASE_VERSION}",
                "kind": "Lease",
                "metadata": {"name": settings.name, "namespace": settings.namespace},
                "spec": spec,
            }
            try:
                created = self.leases.create(settings.namespace, body)
            except LeaseConflict:
                return Attempt.FAILED  # created by another replica just now
            self._observe(created.get("spec") or spec)
            return Attempt.LEADING

        spec = dict(lease.get("spec") or {})
        self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        duration = float(spec.get("leaseDurationSeconds") or settings.lease_duration)
        if holder and holder != self.identity and self._observed_at + duration > self.clock():
            return Attempt.HELD

        renewed = dict(spec)
        if holder != self.identity:
            renewed["acquireTime"] = now
            renewed["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        renewed["holderIdentity"] = self.identity
        renewed["leaseDurationSeconds"] = self._duration_seconds()
        renewed["renewTime"] = now
        body = {**lease, "spec": renewed}
        try:
            updated = self.leases.replace(settings.namespace, settings.name, body)
        except LeaseConflict:
            return Attempt.FAILED
        self._observe(updated.get("spec") or renewed)
        return Attempt.LEADING

    def release(self) -> bool:
        """Gives the Lease up if we hold it, so another replica need not wait it out."""
        settings = self.settings
        lease = self.leases.get(settings.namespace, settings.name)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return False
        now = micro_time(self.wall_clock())
        spec = {
            **(lease.get("spec") or {}),
            "leaseDurationSeconds": 1,
            "renewTime": now,
            "acquireTime": now,
        }
        spec.pop("holderIdentity", None)
        try:
            self.leases.replace(settings.namespace, settings.name, {**lease, "spec": spec})
        except LeaseConflict:
            return False
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        if spec != self._observed_spec:
            self._observed_spec = dict(spec)
            self._observed_at = self.clock()

    def _duration_seconds(self) -> int:
        return max(1, round(self.settings.lease_duration))

    # --------------------------------------------------------------------- loop

    async def run(self, stop: asyncio.Event, on_change: Callable[[bool], None]) -> None:
        """Campaigns until `stop` is set; `on_change(True/False)` when leadership changes."""
        settings = self.settings
        self._on_change = on_change
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                started = self.clock()
                attempt = asyncio.ensure_future(asyncio.to_thread(self._attempt))
                # A hanging request is not waited out here: the step-down timer ends our
                # leadership on time, and `stop` ends the campaign at once.
                await asyncio.wait({attempt, stopped}, return_when=asyncio.FIRST_COMPLETED)
                if not attempt.done():
                    break
                self._after(attempt.result(), started)
                period = settings.retry_period
                if not self.is_leader:
                    period *= 1 + 0.2 * random.random()  # followers spread their attempts
                await asyncio.wait({stopped}, timeout=period)
        finally:
            stopped.cancel()
            self._cancel_step_down()
            if self.is_leader:
                self._lose("shutting down", logging.INFO)
                try:
                    released = await asyncio.wait_for(asyncio.to_thread(self.release), 5.0)
                except Exception as error:
                    log.warning(
                        "could not release lease %s: %s", settings.name, describe_error(error)
                    )
                else:
                    if released:
                        log.info("released lease %s/%s", settings.namespace, settings.name)

    def _attempt(self) -> Attempt:
        try:
            return self.try_acquire_or_renew()
        except Exception as error:  # API down, timeouts, ...: try again
            settings = self.settings
            log.warning("lease %s/%s: %s", settings.namespace, settings.name, describe_error(error))
            return Attempt.FAILED

    def _after(self, attempt: Attempt, started: float) -> None:
        """What an attempt whose request was sent at `started` means for our leadership."""
        settings = self.settings
        if attempt is Attempt.LEADING:
            self._renewed_at = max(self._renewed_at, started)
            if not self.is_leader and self.clock() < self._renewed_at + settings.renew_deadline:
                self.is_leader = True
                log.info(
                    "%s became leader (lease %s/%s)",
                    self.identity,
                    settings.namespace,
                    settings.name,
                )
                self._on_change(True)
            if self.is_leader:
                self._schedule_step_down()
            return
        if self.is_leader and attempt is Attempt.HELD:
            holder = (self._observed_spec or {}).get("holderIdentity")
            self._lose(f"lease taken by {holder}")
        # FAILED: the step-down timer ends our leadership if no renewal comes in time.

    def _schedule_step_down(self) -> None:
        self._cancel_step_down()
        delay = self._renewed_at + self.settings.renew_deadline - self.clock()
        loop = asyncio.get_running_loop()
        self._step_down = loop.call_later(max(0.0, delay), self._deadline_reached)

    def _cancel_step_down(self) -> None:
        if self._step_down is not None:
            self._step_down.cancel()
            self._step_down = None

    def _deadline_reached(self) -> None:
        self._step_down = None
        if not self.is_leader:
            return
        if self.leading_now():  # renewed meanwhile (or the clock disagrees): look again
            self._schedule_step_down()
            return
        self._lose("could not renew the lease in time")

    def _lose(self, why: str, level: int = logging.WARNING) -> None:
        self._cancel_step_down()
        self.is_leader = False
        log.log(level, "%s stopped leading: %s", self.identity, why)
        self._on_change(False)
