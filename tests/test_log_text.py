"""Untrusted strings in logs: bounded and escaped, one record per line."""

from __future__ import annotations

from dragoman.log_text import MAX_SHOWN, quoted, quoted_list


def test_quoted_escapes_line_breaks_and_control_characters() -> None:
    shown = quoted("ok\nFORGED dragoman.xds: all good\r\x1b[2J\u2028\x00")
    assert "\n" not in shown and "\r" not in shown and "\x1b" not in shown
    assert "\u2028" not in shown and "\x00" not in shown
    assert shown.startswith("'ok\\nFORGED")


def test_quoted_cuts_long_strings_and_says_how_much_is_missing() -> None:
    shown = quoted("n" * 1_000_000)
    assert len(shown) < MAX_SHOWN + 40
    assert shown.endswith(f"... ({1_000_000 - MAX_SHOWN} more characters)")
    assert quoted("short") == "'short'"
    assert quoted(None) == "None"


def test_quoted_list_bounds_count_and_length() -> None:
    assert quoted_list([]) == "none"
    shown = quoted_list(["a\nb"] + ["x" * 10_000] * 100)
    assert "\n" not in shown
    assert shown.endswith("and 96 more")
    assert len(shown) < 5 * (MAX_SHOWN + 40)


def test_json_log_fields_from_clients_are_bounded_and_escaped() -> None:
    import json
    import logging

    from dragoman.runtime.logs import JsonFormatter

    record = logging.LogRecord("dragoman.xds", logging.WARNING, __file__, 1, "NACK", (), None)
    record.node = "n" * 1_000_000 + "\nFORGED"
    line = JsonFormatter().format(record)

    assert "\n" not in line and len(line) < 1000
    assert json.loads(line)["node"].endswith(f"... ({1_000_007 - MAX_SHOWN} more characters)")
