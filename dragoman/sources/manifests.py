"""A directory of Kubernetes manifests as a complete source of objects.

A full load scans the whole tree, but a file whose stamp (mtime, size, inode) has not
changed keeps the objects parsed last time: only edited files are decoded and parsed. A
load told which files changed (by the directory watcher) looks at those files alone.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import stat
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from pathlib import Path
from typing import Any

from dragoman.objects import KubeObject, ObjectKey
from dragoman.objects.meta import no_entries
from dragoman.sources import parse_worker
from dragoman.sources.decode import (
    MAX_FILE_BYTES,
    DecodeError,
    Position,
    decode_documents,
    decode_text,
    decode_yaml_positioned,
    json_start,
    split_yaml_documents,
)
from dragoman.sources.definitions import Definitions, ObjectDelta, ObjectsOf
from dragoman.sources.errors import FieldProblem, ObjectError, SourceError, printable
from dragoman.sources.fields import describe
from dragoman.sources.last_good import LastGoodFiles
from dragoman.sources.parse import iter_documents, misspelled_kind, parse_object
from dragoman.sources.parse_worker import ParseWorker, parse_meeting, worth_a_worker
from dragoman.sources.reads import FileRead, ReadOutcome, can_open, read_file, read_files
from dragoman.sources.shared import canonical, interned
from dragoman.sources.tree import FileStamp, TreeScan, scan_order, scan_tree
from dragoman.sources.unread_fields import parse_noting_unread

log = logging.getLogger("dragoman.sources")

# Files of at least this many documents keep what each document meant, by its text.
KEEP_PIECES_FROM = 16
# What a first load shared with a worker gives its caller now and then: the objects parsed so
# far, for the caller to start on (ManifestDirectory.load).
Meanwhile = Callable[[Iterator[KubeObject]], None]


@dataclass(frozen=True, slots=True)
class LoadResult:
    objects: Sequence[KubeObject]  # in file order, then document order; no duplicate keys
    errors: tuple[SourceError, ...]
    files: int  # manifest files found
    # Where each object was defined ("routes.yaml#2"), for messages about it.
    origins: Mapping[ObjectKey, str] = field(default_factory=dict)
    # False when no file's content changed since the previous load (then the objects and
    # errors are the previous ones).
    changed: bool = True
    # Where each document of each file starts, by the file's name as origins give it.
    starts: Mapping[str, tuple[Position, ...]] = field(default_factory=dict)
    # Likely mistakes that are not errors: a kind dragoman does not read, close to one it does.
    warnings: tuple[SourceError, ...] = ()
    # This load's number among its directory's loads (from 1), and the objects it took out and
    # put in since an earlier one's (None: not known, compare `objects`). Bookkeeping of the
    # loads, not what the directory holds: not compared.
    generation: int = field(default=0, compare=False)
    delta: ObjectDelta | None = field(default=None, compare=False, repr=False)

    def position(self, origin: str) -> Position | None:
        """Where the document of an origin ("routes.yaml#2.items[0]") starts in its file
        (line, column, from 1); None when unknown (an origin naming a file alone)."""
        path, mark, where = origin.rpartition("#")
        starts = self.starts.get(path) if mark else None
        number = where.partition(".")[0]
        if not starts or not number.isdigit() or not 0 < int(number) <= len(starts):
            return None
        return starts[int(number) - 1]


# Files of at most this many objects share their tuple of `wheres` with every other file
# that has the same (most files: one object per document).
SHARE_WHERES_UP_TO = 16


@dataclass(frozen=True, slots=True)
class _ParsedFile:
    # The stamp the content was read under; None when the file changed while being read.
    stamp: FileStamp | None
    objects: tuple[KubeObject, ...]
    errors: tuple[SourceError, ...]
    # False when the file is not valid YAML/JSON at all, or cannot be read (then `objects`
    # are the ones its last good version defined: saving a typo, or a file that cannot be
    # read for a moment, must not take every object of a file away).
    decoded: bool = True
    # True when the file could not be read at all (a permission, a symbolic link loop, a
    # directory in its place): a repair may leave its stamp as it was, so it is read again
    # whatever its stamp says.
    unreadable: bool = False
    # A YAML file's pieces (one document each), by text: an edit to one document of a large
    # file decodes and parses that document alone.
    pieces: Mapping[str, _Piece] = field(default_factory=no_entries)
    # Where in the file each object is: "#2", or "#1.items[3]" for an item of a List; with
    # the file's path (the very string the directory's records are keyed by) its origin,
    # made only for messages. Interned, and shared as a tuple by most files.
    wheres: tuple[str, ...] = ()
    # Where each document starts (one entry per document, empty ones included).
    starts: tuple[Position, ...] = ()


@dataclass(frozen=True, slots=True)
class _Piece:
    """What one piece of a file meant, with where its objects are as it was when it was
    parsed, after `before` documents (renumbered where the piece has moved since)."""

    before: int
    documents: int
    objects: tuple[KubeObject, ...]
    errors: tuple[SourceError, ...]
    wheres: tuple[str, ...] = ()
    starts: tuple[Position, ...] = ()  # lines counted from the piece's first line


class ManifestDirectory:
    """Loads `*.yaml`, `*.yml` and `*.json` below a directory; not safe for concurrent loads."""

    def __init__(
        self,
        path: Path,
        *,
        default_namespace: str = "default",
        last_good: LastGoodFiles | None = None,
        unread_fields: bool = False,
        parse_worker: ParseWorker | None = None,
    ) -> None:
        """`unread_fields`: warn of the spec fields parsers never read (`dragoman check`).
        `parse_worker`: one started early for this directory, to share the first load."""
        self.path = path
        self.default_namespace = default_namespace
        self._parser = _FileParser(default_namespace, unread_fields)
        # Where the last good version of each file is kept for the next process, if anywhere.
        self.last_good = last_good
        self._parsed: dict[str, _ParsedFile] = {}  # in scan order (path components)
        # Files that cannot be read and never could (nothing to keep serving): path -> reason.
        self._unreadable: dict[str, str] = {}
        self._last: LoadResult | None = None
        # What `unreadable` answers (None: found from the records when asked).
        self._unreadable_files: frozenset[str] | None = None
        # Files (or pieces of one large file) of the first load a worker process parsed.
        self.parsed_by_worker = 0
        self._worker = parse_worker  # until the first load
        # What the records define, kept up to date as each record is put or dropped.
        self._definitions = Definitions()
        self._generation = 0  # of the last result

    def stamps(self) -> dict[str, FileStamp]:
        """The stamp of every file as last read (the files a watcher must compare with)."""
        return {path: f.stamp for path, f in self._parsed.items() if f.stamp is not None}

    def unreadable(self) -> frozenset[str]:
        """The files that could not be read last time: a repair (a `chmod`) may not change
        their stamp, so a watcher reports them again on every event and rescan. Each event
        asks, and the records are many: kept, brought up to date by each load."""
        if self._unreadable_files is not None:
            return self._unreadable_files
        # Copies taken at once: a scrape may ask while a load runs in its thread.
        records, never_read = list(self._parsed.items()), list(self._unreadable)
        kept = (path for path, f in records if f.unreadable or f.stamp is None)
        found = frozenset((*never_read, *kept))
        self._unreadable_files = found
        return found

    def load(
        self, changed: Collection[str] | None = None, meanwhile: Meanwhile | None = None
    ) -> LoadResult:
        """Everything the directory defines now. Problems are returned, not raised, except
        an OSError when the directory itself cannot be read (keep the last result then).

        With `changed` (relative paths of manifest files added, edited or removed), only
        those files are looked at; every other file is taken to be as last loaded.

        `meanwhile`: while a worker process shares a first load, given now and then the
        objects parsed so far (not yet checked for duplicates), for the caller to start on.
        """
        before = {*self._parsed, *self._unreadable} if self.last_good is not None else set()
        # (Asked while this load runs, the answer is found from the records as they are.)
        known, self._unreadable_files = self._unreadable_files, None
        if changed is None or self._last is None:
            dirty, known = self._load_all(meanwhile), None
        else:
            dirty = self._load_some(changed)
        self._unreadable_files = None if known is None else self._still_unreadable(known, changed)
        if self.last_good is not None:
            now = {*self._parsed, *self._unreadable}
            if self._last is None:
                self.last_good.keep_only(now)  # files removed while no one watched
            for gone in before - now:
                self.last_good.forget(gone)
        if not dirty and self._last is not None:
            return replace(self._last, changed=False)
        self._last = self._result()
        return self._last

    def _still_unreadable(
        self, known: frozenset[str], changed: Collection[str] | None
    ) -> frozenset[str]:
        """`known`, the unreadable files before a load of the `changed` files, after it."""
        found = set(known)
        for relative in changed or ():
            record = self._parsed.get(relative)
            if relative in self._unreadable or (
                record is not None and (record.unreadable or record.stamp is None)
            ):
                found.add(relative)
            else:
                found.discard(relative)
        return frozenset(found)

    def _load_all(self, meanwhile: Meanwhile | None) -> bool:
        scan = scan_tree(self.path)
        unreadable: dict[str, str] = {}
        still_served: dict[str, _ParsedFile] = {}  # unreadable, with a last good version
        for relative, reason in self._now_unreadable(scan):
            kept = _unreadable_file(relative, reason, self._previous(relative))
            if kept is None:
                unreadable[relative] = reason
            else:
                still_served[relative] = kept
        served = len(scan.files) + len(still_served)
        dirty = unreadable != self._unreadable or served != len(self._parsed)
        dirty = dirty or any(self._parsed.get(p) != kept for p, kept in still_served.items())
        self._unreadable = unreadable
        parsed: dict[str, _ParsedFile] = {}
        stale = [s for s in scan.files if _stamp_of_parsed(self._parsed.get(s.path)) != s]
        shared = self._parse_shared(stale, meanwhile) if not self._parsed else {}
        to_read = [s.path for s in stale if s.path not in shared]
        with contextlib.closing(read_files(str(self.path), to_read, MAX_FILE_BYTES + 1)) as reads:
            for stamp in scan.files:
                cached = self._parsed.get(stamp.path)
                if cached is None or cached.stamp != stamp:
                    dirty = True
                    if stamp.path in shared:
                        fresh = shared[stamp.path]
                    else:
                        fresh = self._parse_file(stamp.path, cached, next(reads))
                    if fresh is not None and not fresh.decoded:
                        cached = self._previous(stamp.path, cached)
                    cached = _keeping_last_good(fresh, cached) if fresh is not None else None
                if cached is not None:
                    parsed[stamp.path] = cached
        if still_served:
            parsed = _in_scan_order(parsed | still_served)
        dirty = dirty or parsed.keys() != self._parsed.keys()
        for relative, record in parsed.items():
            before = self._parsed.get(relative)
            self._definitions.replaced(before.objects if before else (), record.objects)
        for relative in self._parsed.keys() - parsed.keys():
            self._definitions.replaced(self._parsed[relative].objects, ())
        self._parsed = parsed
        return dirty

    def _now_unreadable(self, scan: TreeScan) -> list[tuple[str, str]]:
        """The scan's unreadable entries, and the files last read that are directories now."""
        found = {stamp.path for stamp in scan.files}
        unreadable = list(scan.unreadable)
        listed = {relative for relative, _ in unreadable}
        for relative in self._parsed.keys() - found - listed:
            if os.path.isdir(self.path / relative):
                unreadable.append((relative, "is a directory"))
        return unreadable

    def _parse_shared(
        self, stale: list[FileStamp], meanwhile: Meanwhile | None
    ) -> dict[str, _ParsedFile | None]:
        """A first load shared with a worker process (the one given, or one started now when
        a CPU is idle to run it): of many files, or of the pieces of a large YAML file. The
        records parsed so, by path; {} when the files are better parsed one by one here."""
        worker, self._worker = self._worker, None
        root = str(self.path)
        many = len(stale) >= parse_worker.SHARE_FROM
        largest = None if many else parse_worker.largest_yaml(stale)
        if (
            (not many and largest is None)
            # What is accepted is kept from its bytes, which a worker does not hand back.
            or self.last_good is not None
            or self._parser.unread_fields  # a worker parses as a server does
        ):
            if worker is not None:
                worker.stop()
            return {}
        if worker is not None and (worker.root, worker.namespace) != (root, self.default_namespace):
            worker.stop()
            worker = None
        if worker is None and worth_a_worker():
            worker = ParseWorker.start(self.path, self.default_namespace)
        if worker is None:
            return {}
        so_far = None if meanwhile is None else _objects_so_far(meanwhile)
        if largest is not None:
            record, self.parsed_by_worker = _pieces_shared(
                self._parser, root, largest, worker, so_far
            )
            return {largest.path: record} if record is not None else {}
        parsed, self.parsed_by_worker = parse_meeting(
            worker,
            [stamp.path for stamp in stale],
            lambda chunk: parse_fresh_files(root, self.default_namespace, chunk),
            lambda record, at: isinstance(record, _ParsedFile) and record.stamp == stale[at],
            so_far,
        )
        return {stamp.path: record for stamp, record in zip(stale, parsed, strict=True)}

    def _load_some(self, changed: Collection[str]) -> bool:
        dirty = False
        appended = 0  # files new to the records (put last: the others keep their order)
        for relative in changed:
            cached = self._parsed.get(relative)
            stamp = _stamp_of(self.path, relative)
            if stamp is None and cached is not None and os.path.isdir(self.path / relative):
                stamp = "is a directory"
            if isinstance(stamp, str):  # cannot be read: report it as a full scan would
                kept = _unreadable_file(relative, stamp, self._previous(relative, cached))
                if kept is None:
                    dirty = dirty or self._unreadable.get(relative) != stamp or cached is not None
                    self._unreadable[relative] = stamp
                    self._put(relative, None)
                else:
                    dirty = dirty or kept != cached
                    appended += self._put(relative, kept) is None
                continue
            if self._unreadable.pop(relative, None) is not None:
                dirty = True
            if stamp is None:
                if self._put(relative, None) is not None:
                    dirty = True
                continue
            if cached is not None and cached.stamp == stamp and can_open(self.path / relative):
                continue
            dirty = True
            fresh = self._parse_file(
                relative, cached, read_file(str(self.path), relative, MAX_FILE_BYTES + 1)
            )
            if fresh is None:
                self._put(relative, None)
                continue
            if not fresh.decoded:
                cached = self._previous(relative, cached)
            appended += self._put(relative, _keeping_last_good(fresh, cached)) is None
        if appended:  # keep the scan's order: the first definition of an object wins
            self._parsed = _in_scan_order(self._parsed, appended)
        return dirty

    def _put(self, relative: str, record: _ParsedFile | None) -> _ParsedFile | None:
        """A file's record put in place of the one it had (None: dropped); the one it had."""
        if record is None:
            before = self._parsed.pop(relative, None)
        else:
            before = self._parsed.get(relative)
            self._parsed[relative] = record
        self._definitions.replaced(
            before.objects if before is not None else (), record.objects if record else ()
        )
        return before

    def _result(self) -> LoadResult:
        errors = [
            SourceError(relative, "", "", f"cannot read: {reason}")
            for relative, reason in sorted(self._unreadable.items())
        ]
        # Two flat tuples, not a tuple of pairs: the result's origins keep them.
        paths, records = tuple(self._parsed), tuple(self._parsed.values())
        starts = _Starts(paths, records)
        delta = self._definitions.take(self._generation)
        self._generation += 1
        generation = self._generation
        if not self._definitions.duplicates:  # the usual case
            objects: Sequence[KubeObject] = ObjectsOf(records, self._definitions.defined)
            errors.extend(itertools.chain.from_iterable(map(_errors_of, records)))
            origins = _Origins((paths, records))
        else:
            objects, origins = _first_definitions(paths, records, errors)
        errors_, warnings = _apart(errors)
        return LoadResult(
            objects,
            errors_,
            len(records),
            origins,
            starts=starts,
            warnings=warnings,
            generation=generation,
            delta=delta,
        )

    def _previous(self, relative: str, cached: _ParsedFile | None = None) -> _ParsedFile | None:
        """What a file that just broke keeps serving: its record, or (after a restart) the
        last good version kept on disk, parsed again."""
        previous = cached if cached is not None else self._parsed.get(relative)
        if previous is not None or self.last_good is None:
            return previous
        content = self.last_good.get(relative)
        if content is None:
            return None
        kept = self._parser.decode(relative, None, FileRead(None, content))
        return kept if kept is not None and kept.decoded else None

    def _parse_file(
        self, relative: str, previous: _ParsedFile | None, read: ReadOutcome
    ) -> _ParsedFile | None:
        """Decode and parse one file as read; None when it disappeared since the scan. A
        version that decodes is kept as the file's last good one."""
        parsed = self._parser.decode(relative, previous, read)
        if (
            self.last_good is not None
            and parsed is not None
            and parsed.decoded
            and isinstance(read, FileRead)
            and read.stamp is not None
        ):
            self.last_good.remember(relative, read.data)
        return parsed


