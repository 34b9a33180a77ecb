"""Strings Envoy accepts in a route table, checked before they are sent.

Envoy validates a RouteConfiguration as a whole: one header value with a line break in one
rule makes it refuse the table, and every route on that listener stops getting updates. So
each string a route carries into Envoy is held to Envoy's own rules here (its proto
`validate.rules`: the well-known HTTP_HEADER_NAME and HTTP_HEADER_VALUE patterns in their
non-strict form, byte limits; and the config checks of its header parser), and a filter that
breaks them is refused on its own.
"""

from __future__ import annotations

import re

# HTTP_HEADER_NAME and HTTP_HEADER_VALUE with `strict: false`: no NUL, CR or LF.
_FORBIDDEN = re.compile("[\x00\r\n]")
# HeaderValue.key and HeaderValue.value: max_bytes 16384.
MAX_HEADER_BYTES = 16384
_NAMES = {"\x00": "NUL", "\r": "CR", "\n": "LF"}


def header_value_problem(value: str) -> str | None:
    """Why Envoy refuses `value` as a header value (or a path it writes), or None."""
    found = _FORBIDDEN.search(value)
    if found is not None:
        return (
            f"contains {_NAMES[found.group()]} (at character {found.start() + 1}), which "
            "Envoy refuses in header values and paths"
        )
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_HEADER_BYTES:
        return f"is {size} bytes long in UTF-8; Envoy takes at most {MAX_HEADER_BYTES}"
    return None


def header_name_problem(name: str, *, editable_host: bool) -> str | None:
    """Why Envoy refuses to set, append or remove header `name`, or None.

    Envoy's header parser refuses `:`-pseudo-headers and `host` in every header list; a
    request's Host is rewritten another way, so `editable_host` callers map it themselves.
    """
    if not name:
        return "is empty"
    found = _FORBIDDEN.search(name)
    if found is not None:
        return f"contains {_NAMES[found.group()]}, which Envoy refuses in header names"
    if name.startswith(":"):
        return f"{name!r} is a pseudo-header, which Envoy does not let routes modify"
    if name.lower() == "host" and not editable_host:
        return "Envoy does not let routes modify the Host header of a response"
    return None
