"""Whether Envoy will accept a regular expression: RE2 syntax, within Envoy's program size.

Envoy rejects a whole route table for one bad regex, so each is checked before it is sent.
"""

from __future__ import annotations

import functools

import re2

# Envoy's default for the runtime key re2.max_program_size.error_level.
MAX_PROGRAM_SIZE = 100

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the caller reports the problem, naming the object


@functools.lru_cache(maxsize=1024)
def regex_problem(pattern: str) -> str | None:
    """Why Envoy would reject `pattern`, or None when it is a valid RE2 it accepts."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return f"{pattern!r} is not a valid RE2 regular expression: {detail}"
    if compiled.programsize > MAX_PROGRAM_SIZE:
        return (
            f"{pattern!r} is too complex for Envoy (RE2 program size {compiled.programsize}, "
            f"at most {MAX_PROGRAM_SIZE})"
        )
    return None