class _FileParser:
    """One file's bytes to its objects and errors, each where it is in the file."""

    def __init__(self, default_namespace: str, unread_fields: bool = False) -> None:
        self.default_namespace = default_namespace
        self.unread_fields = unread_fields

    def decode(
        self, relative: str, previous: _ParsedFile | None, read: ReadOutcome
    ) -> _ParsedFile | None:
        """Decode and parse one file as read (`previous`: its record, whose pieces may be
        reused); None when it disappeared since the scan."""
        if read is None:
            return None
        if isinstance(read, OSError):
            error = SourceError(relative, "", "", f"cannot read: {read.strerror or read}")
            return _ParsedFile(None, (), (error,), decoded=False, unreadable=True)
        stamp, data = read.stamp, read.data
        try:
            if relative.endswith(".json"):
                documents = decode_documents(data, is_json=True)
                return self._parse_documents(relative, stamp, documents, [json_start(data)])
            text = decode_text(data)
            pieces = split_yaml_documents(text)
            if pieces is None:
                return self._parse_documents(relative, stamp, *decode_yaml_positioned(text))
            return self._parse_pieces(relative, stamp, pieces, previous)
        except DecodeError as exc:
            return _ParsedFile(stamp, (), (SourceError(relative, "", "", str(exc)),), False)

    def _parse_documents(
        self,
        relative: str,
        stamp: FileStamp | None,
        documents: list[Any],
        starts: list[Position],
    ) -> _ParsedFile:
        objects: list[KubeObject] = []
        wheres: list[str] = []
        errors: list[SourceError] = []
        for index, document in enumerate(documents, start=1):
            if document is not None:  # an empty document, e.g. after a trailing `---`
                self._parse_document(relative, f"#{index}", document, objects, wheres, errors)
        wheres_ = _shared(wheres)
        return _ParsedFile(
            stamp, tuple(objects), tuple(errors), wheres=wheres_, starts=tuple(starts)
        )

    def _parse_pieces(
        self,
        relative: str,
        stamp: FileStamp | None,
        pieces: list[tuple[int, str]],
        previous: _ParsedFile | None,
    ) -> _ParsedFile:
        known = previous.pieces if previous is not None else {}
        parsed: dict[str, _Piece] = {}
        objects: list[KubeObject] = []
        wheres: list[str] = []
        errors: list[SourceError] = []
        starts: list[Position] = []
        documents = 0  # documents before the current piece
        for first_line, text in pieces:
            piece = parsed.get(text) or known.get(text)
            if piece is None:
                piece = self.piece(relative, text, first_line, documents)
            if piece.before != documents:  # the piece moved: other documents came or went
                shift = documents - piece.before
                piece = _Piece(
                    documents,
                    piece.documents,
                    piece.objects,
                    tuple(replace(e, origin=_renumbered(e.origin, shift)) for e in piece.errors),
                    _shared([interned(_renumbered(w, shift)) for w in piece.wheres]),
                    piece.starts,
                )
            parsed[text] = piece
            objects.extend(piece.objects)
            wheres.extend(piece.wheres)
            errors.extend(piece.errors)
            starts.extend((first_line + line, column) for line, column in piece.starts)
            documents += piece.documents
        if len(pieces) < KEEP_PIECES_FROM:
            # Re-parsing a small file costs less than the memory to keep its pieces.
            return _ParsedFile(
                stamp, tuple(objects), tuple(errors), wheres=_shared(wheres), starts=tuple(starts)
            )
        return _ParsedFile(
            stamp,
            tuple(objects),
            tuple(errors),
            pieces=parsed,
            wheres=_shared(wheres),
            starts=tuple(starts),
        )

    def piece(self, relative: str, text: str, first_line: int, before: int) -> _Piece:
        """One piece of a file (see split_yaml_documents) decoded and parsed, `before`
        documents after the file's start. Raises DecodeError."""
        objects: list[KubeObject] = []
        wheres: list[str] = []
        errors: list[SourceError] = []
        decoded, starts = decode_yaml_positioned(text, first_line)
        for index, document in enumerate(decoded, start=before + 1):
            if document is not None:
                self._parse_document(relative, f"#{index}", document, objects, wheres, errors)
        return _Piece(
            before,
            len(decoded),
            tuple(objects),
            tuple(errors),
            _shared(wheres),
            tuple((line - first_line, column) for line, column in starts),
        )

    def _parse_document(
        self,
        relative: str,
        where: str,
        document: Any,
        objects: list[KubeObject],
        wheres: list[str],
        errors: list[SourceError],
    ) -> None:
        origin = relative + where
        if not isinstance(document, Mapping):
            errors.append(_not_an_object(origin, document))
            return
        try:
            items = list(iter_documents(document))
        except ObjectError as exc:
            errors.extend(exc.source_errors(origin))
            return
        for in_list, item in items:
            item_where = f"{where}.{in_list}" if in_list else where
            item_origin = relative + item_where
            if not isinstance(item, Mapping):
                errors.append(_not_an_object(item_origin, item))
                continue
            try:
                if self.unread_fields:
                    parsed, unread = parse_noting_unread(
                        item, default_namespace=self.default_namespace
                    )
                    if parsed is not None:
                        errors.extend(_unread_warnings(item_origin, parsed, unread))
                else:
                    parsed = parse_object(item, default_namespace=self.default_namespace)
            except ObjectError as exc:
                errors.extend(exc.source_errors(item_origin))
                continue
            if parsed is None:
                warning = misspelled_kind(item)
                if warning is not None:
                    errors.append(SourceError(item_origin, *warning, severity="warning"))
                log.debug(
                    "%s: ignoring %s %s",
                    printable(item_origin),
                    printable(str(item.get("apiVersion"))),
                    printable(str(item.get("kind"))),
                )
            else:
                objects.append(parsed)
                wheres.append(interned(item_where))


