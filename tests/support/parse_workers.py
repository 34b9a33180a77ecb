"""A first load shared with a worker process, made to share whatever the machine's speed."""

from __future__ import annotations

import time

import pytest

from dragoman.sources.parse_worker import ParseWorker

WAIT_S = 60.0  # for a worker process to start and answer, on a slow machine


def looking_patiently(monkeypatch: pytest.MonkeyPatch, per_look: int = 8) -> None:
    """Each look at a worker waits until it has handed something back or ended, and takes a
    few of its records at a time: the worker, however slowly it starts, and the caller,
    however slowly it looks, each take a share (in a server, the caller never waits)."""
    received = ParseWorker.received
    stashes: dict[int, list[tuple[object, object]]] = {}

    def received_patiently(self: ParseWorker) -> list[tuple[object, object]]:
        stash = stashes.setdefault(id(self), [])
        deadline = time.monotonic() + WAIT_S
        while not stash and time.monotonic() < deadline:
            stash.extend(received(self))
            if self._ended:
                break
            if not stash:
                time.sleep(0.005)
        handed, stash[:] = stash[:per_look], stash[per_look:]
        return handed

    monkeypatch.setattr(ParseWorker, "received", received_patiently)
