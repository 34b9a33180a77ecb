"""Reading manifest files: each with the stamp its content was read under, and many of them
ahead of the decoding, in threads (the system calls release the interpreter, so a cold
page cache or a busy disk costs no decoding time)."""

from __future__ import annotations

import os
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


@dataclass(frozen=True, slots=True)
class FileRead:
    # The stamp the content was read under; None when the file changed while being read.
    stamp: FileStamp | None
    data: bytes


# What reading one file gave: its content, None when it is gone, or why it cannot be read.
ReadOutcome = FileRead | OSError | None


def read_file(root: str, relative: str, limit: int) -> ReadOutcome:
    """At most `limit` bytes of a file (never more in memory, even if it grows meanwhile)."""
    try:
        with open(os.path.join(root, relative), "rb") as file:
            before = os.fstat(file.fileno())
            data = file.read(limit)
            after = os.fstat(file.fileno())
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc
    same = (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
    stamp = FileStamp(relative, before.st_mtime_ns, before.st_size, before.st_ino)
    return FileRead(stamp if same else None, data)


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
    """`read_file` of each path, in order; many files are read ahead in threads. Close it when
    stopping early: the reads ahead are cancelled then."""
    if len(relatives) < READ_AHEAD_FROM:
        for relative in relatives:
            yield read_file(root, relative, limit)
        return
    chunks = [relatives[i : i + CHUNK] for i in range(0, len(relatives), CHUNK)]
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