def parse_fresh_files(
    root: str, default_namespace: str, relatives: list[str]
) -> list[_ParsedFile | None]:
    """Files read and parsed as by a first load (here, or in a worker process)."""
    parser = _FileParser(default_namespace)
    reads = read_files(root, relatives, MAX_FILE_BYTES + 1)
    return [
        parser.decode(relative, None, read) for relative, read in zip(relatives, reads, strict=True)
    ]


def _pieces_shared(
    parser: _FileParser,
    root: str,
    stamp: FileStamp,
    worker: ParseWorker,
    meanwhile: Callable[[Sequence[_Piece | None]], None] | None = None,
) -> tuple[_ParsedFile | None, int]:
    """The file of `stamp` parsed piece by piece, its first pieces by the worker (which keys
    them by the stamp it read the file under: only pieces of the very content read here are
    taken), and how many pieces the worker's were; None (the worker stopped) when it cannot be
    read whole, is not cut into pieces, or does not decode: then it is parsed as usual."""
    relative = stamp.path
    read = read_file(root, relative, MAX_FILE_BYTES + 1)
    pieces = None
    with contextlib.suppress(DecodeError):
        if isinstance(read, FileRead) and read.stamp is not None:
            pieces = split_yaml_documents(decode_text(read.data))
    if pieces is None:
        worker.stop()
        return None, 0
    assert isinstance(read, FileRead)  # (pieces are only cut from a file read whole)
    texts = [text for _, text in pieces]
    try:
        parsed, taken = parse_meeting(
            worker,
            [(relative, read.stamp, index) for index in range(len(pieces))],
            lambda chunk: [parser.piece(relative, texts[i], pieces[i][0], i) for _, _, i in chunk],
            lambda piece, _: isinstance(piece, _Piece),
            meanwhile,
        )
    except DecodeError:  # (the worker stopped): the file's error, as a load gives it
        return None, 0
    # Every piece known by its text: the record is put together as a load that parsed them
    # before puts it (the documents of each renumbered where they moved).
    known = _ParsedFile(None, (), (), pieces=dict(zip(texts, parsed, strict=True)))
    return parser._parse_pieces(relative, read.stamp, pieces, known), taken


