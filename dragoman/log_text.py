"""Strings from untrusted peers (xDS clients, manifest files) as log lines may show them.

A node id can be a megabyte long and a NACK's error_detail can hold newlines that would
forge log lines of their own: every such string goes through `quoted` before it is logged,
cut to a bounded length and with control characters escaped, so one record stays one line.
"""

from __future__ import annotations

from collections.abc import Sequence

# Envoy's own node ids and NACK messages fit easily; a longer value is cut.
MAX_SHOWN = 256


def quoted(value: object, limit: int = MAX_SHOWN) -> str:
    """`value` as a quoted, escaped literal of at most about `limit` characters.

    repr escapes every character str.isprintable refuses (\\n, \\r, \\x1b, U+2028, ...).
    Non-strings are shown with repr; a cut string says how much is missing.
    """
    if not isinstance(value, str):
        return repr(value)[:limit]
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value) - limit} more characters)"


def plain(text: str, limit: int = MAX_SHOWN) -> str:
    """text as it is when printable and at most `limit` long, else `quoted`: for values that
    are normally tame (a certificate's identity, a file name) and read best unquoted."""
    return text if text.isprintable() and len(text) <= limit else quoted(text, limit)


def cut(value: str, limit: int = MAX_SHOWN) -> str:
    """`value` cut to `limit` characters, saying how many more there were: for structured
    fields (JSON logs), whose encoder escapes what `quoted` would."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}... ({len(value) - limit} more characters)"


def quoted_list(values: Sequence[str], shown: int = 5, limit: int = MAX_SHOWN) -> str:
    """The first `shown` values, quoted, and how many more there are ("none" for none)."""
    if not values:
        return "none"
    listed = ", ".join(quoted(value, limit) for value in values[:shown])
    return listed if len(values) <= shown else f"{listed} and {len(values) - shown} more"
