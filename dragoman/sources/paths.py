"""Manifests named on a command line: files, directories, and `-` (standard input), each
parsed as a file of a manifest directory is (the same bounded reader and parser)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.decode import MAX_FILE_BYTES
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import LoadResult, ManifestDirectory, parse_one_file
from dragoman.sources.reads import FileRead, ReadOutcome, read_file

STDIN = "-"


def load_paths(
    paths: Sequence[str],
    stdin: BinaryIO,
    *,
    default_namespace: str = "default",
    unread_fields: bool = False,
) -> LoadResult:
    """Every object the paths define, in the order given; an object defined twice keeps its
    first definition, as in a directory. Origins name each file by the path given
    ("manifests/routes.yaml#2", "-#1"). Raises OSError when a directory cannot be read.
    `unread_fields`: warn of the spec fields parsers never read, as `check` does."""
    results: list[LoadResult] = []
    for path in paths:
        if path != STDIN and Path(path).is_dir():
            directory = ManifestDirectory(
                Path(path), default_namespace=default_namespace, unread_fields=unread_fields
            )
            loaded = directory.load()
            results.append(_prefixed(loaded, path.rstrip("/") + "/"))
        else:
            read = _read(path, stdin)
            results.append(parse_one_file(path, read, default_namespace, unread_fields))
    return _combined(results)


def _read(path: str, stdin: BinaryIO) -> ReadOutcome:
    if path == STDIN:
        return FileRead(None, stdin.read(MAX_FILE_BYTES + 1))
    read = read_file("", path, MAX_FILE_BYTES + 1)
    return FileNotFoundError(2, "No such file or directory") if read is None else read


def _prefixed(result: LoadResult, prefix: str) -> LoadResult:
    errors = tuple(replace(e, origin=prefix + e.origin) for e in result.errors)
    warnings = tuple(replace(e, origin=prefix + e.origin) for e in result.warnings)
    origins = {key: prefix + origin for key, origin in result.origins.items()}
    starts = {prefix + path: starts for path, starts in result.starts.items()}
    return LoadResult(
        result.objects, errors, result.files, origins, starts=starts, warnings=warnings
    )


def _combined(results: Sequence[LoadResult]) -> LoadResult:
    objects: list[KubeObject] = []
    errors: list[SourceError] = []
    first_seen: dict[ObjectKey, str] = {}
    for result in results:
        errors.extend(result.errors)
        for obj in result.objects:
            origin = result.origins.get(obj.key, "")
            if obj.key in first_seen:
                message = f"already defined at {first_seen[obj.key]}; the first definition wins"
                errors.append(SourceError(origin, str(obj.key), "", message))
                continue
            first_seen[obj.key] = origin
            objects.append(obj)
    files = sum(result.files for result in results)
    starts = {path: s for result in results for path, s in result.starts.items()}
    warnings = tuple(warning for result in results for warning in result.warnings)
    return LoadResult(
        tuple(objects), tuple(errors), files, first_seen, starts=starts, warnings=warnings
    )
