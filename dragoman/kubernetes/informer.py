"""List, then watch from the list's resourceVersion: one collection, in its own thread.

The informer keeps no objects itself. It hands the sink a complete list (`replace`) and
then every change after it (`event`), in the server's order, each once:

- a watch resumes from the last resourceVersion seen (an event's or a bookmark's), so a
  stream cut mid-way, a clean end at `timeoutSeconds` or an API server outage loses no
  change and repeats none;
- a watch on which nothing at all arrives for `watch_silence_limit` (the server sends a
  bookmark about every minute) is dead though its connection looks open: it is started
  again, with a warning;
- when that resourceVersion is too old (410 Gone, as a status or as an ERROR event), the
  informer lists again and hands over the whole new list, which replaces what the sink held;
- an API server that cannot be reached is tried again at least every `probe_interval`, so
  its return is noticed within seconds; other failures (errors it answers with) wait with
  exponential backoff and jitter;
- a collection the API does not serve (404: CRD not installed) tries the kind's next
  version, then counts as empty, is reported, and is listed again now and then;
- but a collection that *was* served and answers 404 on every version (a CRD's handler
  restarting, an aggregated API away) keeps what it held for as long as that lasts, and is
  listed again within `probe_interval` of its return. Objects go only as their deletion is
  observed: a CRD deleted for good has the API server delete its objects first, and the
  watch reports each.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from dragoman.kubernetes.backoff import Backoff
from dragoman.kubernetes.client_errors import describe_error
from dragoman.kubernetes.watched_kinds import WatchedKind

log = logging.getLogger("dragoman.kubernetes")

Obj = dict[str, Any]


class InformerSink(Protocol):
    """Receives what an informer learns; called from the informer's thread."""

    def replace(self, informer: Informer, objects: list[Obj]) -> None: ...

    def event(self, informer: Informer, event_type: str, obj: Obj) -> None: ...


@dataclass(frozen=True, slots=True)
class WatchSettings:
    page_size: int = 500
    # Each watch asks the server to end it after a random time in this range (seconds).
    watch_timeout: tuple[int, int] = (240, 300)
    # A watch on which nothing arrives for this long, not even a bookmark, is dead: the API
    # server sends a bookmark about every minute to a watch that asks for them (dragoman's
    # do), so twice that is a silence no live watch keeps.
    watch_silence_limit: float = 120.0
    connect_timeout: float = 10.0
    list_timeout: float = 60.0
    # Backoff after an error the API server answers with (5xx, 429, ...).
    backoff_initial: float = 0.5
    backoff_maximum: float = 30.0
    # The longest wait between attempts while the API server cannot be reached, or while a
    # collection it served answers 404: a change is seen within about this long of its
    # return. (An attempt that finds nothing listening costs the server nothing.)
    probe_interval: float = 2.0
    # How often a collection the API has never served (its CRD not installed) is looked for.
    not_served_retry: float = 60.0


class ResourceGone(Exception):
    """The resourceVersion to resume from has been compacted away: list again."""


class WatchFailed(Exception):
    """The server ended a watch with an ERROR event other than 410."""


class WatchSilent(Exception):
    """Nothing arrived on a watch for `watch_silence_limit`: its connection is dead."""


