"""The kernel's inotify, through libc (Linux): which manifest files were written and closed,
moved in or out, removed, or had their attributes changed, below a directory.

A file is reported when its writer closes it (IN_CLOSE_WRITE) or when it is renamed into
place (IN_MOVED_TO), never on a write (IN_MODIFY): a file written in place with a pause
half-way is read once, whole. Files written to and not closed yet are `writing`; a rescan
leaves them alone too.
"""

from __future__ import annotations

import array
import ctypes
import ctypes.util
import errno
import fcntl
import os
import select
import stat
import struct
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dragoman.sources.tree import MANIFEST_SUFFIXES, MAX_DIRECTORY_DEPTH

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

WATCHED = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name, NUL-padded

# Events are gathered until none came for STEP_MS (at most DEBOUNCE_MS), or none is queued
# once a file is whole: one file saved is one batch (a save's events, a rename's too, come
# microseconds apart). Bursts are coalesced above, by the watcher's quiet period.
STEP_MS = 2
DEBOUNCE_MS = 50
# Files being written that are remembered; past this, the oldest are forgotten (a rescan
# then may read one of them before its writer closes it).
MAX_WRITING = 10_000
# How long writing_now() waits for the thread to read the events already queued.
CATCH_UP_S = 0.2

# A batch of changed manifest files (relative, '/'-separated), or None: rescan to tell.
Deliver = Callable[[frozenset[str] | None], None]


