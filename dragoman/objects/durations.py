"""Durations as the Gateway API writes them (GEP-2257): `30s`, `1m30s`, `500ms`, `2h`."""

from __future__ import annotations

import re

_DURATION = re.compile(r"([0-9]{1,5}(?:h|ms|m|s)){1,4}")
_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

DURATION_EXPECTED = 'a duration such as "30s", "1m30s" or "500ms"'


def parse_duration(text: str) -> float | None:
    """Seconds, or None when `text` is not a duration."""
    value = text.strip()
    if not _DURATION.fullmatch(value):
        return None
    return sum(int(number) * _SECONDS[unit] for number, unit in _PART.findall(value))
