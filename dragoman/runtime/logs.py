"""Log output: text for people, or JSON (one object per line) for log pipelines.

A JSON line has `time` (RFC 3339, UTC), `level`, `logger` and `message`, plus the fields a
message names when its call passes them: `object` (`kind/ns/name`), `node` (an xDS node
id), and `exception` (the traceback) when there is one.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TYPE_CHECKING

from dragoman.log_text import cut

if TYPE_CHECKING:
    from dragoman.dag.model import Problem

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Record attributes passed with `extra=` that become JSON fields.
EXTRA_FIELDS = ("object", "node", "field", "reason")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        entry: dict[str, object] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in EXTRA_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                # `node` is what an xDS client claims: bounded like every client string.
                entry[name] = cut(str(value))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # ensure_ascii: control characters and any other byte a name carries stay escaped.
        return json.dumps(entry, ensure_ascii=True)


def setup_logging(level: str, log_format: str = "text") -> None:
    """Like logging.basicConfig: a handler on standard error unless the root logger has one
    already (a test harness's, an embedding program's), which is then left as it is."""
    root = logging.getLogger()
    root.setLevel(getattr(logging, level.upper()))
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root.addHandler(handler)


def problem_fields(problem: Problem) -> dict[str, str]:
    """The `extra=` of a log call about a problem: its object, field and reason as fields."""
    return {"object": str(problem.object), "field": problem.field, "reason": problem.reason}
