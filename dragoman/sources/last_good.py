"""The last good version of each manifest file, kept on disk so that a restarted dragoman
serves what the last one served while a file stays broken.

One entry per file (its path, a SHA-256 of its content, the content), written when the
file's good version changes: to a temporary file, flushed to disk, then renamed over the
old entry, so a crash leaves the old entry or the new one, whole. An entry that does not
check out (cut short, altered) is ignored with a warning. An entry goes when its file goes;
all of them together are bounded (`max_bytes`): past that, new versions are not kept.
Writes run in a thread of their own, off the path of serving.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("dragoman.sources")

MAGIC = b"dragoman-last-good 1\n"
SUFFIX = ".entry"
DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class LastGoodFiles:
    """Entries below `directory/manifests`, by the manifest file's relative path."""

    def __init__(self, directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = directory / "manifests"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # What each entry on disk holds: path -> (SHA-256, size).
        self._stored: dict[str, tuple[str, int]] = {}
        self._full_warned = False
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="last-good")
        self._pending: list[Future[None]] = []
        for entry in self.directory.glob("*" + SUFFIX):
            header = _header(entry)
            if header is None or _entry_path(self.directory, header[0]) != entry:
                continue  # checked again, with a warning, if it is ever needed
            self._stored[header[0]] = (header[1], header[2])
        for leftover in self.directory.glob("*.tmp"):  # a write cut short by a crash
            leftover.unlink(missing_ok=True)

    def get(self, relative: str) -> bytes | None:
        """The last good content of the file, or None (never kept, or the entry is
        damaged: logged)."""
        entry = _entry_path(self.directory, relative)
        try:
            raw = entry.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read the last good version of %s (%s)", relative, exc)
            return None
        content = _checked(raw, relative)
        if content is None:
            log.warning(
                "the last good version of %s kept in %s is damaged; ignoring it", relative, entry
            )
        return content

    def remember(self, relative: str, content: bytes) -> None:
        """Keeps content as the file's last good version (a write later, in a thread)."""
        digest = hashlib.sha256(content).hexdigest()
        with self._lock:
            if self._stored.get(relative, ("", 0))[0] == digest:
                return
            used = sum(size for _, size in self._stored.values())
            used -= self._stored.get(relative, ("", 0))[1]
            if used + len(content) > self.max_bytes:
                if not self._full_warned:
                    log.warning(
                        "the last good versions of manifest files would take more than %d "
                        "bytes; newer versions are not kept (%s)",
                        self.max_bytes,
                        relative,
                    )
                    self._full_warned = True
                return
            self._stored[relative] = (digest, len(content))
            self._submit(self._write, relative, digest, content)

    def forget(self, relative: str) -> None:
        """The file is gone: so is its last good version."""
        with self._lock:
            if self._stored.pop(relative, None) is None:
                return
            self._submit(_entry_path(self.directory, relative).unlink, True)

    def keep_only(self, relatives: Collection[str]) -> None:
        """Forgets the entries of files not in `relatives` (removed while not running)."""
        with self._lock:
            gone = [path for path in self._stored if path not in relatives]
        for path in gone:
            self.forget(path)

    def flush(self) -> None:
        """Waits for the writes submitted so far."""
        with self._lock:
            pending, self._pending = self._pending, []
        for future in pending:
            with contextlib.suppress(Exception):  # logged by the write itself
                future.result()

    def close(self) -> None:
        self.flush()
        self._writer.shutdown(wait=True)

    def _submit(self, action: Callable[..., object], *args: object) -> None:
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._writer.submit(_logged, action, *args))

    def _write(self, relative: str, digest: str, content: bytes) -> None:
        entry = _entry_path(self.directory, relative)
        header = json.dumps({"path": relative, "sha256": digest, "size": len(content)})
        temporary = entry.with_suffix(".tmp")
        with open(temporary, "wb") as file:
            file.write(MAGIC + header.encode() + b"\n" + content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, entry)
        _sync_directory(self.directory)


def _logged(action: Callable[..., object], *args: object) -> None:
    try:
        action(*args)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot keep the last good version of a manifest file (%s)", exc)


def _entry_path(directory: Path, relative: str) -> Path:
    return directory / (hashlib.sha256(relative.encode()).hexdigest()[:40] + SUFFIX)


def _header(entry: Path) -> tuple[str, str, int] | None:
    try:
        with open(entry, "rb") as file:
            if file.read(len(MAGIC)) != MAGIC:
                return None
            fields = json.loads(file.readline(4096))
        return str(fields["path"]), str(fields["sha256"]), int(fields["size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _checked(raw: bytes, relative: str) -> bytes | None:
    """The content of an entry that is whole and is the given file's, else None."""
    if not raw.startswith(MAGIC):
        return None
    header, newline, content = raw[len(MAGIC) :].partition(b"\n")
    try:
        fields = json.loads(header) if newline else None
    except ValueError:
        return None
    if not isinstance(fields, dict) or fields.get("path") != relative:
        return None
    if fields.get("size") != len(content):
        return None
    if fields.get("sha256") != hashlib.sha256(content).hexdigest():
        return None
    return content


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
