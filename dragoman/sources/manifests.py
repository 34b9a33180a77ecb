"""A directory of Kubernetes manifests as a complete source of objects.

Every load reads the whole tree again, but a file whose stamp (mtime, size, inode) has not
changed keeps the objects parsed last time: only edited files are decoded and parsed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.decode import DecodeError, decode_documents
from dragoman.sources.errors import ObjectError, SourceError
from dragoman.sources.fields import describe
from dragoman.sources.parse import iter_documents, parse_object
from dragoman.sources.tree import FileStamp, scan_tree

log = logging.getLogger("dragoman.sources")


@dataclass(frozen=True, slots=True)
class LoadResult:
    objects: tuple[KubeObject, ...]  # in file order, then document order; no duplicate keys
    errors: tuple[SourceError, ...]
    files: int  # manifest files found
    # Where each object was defined ("routes.yaml#2"), for messages about it.
    origins: Mapping[ObjectKey, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LocatedObject:
    origin: str  # "routes.yaml#2", or "list.yaml#1.items[3]" for an item of a List
    object: KubeObject


@dataclass(frozen=True, slots=True)
class _ParsedFile:
    # The stamp the content was read under; None when the file changed while being read.
    stamp: FileStamp | None
    objects: tuple[LocatedObject, ...]
    errors: tuple[SourceError, ...]
    # False when the file is not valid YAML/JSON at all (then `objects` are the ones its last
    # decodable version defined: saving a typo must not take every object of a file away).
    decoded: bool = True


class ManifestDirectory:
    """Loads `*.yaml`, `*.yml` and `*.json` below a directory; not safe for concurrent loads."""

    def __init__(self, path: Path, *, default_namespace: str = "default") -> None:
        self.path = path
        self.default_namespace = default_namespace
        self._parsed: dict[str, _ParsedFile] = {}

    def load(self) -> LoadResult:
        """Everything the directory defines now. Problems are returned, not raised, except
        an OSError when the directory itself cannot be read (keep the last result then)."""
        scan = scan_tree(self.path)
        parsed: dict[str, _ParsedFile] = {}
        errors = [
            SourceError(relative, "", "", f"cannot read: {reason}")
            for relative, reason in scan.unreadable
        ]
        for stamp in scan.files:
            cached = self._parsed.get(stamp.path)
            if cached is None or cached.stamp != stamp:
                fresh = self._parse_file(stamp.path)
                cached = _keeping_last_good(fresh, cached) if fresh is not None else None
            if cached is not None:
                parsed[stamp.path] = cached
        self._parsed = parsed

        objects: list[KubeObject] = []
        first_seen: dict[ObjectKey, str] = {}
        for result in parsed.values():
            errors.extend(result.errors)
            for located in result.objects:
                key = located.object.key
                if key in first_seen:
                    errors.append(
                        SourceError(
                            located.origin,
                            str(key),
                            "",
                            f"already defined at {first_seen[key]}; the first definition wins",
                        )
                    )
                    continue
                first_seen[key] = located.origin
                objects.append(located.object)
        return LoadResult(tuple(objects), tuple(errors), len(scan.files), first_seen)

    def _parse_file(self, relative: str) -> _ParsedFile | None:
        """Decode and parse one file; None when it disappeared since the scan."""
        full = self.path / relative
        try:
            before = os.stat(full)
            data = full.read_bytes()
            after = os.stat(full)
        except FileNotFoundError:
            return None
        except OSError as exc:
            error = SourceError(relative, "", "", f"cannot read: {exc.strerror or exc}")
            return _ParsedFile(None, (), (error,))
        stamp = _stamp(relative, before) if _stamp_unchanged(before, after) else None
        try:
            documents = decode_documents(data, is_json=relative.endswith(".json"))
        except DecodeError as exc:
            return _ParsedFile(stamp, (), (SourceError(relative, "", "", str(exc)),), False)
        objects: list[LocatedObject] = []
        errors: list[SourceError] = []
        for index, document in enumerate(documents, start=1):
            if document is not None:  # an empty document, e.g. after a trailing `---`
                self._parse_document(f"{relative}#{index}", document, objects, errors)
        return _ParsedFile(stamp, tuple(objects), tuple(errors))

    def _parse_document(
        self,
        origin: str,
        document: Any,
        objects: list[LocatedObject],
        errors: list[SourceError],
    ) -> None:
        if not isinstance(document, Mapping):
            errors.append(_not_an_object(origin, document))
            return
        try:
            items = list(iter_documents(document))
        except ObjectError as exc:
            errors.extend(exc.source_errors(origin))
            return
        for where, item in items:
            item_origin = f"{origin}.{where}" if where else origin
            if not isinstance(item, Mapping):
                errors.append(_not_an_object(item_origin, item))
                continue
            try:
                parsed = parse_object(item, default_namespace=self.default_namespace)
            except ObjectError as exc:
                errors.extend(exc.source_errors(item_origin))
                continue
            if parsed is None:
                log.debug(
                    "%s: ignoring %s %s", item_origin, item.get("apiVersion"), item.get("kind")
                )
            else:
                objects.append(LocatedObject(item_origin, parsed))


def _keeping_last_good(fresh: _ParsedFile, previous: _ParsedFile | None) -> _ParsedFile:
    """A file that no longer decodes keeps serving what its last decodable version defined."""
    if fresh.decoded:
        return fresh
    if previous is None or not previous.objects:
        return replace(fresh, errors=_with_note(fresh.errors, "file skipped"))
    note = f"still serving its previous version ({len(previous.objects)} objects)"
    return replace(fresh, objects=previous.objects, errors=_with_note(fresh.errors, note))


def _with_note(errors: tuple[SourceError, ...], note: str) -> tuple[SourceError, ...]:
    return tuple(replace(e, message=f"{e.message} ({note})") for e in errors)


def _stamp_unchanged(before: os.stat_result, after: os.stat_result) -> bool:
    return (before.st_mtime_ns, before.st_size, before.st_ino) == (
        after.st_mtime_ns,
        after.st_size,
        after.st_ino,
    )


def _stamp(relative: str, info: os.stat_result) -> FileStamp:
    return FileStamp(relative, info.st_mtime_ns, info.st_size, info.st_ino)


def _not_an_object(origin: str, value: Any) -> SourceError:
    return SourceError(
        origin, "", "", f"expected a mapping (a Kubernetes object), got {describe(value)}"
    )
