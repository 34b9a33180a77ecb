"""Watch streams: which events one watch request sees, and the registry of open watches."""

from __future__ import annotations

import contextlib
import copy
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.support.kubeapi import errors
from tests.support.kubeapi.resources import ResourceType
from tests.support.kubeapi.store import Change, Obj, ObjectStore

Event = dict[str, Any]


@dataclass(frozen=True)
class WatchRequest:
    rtype: ResourceType
    version: str  # the API version the client asked for; objects are shown in it
    namespace: str | None  # None watches every namespace
    matches: Callable[[Obj], bool]
    resource_version: int | None  # None (or "0") starts with the current state as ADDED events
    allow_bookmarks: bool
    send_initial_events: bool
    timeout_seconds: float


class WatchSession:
    """Produces one watch stream's events until its timeout, or until it is cancelled.

    The starting point is fixed when the session is made, so a change committed after the
    request was accepted is always delivered, however late the stream starts.
    """

    def __init__(
        self,
        store: ObjectStore,
        request: WatchRequest,
        *,
        bookmark_interval: float,
        too_large_wait: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.request = request
        self.bookmark_interval = bookmark_interval
        self.too_large_wait = too_large_wait
        self.clock = clock
        self._cancelled = threading.Event()
        # A silent stream sends its headers and then nothing, not even bookmarks, until it
        # is cut: a connection a proxy or a stuck server holds open without forwarding.
        self.silent = False
        self._deadline = clock() + request.timeout_seconds
        self._error: errors.ApiError | None = None
        self._initial: list[Obj] = []
        if request.resource_version is None or request.send_initial_events:
            self._initial, self._position = store.list(
                request.rtype, request.namespace, request.matches
            )
        else:
            self._position = request.resource_version
            try:
                store.require_watchable(request.resource_version)
            except errors.ApiError as too_old:
                self._error = too_old  # sent as the stream's only event, as the server does

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        self.store.wake_all()

    def events(self) -> Iterator[Event]:
        if self.silent:
            self._cancelled.wait()
            return
        if self._error is not None:
            yield {"type": "ERROR", "object": self._error.status()}
            return
        for obj in self._initial:
            yield {"type": "ADDED", "object": self._shown(obj)}
        if self.request.send_initial_events and self.request.allow_bookmarks:
            yield self._bookmark(initial_events_end=True)
        if not self._wait_for_requested_version():
            too_large = errors.too_large_resource_version(
                self._position, self.store.resource_version
            )
            yield {"type": "ERROR", "object": too_large.status()}
            return

        next_bookmark = self.clock() + self.bookmark_interval
        while not self.cancelled:
            try:
                changes = self.store.changes_after(self._position)
            except errors.ApiError:
                # History moved past this watcher: end the stream as the server ends a
                # watcher it cannot feed; the client's next watch gets 410.
                return
            for change in changes:
                self._position = change.resource_version
                event = self._event_for(change)
                if event is not None:
                    yield event
                if self.cancelled:
                    return
            now = self.clock()
            if now >= self._deadline:
                return
            if self.request.allow_bookmarks and now >= next_bookmark:
                yield self._bookmark()
                next_bookmark = now + self.bookmark_interval
            wake_at = (
                min(self._deadline, next_bookmark)
                if self.request.allow_bookmarks
                else (self._deadline)
            )
            self.store.wait_for_change(self._position, wake_at - now, stop=lambda: self.cancelled)

    def _wait_for_requested_version(self) -> bool:
        """A watch from a future resourceVersion waits a little for it, then fails (504)."""
        wanted = self._position
        give_up = self.clock() + self.too_large_wait
        while self.store.resource_version < wanted:
            if self.cancelled or self.clock() >= give_up:
                return False
            self.store.wait_for_change(wanted - 1, give_up - self.clock(), lambda: self.cancelled)
        return True

    def _shown(self, obj: Obj) -> Obj:
        shown = copy.deepcopy(obj)
        shown["apiVersion"] = self.request.rtype.api_version(self.request.version)
        return shown

    def _bookmark(self, *, initial_events_end: bool = False) -> Event:
        metadata: dict[str, Any] = {"resourceVersion": str(self._position)}
        if initial_events_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        rtype = self.request.rtype
        return {
            "type": "BOOKMARK",
            "object": {
                "kind": rtype.kind,
                "apiVersion": rtype.api_version(self.request.version),
                "metadata": metadata,
            },
        }

    def _event_for(self, change: Change) -> Event | None:
        """The event this watcher sees for a change, if any.

        As in the server's watch cache, an object that starts matching the selectors is
        ADDED, and one that stops matching is DELETED (its old state at the new RV).
        """
        request = self.request
        if change.resource != request.rtype.key:
            return None
        if request.namespace is not None and change.namespace != request.namespace:
            return None
        if change.type == "DELETED":
            if request.matches(change.object):
                return {"type": "DELETED", "object": self._shown(change.object)}
            return None
        now_matches = request.matches(change.object)
        matched_before = change.previous is not None and request.matches(change.previous)
        if now_matches:
            event_type = "MODIFIED" if matched_before else "ADDED"
            return {"type": event_type, "object": self._shown(change.object)}
        if matched_before and change.previous is not None:
            gone = self._shown(change.previous)
            gone["metadata"]["resourceVersion"] = str(change.resource_version)
            return {"type": "DELETED", "object": gone}
        return None


class OpenWatches:
    """The watch streams being served, with their sockets, so tests can cut them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[WatchSession, socket.socket] = {}
        self._refusing = False

    def add(self, session: WatchSession, connection: socket.socket) -> None:
        with self._lock:
            if self._refusing:
                session.cancel()  # the server is stopping: this stream ends at once
                return
            self._open[session] = connection

    def refuse_new(self, refusing: bool) -> None:
        with self._lock:
            self._refusing = refusing

    def remove(self, session: WatchSession) -> None:
        with self._lock:
            self._open.pop(session, None)

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    def cut_all(self, resource: str | None = None) -> int:
        """Ends every open watch (of `resource`, a plural, when given) abruptly: no final
        chunk, the connection just closes."""
        with self._lock:
            victims = [
                (session, connection)
                for session, connection in self._open.items()
                if resource is None or session.request.rtype.plural == resource
            ]
        for session, connection in victims:
            session.cancel()
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)
        return len(victims)
