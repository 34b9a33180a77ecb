"""Reading manifest files: each with the stamp its content was read under.

Many files are read in the calling thread while they come quickly (from the page cache, a
file costs a few microseconds there, and reading ahead in threads would cost more: the
interpreter's lock handed back and forth at every system call). Once they come slowly (a cold
page cache, a busy disk), the rest are read ahead in threads: the system calls release the
interpreter, so waiting for the disk costs no decoding time."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from dragoman.sources.tree import FileStamp

# Files read per task, tasks read ahead of the consumer, threads: enough to keep a disk
# busy, and at most a few hundred files' bytes waiting in memory.
CHUNK = 64
AHEAD = 4
THREADS = 4
# Fewer files than this are read in the calling thread (a change, a small directory).
READ_AHEAD_FROM = 2 * CHUNK
# Files read in the calling thread come from the page cache in well under this (seconds per
# file, over a chunk); slower ones, from a disk, are read ahead in threads from then on.
SLOW_READ_S = 200e-6
# Bytes asked for by each read beyond a file's size (which only shows where it ends).
READ_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class FileRead:
    # The stamp the content was read under; None when the file changed while being read.
    stamp: FileStamp | None
    data: bytes


# What reading one file gave: its content, None when it is gone, or why it cannot be read.
ReadOutcome = FileRead | OSError | None


def read_file(root: str, relative: str, limit: int) -> ReadOutcome:
    """At most `limit` bytes of a file (never more in memory, even if it grows meanwhile)."""
    # os calls, not open(): a buffered file object costs more than the reading itself.
    try:
        fd = os.open(os.path.join(root, relative), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc
    try:
        before = os.fstat(fd)
        data = _read_at_most(fd, limit, before.st_size)
        after = os.fstat(fd)
    except OSError as exc:  # a directory: IsADirectoryError on reading, as open() gives
        return exc
    finally:
        os.close(fd)
    same = (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
    stamp = FileStamp(relative, before.st_mtime_ns, before.st_size, before.st_ino)
    return FileRead(stamp if same else None, data)


def _read_at_most(fd: int, limit: int, size: int) -> bytes:
    """Up to the end of the file or `limit` bytes; `size` (the file's, when opened) sizes the
    first read, so that a file that did not change is read whole at once."""
    parts: list[bytes] = []
    total = 0
    while total < limit:
        part = os.read(fd, min(limit - total, max(size + 1 - total, READ_BYTES)))
        if not part:
            break
        parts.append(part)
        total += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def can_open(path: str | os.PathLike[str]) -> bool:
    """Whether the file can be opened for reading now (a `chmod` changes no stamp)."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError:
        return False
    return True


def read_files(
    root: str, relatives: Sequence[str], limit: int
) -> Generator[ReadOutcome, None, None]:
    """`read_file` of each path, in order; once files come slowly, the rest are read ahead
    in threads. Close it when stopping early: the reads ahead are cancelled then."""
    chunks = [relatives[i : i + CHUNK] for i in range(0, len(relatives), CHUNK)]
    for index, chunk in enumerate(chunks):
        started = time.perf_counter()
        outcomes = _read_chunk(root, chunk, limit)
        slow = time.perf_counter() - started > SLOW_READ_S * len(chunk)
        yield from outcomes
        if slow and len(relatives) >= READ_AHEAD_FROM:
            yield from _read_ahead(root, chunks[index + 1 :], limit)
            return


def _read_ahead(
    root: str, chunks: Sequence[Sequence[str]], limit: int
) -> Generator[ReadOutcome, None, None]:
    with ThreadPoolExecutor(THREADS, thread_name_prefix="manifest-read") as pool:
        pending: deque[Future[list[ReadOutcome]]] = deque()
        submitted = 0
        try:
            for _ in chunks:
                while submitted < len(chunks) and len(pending) <= AHEAD:
                    pending.append(pool.submit(_read_chunk, root, chunks[submitted], limit))
                    submitted += 1
                yield from pending.popleft().result()
        finally:  # the consumer stopped early: read no further
            for future in pending:
                future.cancel()


def _read_chunk(root: str, relatives: Sequence[str], limit: int) -> list[ReadOutcome]:
    return [read_file(root, relative, limit) for relative in relatives]
