"""What `dragoman check` found, one record per problem, as text lines or a JSON document."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from dragoman.dag.model import Problem
from dragoman.log_text import plain
from dragoman.sources.errors import SourceError
from dragoman.sources.manifests import LoadResult

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class CheckProblem:
    severity: Severity
    file: str  # as named on the command line or below --manifests; "-" for standard input
    line: int | None  # where the object's document starts (from 1); None when unknown
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


def check_problems(result: LoadResult, problems: Iterable[Problem]) -> list[CheckProblem]:
    """The loading errors, then the build's problems, then the warnings, each placed in its
    file."""
    found = [_from_source(result, error, "error") for error in result.errors]
    for problem in problems:
        origin = result.origins.get(problem.object, "")
        file, line, column = _place(result, origin)
        found.append(
            CheckProblem(
                "error",
                file,
                line,
                column,
                str(problem.object),
                problem.field,
                problem.message,
                problem.reason,
            )
        )
    found += [_from_source(result, warning, "warning") for warning in result.warnings]
    return found


def _from_source(result: LoadResult, error: SourceError, severity: Severity) -> CheckProblem:
    file, line, column = _place(result, error.origin)
    return CheckProblem(severity, file, line, column, error.object, error.field, error.message)


def _place(result: LoadResult, origin: str) -> tuple[str, int | None, int | None]:
    position = result.position(origin)
    file = origin.rpartition("#")[0] if "#" in origin else origin
    if position is None:
        return origin, None, None
    return file, *position


def as_json(problems: list[CheckProblem], objects: int, files: int) -> str:
    document = {
        "problems": [asdict(problem) for problem in problems],
        "errors": sum(problem.severity == "error" for problem in problems),
        "warnings": sum(problem.severity == "warning" for problem in problems),
        "objects": objects,
        "files": files,
    }
    return json.dumps(document, indent=2) + "\n"