def _objects_so_far(
    meanwhile: Meanwhile,
) -> Callable[[Sequence[_ParsedFile | _Piece | None]], None]:
    """`meanwhile` given the objects of the records (files or pieces) parsed so far."""

    def give(records: Sequence[_ParsedFile | _Piece | None]) -> None:
        meanwhile(obj for record in records if record is not None for obj in record.objects)

    return give


def fresh_pieces(
    root: str, default_namespace: str, relative: str, per_chunk: int
) -> Iterator[list[tuple[Hashable, _Piece]]]:
    """The pieces of a YAML file parsed in order as a first load parses them (in a worker
    process), `per_chunk` at a time, each keyed (relative path, stamp read under, index);
    nothing once the file cannot be read or a piece does not decode (the caller's own load
    says why)."""
    read = read_file(root, relative, MAX_FILE_BYTES + 1)
    if not isinstance(read, FileRead) or read.stamp is None:
        return
    try:
        pieces = split_yaml_documents(decode_text(read.data))
    except DecodeError:
        return
    parser = _FileParser(default_namespace)
    documents = 0
    chunk: list[tuple[Hashable, _Piece]] = []
    for index, (first_line, text) in enumerate(pieces or ()):
        try:
            piece = parser.piece(relative, text, first_line, documents)
        except DecodeError:
            break
        documents += piece.documents
        chunk.append(((relative, read.stamp, index), piece))
        if len(chunk) == per_chunk:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def parse_one_file(
    name: str, read: ReadOutcome, default_namespace: str = "default", unread_fields: bool = False
) -> LoadResult:
    """One file read by the caller (or standard input), parsed as a file of a directory is;
    objects defined twice in it keep their first definition."""
    parsed = _FileParser(default_namespace, unread_fields).decode(name, None, read)
    if parsed is None:
        return LoadResult((), (SourceError(name, "", "", "cannot read: no such file"),), 1)
    objects: list[KubeObject] = []
    errors = list(parsed.errors)
    first_seen: dict[ObjectKey, str] = {}
    for obj, where in zip(parsed.objects, parsed.wheres, strict=True):
        if obj.key in first_seen:
            message = f"already defined at {first_seen[obj.key]}; the first definition wins"
            errors.append(SourceError(name + where, str(obj.key), "", message))
            continue
        first_seen[obj.key] = name + where
        objects.append(obj)
    errors_, warnings = _apart(errors)
    return LoadResult(
        tuple(objects), errors_, 1, first_seen, starts={name: parsed.starts}, warnings=warnings
    )