class Informer:
    """Lists and watches one kind, in one namespace or in all of them."""

    def __init__(
        self,
        client: Any,
        kind: WatchedKind,
        versions: tuple[str, ...],
        namespace: str | None,
        sink: InformerSink,
        settings: WatchSettings = WatchSettings(),
        on_restart: Callable[[str], None] | None = None,
        on_silent: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        # Told the kind each time a list or watch is started again after it ended, and each
        # time a watch was found silent (metrics).
        self.on_restart = on_restart
        self.on_silent = on_silent
        self.kind = kind
        self.versions = versions or kind.versions
        self.namespace = namespace if kind.namespaced else None
        self.sink = sink
        self.settings = settings
        self.name = kind.resource + (f" in {self.namespace}" if self.namespace else "")
        self.synced = threading.Event()
        self.version = self.versions[0]
        # The resourceVersion to resume from; None: list first.
        self.resource_version: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._response: Any = None
        self._thread: threading.Thread | None = None
        self._backoff = Backoff(settings.backoff_initial, settings.backoff_maximum)
        self._failures = 0  # in a row
        self._not_served_reported = False
        self._served = False  # listed at least once since it was last found not served
        # Since when (monotonic) a collection that was served has answered 404 on every
        # version, its last state kept; None while it is served. Read by other threads.
        self.not_served_since: float | None = None

    @property
    def api_version(self) -> str:
        return self.kind.api_version(self.version)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"informer {self.name}", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Asks the thread to end, breaking an open watch instead of waiting for its end."""
        self._stop.set()
        with self._lock:
            response = self._response
        if response is not None:
            _break(response)

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        self.request_stop()
        self.join(timeout)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # ----------------------------------------------------------------------- loop

    def run(self) -> None:
        from kubernetes.client.exceptions import ApiException

        version_index = 0
        first = True
        while not self.stopped:
            if not first and self.on_restart is not None:
                self.on_restart(self.kind.kind)
            first = False
            self.version = self.versions[version_index]
            try:
                if self.resource_version is None:
                    self.resource_version = self._list()
                started = time.monotonic()
                if not self._watch() and time.monotonic() - started < 1.0:
                    # A watch that ends at once, cleanly and empty, must not spin.
                    self._stop.wait(self._backoff.next())
            except WatchSilent as silent:
                if self._stop.is_set():
                    break
                self._silent(silent)
            except ResourceGone as gone:
                log.info("%s: %s; listing again", self.name, gone)
                self.resource_version = None
            except ApiException as error:
                if self._stop.is_set():  # by another thread, while the call ran
                    break
                if error.status == 410:
                    log.info("%s: resourceVersion expired; listing again", self.name)
                    self.resource_version = None
                elif error.status == 404 and self.resource_version is not None:
                    self.resource_version = None  # gone while watched: list to find out
                elif error.status == 404:
                    if version_index + 1 < len(self.versions):
                        version_index += 1
                        continue
                    version_index = 0
                    if self._served:
                        self._withdrawn()
                    else:
                        self._not_served()
                else:
                    self._retry_later(describe_error(error))
            except Exception as error:  # connection refused, cut, timed out, bad JSON, ...
                if self._stop.is_set():
                    break
                # No answer at all: the API server may be back any moment; look often.
                self._retry_later(describe_error(error), self.settings.probe_interval)

    def _retry_later(self, why: str, maximum: float | None = None) -> None:
        delay = self._backoff.next(maximum)
        self._failures += 1
        # One broken watch is routine (an API server restarting, a load balancer's idle
        # timeout); failures in a row are worth a warning.
        level = logging.INFO if self._failures == 1 else logging.WARNING
        log.log(level, "%s: %s; retrying in %.1f s", self.name, why, delay)
        self._stop.wait(delay)

    def _recovered(self) -> None:
        if self._failures > 1:
            log.info("%s: watching again", self.name)
        self._failures = 0
        self._backoff.reset()

    def _silent(self, silent: WatchSilent) -> None:
        log.warning(
            "%s: %s; starting it again from resourceVersion %s",
            self.name,
            silent,
            self.resource_version,
        )
        if self.on_silent is not None:
            self.on_silent(self.kind.kind)

    def _withdrawn(self) -> None:
        """A collection we listed answers 404 on every version: an outage until it is served
        again (deletions would have come as events first), so the last state stays."""
        if self.not_served_since is None:
            self.not_served_since = time.monotonic()
            log.warning(
                "%s: no longer served by the API server (404 on %s); keeping its last state"
                " until it is served again, looking every %.0f s",
                self.name,
                ", ".join(self.kind.api_version(v) for v in self.versions),
                self.settings.probe_interval,
            )
        self._stop.wait(self._backoff.next(self.settings.probe_interval))

    def _not_served(self) -> None:
        versions = ", ".join(self.kind.api_version(v) for v in self.versions)
        # Said once; looking again every so often is routine until the CRD appears.
        level = logging.DEBUG if self._not_served_reported else logging.WARNING
        self._not_served_reported = True
        log.log(
            level,
            "%s: not served by the API server (%s; is its CRD installed?); treating it as empty"
            " and looking again in %.0f s",
            self.name,
            versions,
            self.settings.not_served_retry,
        )
        self.sink.replace(self, [])
        self.synced.set()
        self._stop.wait(self.settings.not_served_retry)

    # ----------------------------------------------------------------- list, watch

    def _call(self) -> Any:
        return self.kind.list_call(self.client, self.version, self.namespace)

    def _list(self) -> str:
        """Lists every page of one consistent snapshot and hands it over; returns its RV."""
        call = self._call()
        items: list[Obj] = []
        token: str | None = None
        resource_version = ""
        while True:
            response = call(
                limit=self.settings.page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=(self.settings.connect_timeout, self.settings.list_timeout),
            )
            document = json.loads(response.data)
            items.extend(document.get("items") or [])
            metadata = document.get("metadata") or {}
            resource_version = metadata.get("resourceVersion") or resource_version
            token = metadata.get("continue") or None
            if token is None:
                break
        if self.stopped:
            return resource_version
        if self.not_served_since is not None:
            log.info(
                "%s: served again after %.0f s; listed %d objects",
                self.name,
                time.monotonic() - self.not_served_since,
                len(items),
            )
            self.not_served_since = None  # before the hand-over: whoever sees it, sees this
        # Items of built-in lists carry no apiVersion/kind; the parser needs both.
        self.sink.replace(self, [self._typed(item) for item in items])
        self._not_served_reported = False
        self._served = True
        self._recovered()
        if not self.synced.is_set():
            log.info(
                "%s: synced %d objects at resourceVersion %s",
                self.name,
                len(items),
                resource_version,
            )
        self.synced.set()
        return resource_version

    def _watch(self) -> int:
        """Follows one watch stream to its end; returns how many events it carried."""
        low, high = self.settings.watch_timeout
        timeout = random.randint(low, high)
        silence = self.settings.watch_silence_limit
        try:
            # The read timeout bounds each wait for the next bytes, headers included.
            response = self._call()(
                watch=True,
                resource_version=self.resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _preload_content=False,
                _request_timeout=(self.settings.connect_timeout, silence),
            )
        except Exception as error:
            if _read_timed_out(error):
                raise WatchSilent(f"no answer to its watch for {silence:.0f} s") from error
            raise
        with self._lock:
            if self.stopped:
                _break(response)
                return 0
            self._response = response
        events = 0
        try:
            for line in _lines(response):
                self._handle(json.loads(line))
                events += 1
            return events
        except Exception as error:
            if _read_timed_out(error):
                raise WatchSilent(
                    f"nothing arrived on its watch for {silence:.0f} s, not even a bookmark"
                ) from error
            raise
        finally:
            with self._lock:
                self._response = None
            with contextlib.suppress(Exception):
                response.release_conn()

    def _handle(self, event: Obj) -> None:
        event_type = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise WatchFailed(f"a watch event without an object: {event!r:.200}")
        if event_type == "ERROR":
            code, message = obj.get("code"), obj.get("message", "")
            if code == 410:
                raise ResourceGone(message or "resourceVersion too old")
            raise WatchFailed(f"watch ended with error {code}: {message}")
        resource_version = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type in ("ADDED", "MODIFIED", "DELETED"):
            self.sink.event(self, event_type, self._typed(obj))
        elif event_type != "BOOKMARK":
            raise WatchFailed(f"unknown watch event type {event_type!r}")
        if resource_version:
            self.resource_version = resource_version
        self._recovered()

    def _typed(self, item: Obj) -> Obj:
        return {**item, "apiVersion": self.api_version, "kind": self.kind.kind}


def _lines(response: Any) -> Iterator[bytes]:
    """The newline-separated JSON documents of a watch stream, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


def _read_timed_out(error: BaseException) -> bool:
    """Whether a request failed waiting for bytes on an open connection (not to connect)."""
    from urllib3.exceptions import ReadTimeoutError

    reason = getattr(error, "reason", None)  # urllib3's MaxRetryError wraps the cause
    return isinstance(error, ReadTimeoutError | TimeoutError) or isinstance(
        reason, ReadTimeoutError
    )


def _break(response: Any) -> None:
    """Unblocks a thread reading `response`, from another thread."""
    with contextlib.suppress(Exception):
        response.shutdown()
    with contextlib.suppress(Exception):
        response.close()
