"""Which manifest files a directory holds, and a cheap stamp of each.

Both the loader (to skip unchanged files) and the watcher (to notice changes) read the
tree through `scan_tree`, so they agree on what a manifest file is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

YAML_SUFFIXES = (".yaml", ".yml")
MANIFEST_SUFFIXES = (*YAML_SUFFIXES, ".json")
# Directories nested deeper than this below the root are reported, not read: the walk's
# work and the paths it builds stay bounded whatever the tree looks like.
MAX_DIRECTORY_DEPTH = 32


class FileStamp(NamedTuple):
    """What changes when a file is edited, replaced or renamed."""

    path: str  # relative to the scanned directory, '/'-separated
    mtime_ns: int
    size: int
    inode: int


@dataclass(frozen=True, slots=True)
class TreeScan:
    files: tuple[FileStamp, ...]  # sorted by path components
    # Entries below the root that could not be read: (relative path, reason).
    unreadable: tuple[tuple[str, str], ...] = ()


def scan_tree(root: Path) -> TreeScan:
    """Every `*.yaml`, `*.yml` and `*.json` file below root, skipping hidden files and dirs.

    Symbolic links are followed (a Kubernetes ConfigMap volume is made of them), with each
    directory visited once. Raises OSError when root itself cannot be listed.
    """
    files: list[FileStamp] = []
    unreadable: list[tuple[str, str]] = []
    visited: set[tuple[int, int]] = set()
    root_stat = os.stat(root)
    if not stat.S_ISDIR(root_stat.st_mode):
        raise NotADirectoryError(f"not a directory: {root}")
    visited.add((root_stat.st_dev, root_stat.st_ino))
    # Depth first with an explicit stack (no recursion, however deep the tree goes).
    pending: list[tuple[Path, str, int]] = [(root, "", 0)]
    while pending:
        directory, prefix, depth = pending.pop()
        subdirectories = _scan(directory, prefix, files, unreadable, visited, is_root=depth == 0)
        for path, relative in reversed(subdirectories):
            if depth + 1 > MAX_DIRECTORY_DEPTH:
                unreadable.append(
                    (relative, f"nested more than {MAX_DIRECTORY_DEPTH} directories deep")
                )
            else:
                pending.append((path, relative + "/", depth + 1))
    files.sort(key=lambda f: scan_order(f.path))
    return TreeScan(tuple(files), tuple(sorted(unreadable)))


def scan_order(path: str) -> list[str]:
    """A relative path's sort key in a scan's order: by path components."""
    return path.split("/")


def holds_at_least(root: Path, count: int, or_a_yaml_file_of: int | None = None) -> bool:
    """Whether at least `count` manifest files are below root (counted by their names), or
    a YAML file of at least `or_a_yaml_file_of` bytes: a cheap look before deciding to scan,
    which goes no further than the `count`-th file. False when root cannot be listed."""
    found = 0
    pending: list[tuple[str, int]] = [(str(root), 0)]
    visited: set[tuple[int, int]] = set()  # directories, as scan_tree: each once
    while pending:
        directory, depth = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.name.endswith(MANIFEST_SUFFIXES):
                        found += 1
                        if found >= count or (
                            or_a_yaml_file_of is not None
                            and entry.name.endswith(YAML_SUFFIXES)
                            and entry.stat().st_size >= or_a_yaml_file_of
                        ):
                            return True
                    elif depth < MAX_DIRECTORY_DEPTH and entry.is_dir():
                        info = entry.stat()
                        if (info.st_dev, info.st_ino) not in visited:
                            visited.add((info.st_dev, info.st_ino))
                            pending.append((entry.path, depth + 1))
        except OSError:
            continue
    return False


def fingerprint(root: Path) -> frozenset[FileStamp]:
    """A value that changes when any manifest file below root is added, edited, removed or
    renamed. Raises OSError when root cannot be listed."""
    return frozenset(scan_tree(root).files)


def _scan(
    directory: Path,
    prefix: str,
    files: list[FileStamp],
    unreadable: list[tuple[str, str]],
    visited: set[tuple[int, int]],
    *,
    is_root: bool = False,
) -> list[tuple[Path, str]]:
    """Lists one directory: its manifest files into `files`, and returns its subdirectories
    (path, relative path) not visited before."""
    subdirectories: list[tuple[Path, str]] = []
    try:
        # Names, not DirEntry objects: each entry would keep its stat result (two dozen
        # objects) until the listing ends, interleaved in memory with the stamps kept, and
        # at 10,000 files the freed results would leave megabytes of pages half used.
        with os.scandir(directory) as entries:
            listing = sorted(e.name for e in entries if not e.name.startswith("."))
    except OSError as exc:
        if is_root:
            raise
        unreadable.append((prefix.rstrip("/"), exc.strerror or str(exc)))
        return subdirectories
    for name in listing:
        relative = prefix + name
        is_manifest = name.endswith(MANIFEST_SUFFIXES)
        path = os.path.join(directory, name)
        try:
            info = os.stat(path)  # follows symbolic links
        except FileNotFoundError:
            if is_manifest and os.path.islink(path):
                unreadable.append((relative, "broken symbolic link"))
            continue  # otherwise removed since the listing: simply gone
        except OSError as exc:
            if is_manifest:
                unreadable.append((relative, exc.strerror or str(exc)))
            continue
        if stat.S_ISDIR(info.st_mode):
            identity = (info.st_dev, info.st_ino)
            if identity not in visited:
                visited.add(identity)
                subdirectories.append((Path(path), relative))
        elif is_manifest and stat.S_ISREG(info.st_mode):
            files.append(FileStamp(relative, info.st_mtime_ns, info.st_size, info.st_ino))
    return subdirectories
