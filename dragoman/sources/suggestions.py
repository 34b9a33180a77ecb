"""Which known name a misspelled one most likely meant ("Did you mean HTTPRoute?"): for
kinds, fields and references, one rule everywhere."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How alike a name and a known one must be (difflib's ratio, case aside) to be suggested.
CLOSE = 0.6


def closest(name: str, known: Iterable[str], *, cutoff: float = CLOSE) -> str | None:
    """The known name `name` most likely misspells, compared without case (`HttpRoute` is
    `HTTPRoute`), as the known name is spelled; None when none is close."""
    by_lower: dict[str, str] = {}
    for candidate in known:
        by_lower.setdefault(candidate.lower(), candidate)
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=cutoff)
    return by_lower[close[0]] if close else None
