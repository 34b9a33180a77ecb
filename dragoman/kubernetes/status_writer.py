"""Writes the statuses a build computed (Dag.statuses) to the API server's status
subresource. Run by the leader only; blocking, so the runtime calls it in a thread.

The informers' copy of each object decides whether a write is needed at all, so an
unchanged status costs no request. A write reads the object first, merges into what the
server holds then, and retries from a fresh read when someone wrote in between (409).
Leadership is asked again right before every write, not only between objects.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dragoman.dag.model import ObjectStatus
from dragoman.kubernetes.cache import CachedObject
from dragoman.kubernetes.client_errors import describe_error
from dragoman.kubernetes.status_fallback import waiting_for_controller
from dragoman.kubernetes.status_merge import merge_status, same_status, without_our_entries
from dragoman.kubernetes.watched_kinds import WatchedKind
from dragoman.objects import ObjectKey

log = logging.getLogger("dragoman.kubernetes.status_merge")


class StatusConflict(Exception):
    """The object changed between our read and our write."""


class StatusClient:
    """Reads objects and replaces their status subresource, as raw JSON."""

    def __init__(self, client: Any, request_timeout: float = 10.0) -> None:
        from kubernetes import client as k8s

        self.api = k8s.CustomObjectsApi(client)
        self.timeout = request_timeout

    def get(
        self, kind: WatchedKind, version: str, namespace: str, name: str
    ) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            if kind.namespaced:
                # Not preloaded: urllib3's response (the client's stubs say `object`).
                response: Any = self.api.get_namespaced_custom_object(
                    kind.group, version, namespace, kind.plural, name, **self._raw()
                )
            else:
                response = self.api.get_cluster_custom_object(
                    kind.group, version, kind.plural, name, **self._raw()
                )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return json.loads(response.data)

    def replace_status(
        self, kind: WatchedKind, version: str, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        try:
            if kind.namespaced:
                response: Any = self.api.replace_namespaced_custom_object_status(
                    kind.group, version, namespace, kind.plural, name, body, **self._raw()
                )
            else:
                response = self.api.replace_cluster_custom_object_status(
                    kind.group, version, kind.plural, name, body, **self._raw()
                )
        except ApiException as error:
            if error.status == 409:
                raise StatusConflict(str(error.reason)) from None
            raise
        return json.loads(response.data)

    def _raw(self) -> dict[str, Any]:
        return {"_preload_content": False, "_request_timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class _Target:
    entry: CachedObject
    status: Mapping[str, Any]
    # Written only while the object still holds this status (what we last computed).
    only_if: Mapping[str, Any] | None = None


@dataclass
class PublishResult:
    written: int = 0
    unchanged: int = 0  # skipped: the server already holds this status
    conflicts: int = 0  # 409s retried
    failed: int = 0
    gone: int = 0  # deleted before we could write
    left_alone: int = 0  # Gateways handed back whose status someone else has written since


def condition_time(moment: datetime.datetime) -> str:
    """A metav1.Time: RFC 3339 to the second, in UTC."""
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusWriter:
    def __init__(
        self,
        client: StatusClient,
        controller_name: str,
        *,
        wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        max_attempts: int = 5,
    ) -> None:
        self.client = client
        self.controller_name = controller_name
        self.wall_clock = wall_clock
        self.max_attempts = max_attempts

    def publish(
        self,
        desired: Mapping[ObjectKey, ObjectStatus],
        cached: Mapping[ObjectKey, CachedObject],
        leading: Callable[[], bool] = lambda: True,
        released: Mapping[ObjectKey, Mapping[str, Any]] | None = None,
    ) -> PublishResult:
        """Brings every object's status in line with `desired`; stops early once `leading`
        turns false. Objects that hold entries of ours in parents[]/ancestors[] but have
        no computed status any more get those entries withdrawn. `released`: Gateways we
        served and serve no more, each with the status we last computed for it; those that
        still hold it are reset to "Waiting for controller"."""
        result = PublishResult()
        for target in self._targets(desired, cached, released or {}):
            if not leading():
                break
            entry = target.entry
            if target.only_if is not None and not self._holds(entry.status, target.only_if):
                result.left_alone += 1
                continue
            if self._holds(entry.status, target.status):
                result.unchanged += 1
                continue
            try:
                self._write(target, result, leading)
            except Exception as error:  # API down, forbidden, ...: the next round retries
                result.failed += 1
                log.warning(
                    "cannot write the status of %s/%s/%s: %s",
                    entry.kind.kind,
                    entry.namespace or "-",
                    entry.name,
                    describe_error(error),
                )
        return result

    def _targets(
        self,
        desired: Mapping[ObjectKey, ObjectStatus],
        cached: Mapping[ObjectKey, CachedObject],
        released: Mapping[ObjectKey, Mapping[str, Any]],
    ) -> list[_Target]:
        targets = []
        for key in sorted(desired):
            entry = cached.get(key)
            if entry is not None and entry.kind.has_status:
                targets.append(_Target(entry, desired[key].status))
        for key in sorted(cached.keys() - desired.keys()):
            entry = cached[key]
            if not entry.kind.has_status:
                continue
            if key in released:
                reset = waiting_for_controller(entry.generation)
                targets.append(_Target(entry, reset, only_if=released[key]))
            elif entry.status:
                withdrawn = without_our_entries(entry.status, self.controller_name)
                if withdrawn is not None:
                    targets.append(_Target(entry, withdrawn))
        return targets

    def _holds(self, held: Mapping[str, Any] | None, status: Mapping[str, Any]) -> bool:
        """Whether `held` already says what `status` says (times aside)."""
        now = condition_time(self.wall_clock())
        return same_status(merge_status(held, status, self.controller_name, now), held)

    def _write(self, target: _Target, result: PublishResult, leading: Callable[[], bool]) -> None:
        entry, status = target.entry, target.status
        version = entry.api_version.rpartition("/")[2]
        where = f"{entry.kind.kind}/{entry.namespace or '-'}/{entry.name}"
        for _ in range(self.max_attempts):
            current = self.client.get(entry.kind, version, entry.namespace, entry.name)
            if current is None:
                result.gone += 1
                return
            held = current.get("status") if isinstance(current.get("status"), Mapping) else None
            if target.only_if is not None and not self._holds(held, target.only_if):
                result.left_alone += 1
                return
            now = condition_time(self.wall_clock())
            merged = merge_status(held, status, self.controller_name, now)
            if same_status(merged, held):
                result.unchanged += 1
                return
            if not leading():  # lost while we read: the new leader writes from here on
                return
            try:
                self.client.replace_status(
                    entry.kind, version, entry.namespace, entry.name, {**current, "status": merged}
                )
            except StatusConflict:
                result.conflicts += 1
                continue
            result.written += 1
            log.debug("wrote status of %s", where)
            return
        result.failed += 1
        log.warning("gave up writing the status of %s after %d conflicts", where, self.max_attempts)
