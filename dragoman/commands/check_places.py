"""Where in its file each problem `dragoman check` reports is: the field it names, to the
line and column.

Loading keeps only where each document starts. The files that have problems are read
again, once each, and composed as YAML nodes (`dragoman.sources.field_positions`); a file
that changed since it was loaded (its documents no longer start where they did) keeps the
start of the object's document, as does one that cannot be read again.
"""

from __future__ import annotations

from collections.abc import Callable

from yaml.nodes import Node

from dragoman.sources.decode import DecodeError, decode_text
from dragoman.sources.field_positions import document_nodes, field_position
from dragoman.sources.manifests import LoadResult

# A file's label as origins name it ("routes.yaml", "manifests/routes.yaml", "-") to its
# bytes now, or None when it cannot be read.
ReadFile = Callable[[str], bytes | None]
Place = tuple[str, int | None, int | None]  # file, line, column (None: unknown)


class ProblemPlaces:
    """Places problems in their files, composing each file with problems once."""

    def __init__(self, result: LoadResult, read: ReadFile | None = None) -> None:
        self._result = result
        self._read = read
        self._documents: dict[str, list[Node] | None] = {}

    def place(self, origin: str, field: str = "") -> Place:
        """Where the problem of `origin` ("routes.yaml#2", "-#1.items[3]") about `field` is:
        the field's node, else the start of the object's document, else the file alone."""
        position = self._result.position(origin)
        if position is None:
            return origin, None, None
        file, _, where = origin.rpartition("#")
        number, _, in_list = where.partition(".")
        roots = self._roots(file)
        index = int(number) - 1
        if roots is None or len(roots) != len(self._result.starts.get(file, ())):
            return file, *position
        root = roots[index]
        if (root.start_mark.line + 1, root.start_mark.column + 1) != position:
            return file, *position  # the file changed since it was loaded
        path = ".".join(part for part in (in_list, field) if part)
        return file, *field_position(root, path)

    def _roots(self, file: str) -> list[Node] | None:
        if file in self._documents:
            return self._documents[file]
        roots = None
        data = self._read(file) if self._read is not None else None
        if data is not None:
            try:
                roots = document_nodes(decode_text(data), is_json=file.endswith(".json"))
            except DecodeError:
                roots = None
        self._documents[file] = roots
        return roots