class _Starts(Mapping[str, tuple[Position, ...]]):
    """Where each document of each file starts, by the file's path: looked up in the
    records (only messages ask, about a file or two: not worth a table of every file)."""

    def __init__(self, paths: tuple[str, ...], records: tuple[_ParsedFile, ...]) -> None:
        self._paths, self._records = paths, records
        self._index: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        if self._index is None:
            self._index = {path: index for index, path in enumerate(self._paths)}
        return self._index

    def __getitem__(self, path: str) -> tuple[Position, ...]:
        return self._records[self._table()[path]].starts

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


class _Origins(Mapping[ObjectKey, str]):
    """Where each object was defined, by key; made on first use (only messages need it, and
    10,000 keys are not worth making on every load)."""

    def __init__(
        self, source: tuple[tuple[str, ...], tuple[_ParsedFile, ...]] | dict[ObjectKey, str]
    ) -> None:
        self._source = source
        self._by_key: dict[ObjectKey, str] | None = source if isinstance(source, dict) else None

    def _table(self) -> dict[ObjectKey, str]:
        if self._by_key is None:
            assert isinstance(self._source, tuple)
            paths, records = self._source
            self._by_key = {
                obj.key: path + where
                for path, result in zip(paths, records, strict=True)
                for obj, where in zip(result.objects, result.wheres, strict=True)
            }
        return self._by_key

    def __getitem__(self, key: ObjectKey) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[ObjectKey]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