class KernelEvents:
    """An inotify watch of every directory below root (as `scan_tree` walks it), read in a
    thread of its own that hands batches to `deliver`; `on_failure` when it cannot run."""

    def __init__(
        self, root: Path, deliver: Deliver, on_failure: Callable[[BaseException], None]
    ) -> None:
        self.root = root
        self.deliver = deliver
        self.on_failure = on_failure
        self.writing: dict[str, None] = {}  # files written to and not closed yet, oldest first
        self._directories: dict[int, str] = {}  # watch descriptor -> relative prefix ("a/")
        self._wake_read, self._wake_write = os.pipe()
        self._stopped = threading.Event()
        self._pipe_lock = threading.Lock()  # the pipe is closed once, never written after
        self._pipe_open = True
        # Set once every directory is watched (or the watch failed): a scan taken after it
        # misses no write, since the kernel reports every one from then on.
        self.started = threading.Event()
        # Held while events are read and applied, so writing_now() sees them whole.
        self._reading = threading.Lock()
        self._fd = -1
        self._thread = threading.Thread(target=self._run, name="manifest-watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        # The thread wakes, closes its descriptors and exits on its own; nothing waits.
        self._stopped.set()
        with self._pipe_lock:
            if self._pipe_open:
                os.write(self._wake_write, b"x")

    def writing_now(self) -> frozenset[str]:
        """The manifest files written to and not closed yet, as of every event the kernel
        queued before the call: a scan taken just before it knows which of the files it saw
        were still open. Blocks until the thread has read those events (CATCH_UP_S at most)."""
        deadline = time.monotonic() + CATCH_UP_S
        while True:
            with self._reading:
                if self._fd < 0 or _unread(self._fd) == 0 or time.monotonic() >= deadline:
                    return frozenset(self.writing)
            time.sleep(STEP_MS / 1000)

    def _run(self) -> None:
        fd = -1
        try:
            libc = _libc()
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                raise _os_error(ctypes.get_errno(), "inotify_init1")
            self._fd = fd
            self._watch_tree(libc, fd, self.root, "")
            self.started.set()
            self._loop(libc, fd)
        except Exception as exc:
            if not self._stopped.is_set():
                self.on_failure(exc)
        finally:
            self.started.set()
            with self._reading:
                self._fd = -1
            if fd >= 0:
                os.close(fd)
            with self._pipe_lock:
                self._pipe_open = False
                os.close(self._wake_read)
                os.close(self._wake_write)

    def _loop(self, libc: ctypes.CDLL, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        while not self._stopped.is_set():
            poller.poll()  # idle: no wake-up until the kernel or close() says so
            if self._stopped.is_set():
                return
            changed: set[str] | None = set()
            waited = 0
            while True:  # gather until quiet for STEP_MS, at most DEBOUNCE_MS
                with self._reading:
                    data = _read_all(fd)
                    if data:
                        changed = self._batch(libc, fd, data, changed)
                # A file whole (closed or moved in) goes once nothing more is queued; events
                # that only announce a write (a file made, written to) wait for its close.
                step = 0 if changed is None or changed else STEP_MS
                if waited >= DEBOUNCE_MS or not poller.poll(step) or self._stopped.is_set():
                    break
                waited += STEP_MS
            if changed is None or changed:
                self.deliver(frozenset(changed) if changed is not None else None)

    def _batch(
        self, libc: ctypes.CDLL, fd: int, data: bytes, changed: set[str] | None
    ) -> set[str] | None:
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _, length = _EVENT.unpack_from(data, offset)
            raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
            offset += _EVENT.size + length
            name = raw.split(b"\0", 1)[0].decode(errors="surrogateescape")
            outcome = self._event(libc, fd, wd, mask, name)
            if outcome is None:
                changed = None
            elif changed is not None and outcome:
                changed.add(outcome)
        return changed

    def _event(self, libc: ctypes.CDLL, fd: int, wd: int, mask: int, name: str) -> str | None:
        """The manifest file the event reports, "" when none, None when a rescan must tell."""
        if mask & IN_Q_OVERFLOW:
            return None
        prefix = self._directories.get(wd)
        if prefix is None:
            return ""  # a watch removed since (IN_IGNORED after it)
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
            if mask & IN_IGNORED:
                del self._directories[wd]
            return None if prefix == "" else ""  # the root: the watcher looks again
        relative = prefix + name
        full = os.path.join(self.root, relative)
        if mask & IN_ISDIR:
            if mask & (IN_MOVED_FROM | IN_DELETE):
                self._forget(libc, fd, relative + "/")
            elif mask & (IN_CREATE | IN_MOVED_TO) and not name.startswith("."):
                self._watch_tree(libc, fd, Path(full), relative + "/")
            return None  # a directory made, moved or removed: what it holds needs a rescan
        if name.startswith("."):
            # An editor's or a tool's temporary file (`.web.yaml.swp`) changes nothing; a
            # hidden link or directory (`..data`) may change anything.
            return None if _is_link_or_directory(full) else ""
        if not name.endswith(MANIFEST_SUFFIXES):
            # A file of another kind changes nothing; a link made, moved or removed may.
            return "" if _is_regular_file(full) else None
        return self._file_event(mask, relative, full)

    def _file_event(self, mask: int, relative: str, full: str) -> str:
        if mask & IN_MODIFY:
            self.writing.pop(relative, None)
            self.writing[relative] = None
            while len(self.writing) > MAX_WRITING:
                del self.writing[next(iter(self.writing))]
            return ""
        if mask & IN_CREATE and _is_regular_file(full):
            return ""  # opened to be written: its close says when it is whole
        if mask & IN_ATTRIB and relative in self.writing:
            return ""
        self.writing.pop(relative, None)
        return relative

    def _watch_tree(self, libc: ctypes.CDLL, fd: int, top: Path, prefix: str) -> None:
        """Watches top and every directory below it, as scan_tree walks them."""
        pending = [(top, prefix, prefix.count("/"))]
        while pending:
            directory, relative, depth = pending.pop()
            wd = libc.inotify_add_watch(fd, os.fsencode(directory), WATCHED)
            if wd < 0:
                error = ctypes.get_errno()
                if relative == "" or error in (errno.ENOSPC, errno.ENOMEM):
                    raise _os_error(error, f"inotify_add_watch {directory}")
                continue  # gone or unreadable since: the rescan reports it
            if wd in self._directories:
                continue  # reached before through another link
            self._directories[wd] = relative
            if depth >= MAX_DIRECTORY_DEPTH:
                continue
            try:
                with os.scandir(directory) as entries:
                    names = [e.name for e in entries if not e.name.startswith(".")]
            except OSError:
                continue
            for name in names:
                path = directory / name
                if path.is_dir():
                    pending.append((path, f"{relative}{name}/", depth + 1))

    def _forget(self, libc: ctypes.CDLL, fd: int, prefix: str) -> None:
        """Stops watching the directories below prefix (moved away or removed)."""
        for wd, relative in list(self._directories.items()):
            if relative.startswith(prefix):
                del self._directories[wd]
                libc.inotify_rm_watch(fd, wd)


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise OSError(errno.ENOSYS, "inotify is not available")
    libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    return libc


def _unread(fd: int) -> int:
    """How many bytes of events the kernel holds for fd, not read yet."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count, True)
    return count[0]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _os_error(code: int, what: str) -> OSError:
    return OSError(code, f"{what}: {os.strerror(code)}")


def _is_link_or_directory(path: str) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False  # gone: a renamed temporary file, or a link whose rename shows too
    return stat.S_ISLNK(mode) or stat.S_ISDIR(mode)


def _is_regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
