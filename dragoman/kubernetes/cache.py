"""The local copy of the cluster that the DAG reads: what the informers report, parsed.

Objects become typed objects through the same parser as manifest files; one that fails is
logged (kind/namespace/name, field and problem) once, and left out of the store, as the
manifest source does. It stays in the cache with its problems and raw `spec`, so that the
status dragoman wrote for it before can be corrected. The raw `status` of each object is
kept beside it, so the status writer can skip writes that would change nothing without
asking the API server.

Not thread-safe: it lives on the asyncio loop; informers reach it through LoopSink.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dragoman.kubernetes.informer import Informer, Obj
from dragoman.kubernetes.watched_kinds import WatchedKind
from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.errors import ObjectError, SourceError
from dragoman.sources.parse import describe_object, parse_object
from dragoman.store import Store

log = logging.getLogger("dragoman.kubernetes")

# Metadata that changes on every write, status writes included: leaving it out of what
# the parser sees means a status-only change leaves the typed object (and the DAG) alone.
_VOLATILE_METADATA = ("resourceVersion", "managedFields")

Partition = tuple[str, str]  # (kind, namespace or "" for every namespace)


@dataclass(frozen=True, slots=True)
class CachedObject:
    kind: WatchedKind
    api_version: str
    namespace: str  # "" for cluster-scoped kinds
    name: str
    resource_version: str
    status: Mapping[str, Any] | None  # as the API server holds it
    parsed: KubeObject | None
    errors: tuple[SourceError, ...] = ()
    generation: int = 0
    # The raw spec of an object the parser could not read (None for those it could).
    unreadable_spec: Mapping[str, Any] | None = None

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(self.kind.kind, self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class CacheChange:
    """What one informer report changed."""

    kind: str
    objects: bool = False  # the typed objects (what the DAG reads)
    statuses: bool = False  # some raw status

    @property
    def any(self) -> bool:
        return self.objects or self.statuses


def partition_of(informer: Informer) -> Partition:
    return (informer.kind.kind, informer.namespace or "")


class ObjectCache:
    def __init__(self, *, default_namespace: str = "default") -> None:
        self.default_namespace = default_namespace
        self._partitions: dict[Partition, dict[tuple[str, str], CachedObject]] = {}
        self._expected: set[Partition] = set()
        self._store: Store | None = None
        # unreadable() and errors(), kept until an object that has errors (or had) changes:
        # not one step per object after every event.
        self._troubles: tuple[list[CachedObject], list[SourceError]] | None = None

    # ------------------------------------------------------------------ readiness

    def expect(self, partition: Partition) -> None:
        """The cache is synced once every expected partition has been listed once."""
        self._expected.add(partition)

    @property
    def synced(self) -> bool:
        return self._expected <= self._partitions.keys()

    def unsynced(self) -> list[Partition]:
        return sorted(self._expected - self._partitions.keys())

    # -------------------------------------------------------------------- updates

    def replace(self, partition: Partition, kind: WatchedKind, objects: list[Obj]) -> CacheChange:
        """A complete list: it replaces everything the partition held."""
        old = self._partitions.get(partition, {})
        new: dict[tuple[str, str], CachedObject] = {}
        for obj in objects:
            key = _identity(obj)
            previous = old.get(key)
            if previous is not None and previous.resource_version == _resource_version(obj):
                new[key] = previous  # unchanged since it was last seen
            else:
                new[key] = self._cache(kind, obj)
        for key in old.keys() - new.keys():
            self._report(old[key], None)
        for key, entry in new.items():
            if old.get(key) is not entry:
                self._report(old.get(key), entry)
        first = partition not in self._partitions
        self._partitions[partition] = new
        self._troubles = None
        change = CacheChange(
            kind.kind,
            objects=first or _parsed(old) != _parsed(new),
            statuses=_statuses(old) != _statuses(new) or _errors(old) != _errors(new),
        )
        if change.objects:
            self._store = None
        return change

    def event(
        self, partition: Partition, kind: WatchedKind, event_type: str, obj: Obj
    ) -> CacheChange:
        """One watch event. An event carrying the resourceVersion already held changes
        nothing: each change is applied once, even if it is delivered again."""
        held = self._partitions.setdefault(partition, {})
        key = _identity(obj)
        previous = held.get(key)
        if event_type == "DELETED":
            if previous is None:
                return CacheChange(kind.kind)
            del held[key]
            self._report(previous, None)
            entry = None
            if _troubled(previous):
                self._troubles = None
        else:
            if previous is not None and previous.resource_version == _resource_version(obj):
                return CacheChange(kind.kind)
            entry = self._cache(kind, obj)
            held[key] = entry
            self._report(previous, entry)
            if _troubled(entry) or (previous is not None and _troubled(previous)):
                self._troubles = None
        before = previous.parsed if previous is not None else None
        after = entry.parsed if entry is not None else None
        change = CacheChange(
            kind.kind,
            objects=before != after,
            # A problem that changes (or goes) changes the status written for it.
            statuses=_status_and_errors(previous) != _status_and_errors(entry),
        )
        if change.objects:
            self._store = self._patched(partition, key, before, after)
        return change

    def _patched(
        self,
        partition: Partition,
        key: tuple[str, str],
        before: KubeObject | None,
        after: KubeObject | None,
    ) -> Store | None:
        """The store after one object changed, made from the last one (the other objects are
        the same Python objects, which is what lets a build find what changed at once); None
        (made from every entry when next read) where another partition holds that key."""
        store, typed = self._store, after if after is not None else before
        if store is None or typed is None:
            return None
        kind = partition[0]
        if any(
            p[0] == kind and key in held for p, held in self._partitions.items() if p != partition
        ):
            return None
        namespaced = (typed.meta.namespace, typed.meta.name)
        return store.with_object(type(typed), namespaced, after)

    # ---------------------------------------------------------------------- reads

    def store(self) -> Store:
        """Every parsed object, as the DAG reads them."""
        if self._store is None:
            self._store = Store.from_objects(
                entry.parsed for entry in self.entries() if entry.parsed is not None
            )
        return self._store

    def entries(self) -> Iterator[CachedObject]:
        for partition in sorted(self._partitions):
            yield from self._partitions[partition].values()

    def by_key(self) -> dict[ObjectKey, CachedObject]:
        """Every object, read or not, by the key status and problems name it with."""
        return {entry.key: entry for entry in self.entries()}

    def unreadable(self) -> list[CachedObject]:
        """The objects the parser could not read."""
        return list(self._troubled()[0])

    def errors(self) -> list[SourceError]:
        return list(self._troubled()[1])

    def _troubled(self) -> tuple[list[CachedObject], list[SourceError]]:
        if self._troubles is None:
            entries = list(self.entries())
            self._troubles = (
                [entry for entry in entries if entry.parsed is None],
                [error for entry in entries for error in entry.errors],
            )
        return self._troubles

    # ------------------------------------------------------------------ internals

    def _cache(self, kind: WatchedKind, obj: Obj) -> CachedObject:
        metadata = obj.get("metadata") or {}
        status = obj.get("status")
        spec = obj.get("spec")
        generation = metadata.get("generation")
        parsed, errors = self._parse(kind, obj)
        return CachedObject(
            kind=kind,
            api_version=str(obj.get("apiVersion", "")),
            namespace=str(metadata.get("namespace") or ""),
            name=str(metadata.get("name") or ""),
            resource_version=_resource_version(obj),
            status=status if isinstance(status, Mapping) else None,
            parsed=parsed,
            errors=errors,
            generation=generation if isinstance(generation, int) else 0,
            unreadable_spec=spec if parsed is None and isinstance(spec, Mapping) else None,
        )

    def _parse(
        self, kind: WatchedKind, obj: Obj
    ) -> tuple[KubeObject | None, tuple[SourceError, ...]]:
        metadata = obj.get("metadata")
        if isinstance(metadata, Mapping):
            stable = {k: v for k, v in metadata.items() if k not in _VOLATILE_METADATA}
            obj = {**obj, "metadata": stable}
        origin = kind.resource
        try:
            return parse_object(obj, default_namespace=self.default_namespace), ()
        except ObjectError as error:
            if not error.object:
                error.object = describe_object(obj, self.default_namespace)
            return None, tuple(error.source_errors(origin))

    @staticmethod
    def _report(old: CachedObject | None, new: CachedObject | None) -> None:
        before = set(old.errors) if old is not None else set()
        after = set(new.errors) if new is not None else set()
        for error in sorted(after - before, key=str):
            log.error("%s (object skipped)", error)
        for error in sorted(before - after, key=str):
            log.info("resolved: %s", error)


class LoopSink:
    """Carries informer reports from their threads onto the loop that owns the cache, and
    calls `on_change` there with what each report changed."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        cache: ObjectCache,
        on_change: Callable[[CacheChange], None],
    ) -> None:
        self.loop = loop
        self.cache = cache
        self.on_change = on_change

    def replace(self, informer: Informer, objects: list[Obj]) -> None:
        self._call(self._replace, informer, objects)

    def event(self, informer: Informer, event_type: str, obj: Obj) -> None:
        self._call(self._event, informer, event_type, obj)

    def _call(self, function: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: shutting down
            self.loop.call_soon_threadsafe(function, *args)

    def _replace(self, informer: Informer, objects: list[Obj]) -> None:
        self.on_change(self.cache.replace(partition_of(informer), informer.kind, objects))

    def _event(self, informer: Informer, event_type: str, obj: Obj) -> None:
        change = self.cache.event(partition_of(informer), informer.kind, event_type, obj)
        self.on_change(change)


def _identity(obj: Obj) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def _resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _parsed(entries: Mapping[tuple[str, str], CachedObject]) -> dict[tuple[str, str], Any]:
    return {key: entry.parsed for key, entry in entries.items()}


def _statuses(entries: Mapping[tuple[str, str], CachedObject]) -> dict[tuple[str, str], Any]:
    return {key: entry.status for key, entry in entries.items()}


def _errors(entries: Mapping[tuple[str, str], CachedObject]) -> dict[tuple[str, str], Any]:
    return {key: entry.errors for key, entry in entries.items() if entry.errors}


def _troubled(entry: CachedObject) -> bool:
    """Whether unreadable() or errors() name the entry."""
    return entry.parsed is None or bool(entry.errors)


def _status_and_errors(entry: CachedObject | None) -> tuple[Any, Any]:
    return (entry.status, entry.errors) if entry is not None else (None, ())