def _apart(
    problems: list[SourceError],
) -> tuple[tuple[SourceError, ...], tuple[SourceError, ...]]:
    """Errors and warnings, each in the order found."""
    if all(problem.severity == "error" for problem in problems):
        return tuple(problems), ()
    errors = tuple(problem for problem in problems if problem.severity == "error")
    return errors, tuple(problem for problem in problems if problem.severity != "error")


def _shared(wheres: list[str]) -> tuple[str, ...]:
    """The wheres of a file (or piece), as one tuple shared by the files with the same."""
    return canonical(tuple(wheres)) if len(wheres) <= SHARE_WHERES_UP_TO else tuple(wheres)


def _renumbered(origin: str, shift: int) -> str:
    """ "routes.yaml#2.items[0]" (or "#2.items[0]") shifted by 5 documents:
    "routes.yaml#7.items[0]" (or "#7.items[0]")."""
    path, _, where = origin.rpartition("#")
    number, dot, rest = where.partition(".")
    return f"{path}#{int(number) + shift}{dot}{rest}"


def _keeping_last_good(fresh: _ParsedFile, previous: _ParsedFile | None) -> _ParsedFile:
    """A file that no longer decodes, or cannot be read, keeps serving what its last good
    version defined."""
    if fresh.decoded:
        return fresh
    if previous is None or not previous.objects:
        if fresh.unreadable:
            return fresh
        return replace(fresh, errors=_with_note(fresh.errors, "file skipped"))
    note = f"still serving its previous version ({len(previous.objects)} objects)"
    return replace(
        fresh,
        objects=previous.objects,
        wheres=previous.wheres,
        errors=_with_note(fresh.errors, note),
    )


