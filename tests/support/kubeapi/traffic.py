"""What tests can observe and inject about requests: counts per verb, one-off failures."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from tests.support.kubeapi import errors


class RequestCounts:
    """Requests seen, keyed by (verb, resource): ("watch", "services"), ("update", "leases")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()

    def add(self, verb: str, resource: str) -> None:
        with self._lock:
            self._counts[(verb, resource)] += 1

    def get(self, verb: str, resource: str) -> int:
        with self._lock:
            return self._counts[(verb, resource)]

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


@dataclass
class _PlannedFailure:
    method: str | None  # None matches any HTTP method
    path_substring: str
    status: int
    message: str | None
    remaining: int


class InjectedFailures:
    """Errors to answer instead of serving, each for the next N matching requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._planned: list[_PlannedFailure] = []

    def add(
        self,
        method: str | None,
        path_substring: str,
        status: int,
        *,
        times: int = 1,
        message: str | None = None,
    ) -> None:
        upper = method.upper() if method else None
        with self._lock:
            self._planned.append(_PlannedFailure(upper, path_substring, status, message, times))

    def take(self, method: str, target: str) -> errors.ApiError | None:
        """The error planned for this request, if one matches (the first one planned wins)."""
        with self._lock:
            for planned in self._planned:
                if planned.method not in (None, method) or planned.path_substring not in target:
                    continue
                planned.remaining -= 1
                if planned.remaining <= 0:
                    self._planned.remove(planned)
                return errors.injected(planned.status, planned.message)
        return None

    def pending(self) -> int:
        with self._lock:
            return sum(planned.remaining for planned in self._planned)


class Outages:
    """Faults beyond one-off errors: resources the server stops serving (404 on every
    request, as when a CRD's handler is gone) and watches that go silent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._withdrawn: set[str] = set()
        self._silent: list[_PlannedFailure] = []

    def withdraw(self, resource: str) -> None:
        with self._lock:
            self._withdrawn.add(resource)

    def restore(self, resource: str) -> None:
        with self._lock:
            self._withdrawn.discard(resource)

    def withdrawn(self, resource: str) -> bool:
        with self._lock:
            return resource in self._withdrawn

    def silence(self, path_substring: str, times: int) -> None:
        with self._lock:
            self._silent.append(_PlannedFailure("GET", path_substring, 200, None, times))

    def take_silence(self, target: str) -> bool:
        """Whether this watch request is one to answer with headers and then nothing."""
        with self._lock:
            for planned in self._silent:
                if planned.path_substring in target:
                    planned.remaining -= 1
                    if planned.remaining <= 0:
                        self._silent.remove(planned)
                    return True
        return False

    def silences_pending(self) -> int:
        with self._lock:
            return sum(planned.remaining for planned in self._silent)
