"""How the source boundary reports a bad manifest."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from dragoman.log_text import plain

# (field path, message), e.g. ("spec.ports[0].port", "expected an integer from 1 to 65535, got 0")
FieldProblem = tuple[str, str]


@dataclass(frozen=True, slots=True)
class SourceError:
    """One problem found while loading: where it is, which object, which field, and what."""

    origin: str  # file relative to the source, plus "#<document>" when known: "routes.yaml#2"
    object: str  # "HTTPRoute/default/web", or "" when the document names no object
    field: str  # "spec.rules[0].backendRefs[1].port", or "" for the whole document
    message: str
    # "warning": something served (or ignored) as written that was likely meant otherwise
    # (a misspelled kind); a load result keeps warnings apart from its errors.
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        # A file name or object name can hold anything a file system or a manifest allows:
        # shown escaped when it would break the log line (message values are, by `describe`).
        origin, object = printable(self.origin), printable(self.object)
        where = f"{origin} {object}" if object else origin
        return ": ".join(part for part in (where, self.field, self.message) if part)


def printable(text: str) -> str:
    """text itself when it is printable and of a sane length, else a quoted, cut form."""
    return plain(text)


class ObjectError(Exception):
    """Every problem of one object, so a single load reports them all."""

    def __init__(self, problems: Iterable[FieldProblem], object: str = "") -> None:
        self.problems: list[FieldProblem] = list(problems)
        self.object = object
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in self.problems))

    def source_errors(self, origin: str) -> list[SourceError]:
        return [
            SourceError(origin, self.object, field, message) for field, message in self.problems
        ]