def _unreadable_file(
    relative: str, reason: str, previous: _ParsedFile | None
) -> _ParsedFile | None:
    """What a file that cannot be read at all keeps serving: its last good version's objects
    (None when it had none: it is reported as unreadable, as a file never read)."""
    if previous is None or not previous.objects:
        return None
    error = SourceError(relative, "", "", f"cannot read: {reason}")
    fresh = _ParsedFile(None, (), (error,), decoded=False, unreadable=True)
    return _keeping_last_good(fresh, previous)


def _in_scan_order(parsed: dict[str, _ParsedFile], appended: int = 0) -> dict[str, _ParsedFile]:
    """The records in the scan's order (path components): the first definition of an object
    wins. `appended`: only the last so many records may be out of order (files new to the
    records): those are placed among the others, not every path sorted again."""
    paths = list(parsed)
    if 0 < appended * _PLACE_UP_TO < len(paths):
        order = paths[:-appended]
        for path in paths[-appended:]:
            bisect.insort(order, path, key=scan_order)
    else:
        order = sorted(paths, key=scan_order)
    return dict(zip(order, map(parsed.__getitem__, order), strict=True))


# Fewer files new to the records than one in this many are placed one by one.
_PLACE_UP_TO = 16


def _with_note(errors: tuple[SourceError, ...], note: str) -> tuple[SourceError, ...]:
    return tuple(replace(e, message=f"{e.message} ({note})") for e in errors)


