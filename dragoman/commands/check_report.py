"""What `dragoman check` found, one record per problem, as text lines or a JSON document."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from dragoman.commands.check_places import ProblemPlaces, ReadFile
from dragoman.dag.model import Problem
from dragoman.log_text import plain
from dragoman.objects import KubeObject, ObjectKey
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import LoadResult
from dragoman.sources.suggestions import closest

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class CheckProblem:
    severity: Severity
    file: str  # as named on the command line or below --manifests; "-" for standard input
    # Where the field is (from 1): its key, or the nearest ancestor present when it is
    # missing; the object's document when the problem names no field. None: unknown.
    line: int | None
    column: int | None
    object: str  # "HTTPRoute/default/web", or "" when the problem names no object
    field: str  # "spec.rules[0].backendRefs[0]", or "" for the whole object or file
    message: str
    reason: str = ""  # the Gateway API-style reason of a build problem

    def text(self) -> str:
        """`file:line:column: kind/namespace/name: field: message (reason)`, with
        `warning: ` before the object of a warning."""
        where = printable_where(self.file, self.line, self.column)
        if self.severity == "warning":
            where = f"{where}: warning"
        if self.object:
            where = f"{where}: {plain(self.object)}"
        message = f"{self.message} ({self.reason})" if self.reason else self.message
        return ": ".join(part for part in (where, self.field, message) if part)


def printable_where(file: str, line: int | None, column: int | None) -> str:
    return plain(file) if line is None else f"{plain(file)}:{line}:{column}"


def check_problems(
    result: LoadResult, problems: Iterable[Problem], read: ReadFile | None = None
) -> list[CheckProblem]:
    """The loading errors, then the build's problems, then the warnings, each placed in its
    file (at the field it names, when `read` gives the file's bytes again)."""
    places = ProblemPlaces(result, read)
    names = _Names(result.objects)
    found = [_from_source(places, error, "error") for error in result.errors]
    for problem in problems:
        origin = result.origins.get(problem.object, "")
        file, line, column = places.place(origin, problem.field)
        message = problem.message
        if problem.missing is not None:
            message += names.did_you_mean(problem.missing)
        found.append(
            CheckProblem(
                "error",
                file,
                line,
                column,
                str(problem.object),
                problem.field,
                message,
                problem.reason,
            )
        )
    found += [_from_source(places, warning, "warning") for warning in result.warnings]
    return found


class _Names:
    """The names of the objects loaded, by kind and namespace, made on first use."""

    def __init__(self, objects: Iterable[KubeObject]) -> None:
        self._objects = objects
        self._by_kind: dict[tuple[str, str], list[str]] | None = None

    def did_you_mean(self, missing: ObjectKey) -> str:
        """ "; did you mean NAME?" naming the object of the same kind and namespace that
        `missing` likely misspells; "" when none is close."""
        if self._by_kind is None:
            self._by_kind = {}
            for obj in self._objects:
                key = obj.key
                self._by_kind.setdefault((key.kind, key.namespace), []).append(key.name)
        meant = closest(missing.name, self._by_kind.get((missing.kind, missing.namespace), ()))
        return f"; did you mean {plain(meant)}?" if meant is not None else ""


def _from_source(places: ProblemPlaces, error: SourceError, severity: Severity) -> CheckProblem:
    file, line, column = places.place(error.origin, error.field)
    return CheckProblem(severity, file, line, column, error.object, error.field, error.message)


def as_json(problems: list[CheckProblem], objects: int, files: int) -> str:
    document = {
        "problems": [asdict(problem) for problem in problems],
        "errors": sum(problem.severity == "error" for problem in problems),
        "warnings": sum(problem.severity == "warning" for problem in problems),
        "objects": objects,
        "files": files,
    }
    return json.dumps(document, indent=2) + "\n"