# A record's objects and errors, read in C over every record.
def _first_definitions(
    paths: tuple[str, ...], records: tuple[_ParsedFile, ...], errors: list[SourceError]
) -> tuple[tuple[KubeObject, ...], _Origins]:
    """The objects of `records` with each key's first definition only (in path order), and
    where each is; every later definition is added to `errors`."""
    kept: list[KubeObject] = []
    first_seen: dict[ObjectKey, str] = {}
    for path, result in zip(paths, records, strict=True):
        errors.extend(result.errors)
        for obj, where in zip(result.objects, result.wheres, strict=True):
            key = obj.key
            if key in first_seen:
                errors.append(
                    SourceError(
                        path + where,
                        str(key),
                        "",
                        f"already defined at {first_seen[key]}; the first definition wins",
                    )
                )
                continue
            first_seen[key] = path + where
            kept.append(obj)
    return tuple(kept), _Origins(first_seen)


_errors_of = attrgetter("errors")


def _stamp_of_parsed(parsed: _ParsedFile | None) -> FileStamp | None:
    return parsed.stamp if parsed is not None else None


def _stamp_of(root: Path, relative: str) -> FileStamp | str | None:
    """The file's stamp; None when it is gone (or no longer a regular file); the reason
    when it cannot be read."""
    try:
        info = os.stat(root / relative)
    except FileNotFoundError:
        return "broken symbolic link" if os.path.islink(root / relative) else None
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(info.st_mode):
        return None
    return _stamp(relative, info)


def _stamp(relative: str, info: os.stat_result) -> FileStamp:
    return FileStamp(relative, info.st_mtime_ns, info.st_size, info.st_ino)


def _unread_warnings(
    origin: str, parsed: KubeObject, unread: list[FieldProblem]
) -> Iterator[SourceError]:
    for field_, message in unread:
        yield SourceError(origin, str(parsed.key), field_, message, severity="warning")


def _not_an_object(origin: str, value: Any) -> SourceError:
    return SourceError(
        origin, "", "", f"expected a mapping (a Kubernetes object), got {describe(value)}"
    )
