"""The DNS check's accepted answers kept for the next process: restored within their grace,
a damaged file ignored, and a restored name kept through a resolver outage."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path

import pytest

from dragoman.dag.dns_check import DnsObservation
from dragoman.runtime.dns_checker import AcceptedAnswer, DnsChecker, Resolution
from dragoman.runtime.dns_state import FILE_NAME, load_answers, save_answers
from dragoman.runtime.server_config import DnsCheckSettings


def settings() -> DnsCheckSettings:
    return DnsCheckSettings(enabled=True, min_interval_s=5, max_interval_s=60)


class FakeResolve:
    """Answers from a table (NXDOMAIN for a name not in it)."""

    def __init__(self) -> None:
        self.answers: dict[str, Resolution] = {}

    async def __call__(self, name: str) -> Resolution:
        return self.answers.get(name, Resolution(error="NXDOMAIN"))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_accepted_answers_are_kept_and_restored_within_their_grace(tmp_path: Path) -> None:
    fake, clock = FakeResolve(), Clock()
    fake.answers = {
        "api.test": Resolution(("192.0.2.1",), ttl=30),
        "short.test": Resolution(("192.0.2.2",), ttl=1),  # accepted for minInterval: 5 s
        "ghost.test": Resolution(error="NXDOMAIN"),  # never accepted: nothing to keep
    }
    checker = DnsChecker(settings(), fake, clock, wall_clock=lambda: 1000.0)
    asyncio.run(checker.check(list(fake.answers)))
    answers = checker.accepted_answers()
    assert answers == {
        "api.test": AcceptedAnswer(("192.0.2.1",), 30.0, 1000.0),
        "short.test": AcceptedAnswer(("192.0.2.2",), 5.0, 1000.0),
    }
    save_answers(tmp_path, answers)

    assert load_answers(tmp_path, settings(), wall_clock=lambda: 1004.0) == answers
    # 10 s later, the short answer's grace (its interval) is over.
    assert set(load_answers(tmp_path, settings(), wall_clock=lambda: 1010.0)) == {"api.test"}
    # A configured grace is every answer's.
    long_grace = dataclasses.replace(settings(), grace_s=3600.0)
    assert load_answers(tmp_path, long_grace, wall_clock=lambda: 2000.0) == answers
    assert load_answers(tmp_path / "none", settings()) == {}


def test_a_damaged_file_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save_answers(tmp_path, {"api.test": AcceptedAnswer(("192.0.2.1",), 30.0, 1000.0)})
    path = tmp_path / FILE_NAME
    whole = path.read_text()
    document = json.loads(whole)
    document["answers"] = document["answers"].replace("192.0.2.1", "169.254.169.254")
    for damaged in (whole[:-9], json.dumps(document), "\x00\x00"):
        path.write_text(damaged)  # cut short, altered, garbage
        caplog.clear()
        with caplog.at_level(logging.WARNING, "dragoman.dns"):
            assert load_answers(tmp_path, settings(), wall_clock=lambda: 1001.0) == {}
        assert any("damaged; ignoring them" in m for m in caplog.messages)


def test_a_restored_name_is_served_at_once_and_through_a_resolver_outage() -> None:
    fake, clock = FakeResolve(), Clock()
    checker = DnsChecker(settings(), fake, clock)
    checker.restore({"api.test": AcceptedAnswer(("192.0.2.1",), 30.0, 1000.0)})
    assert checker.observations == {"api.test": DnsObservation(("192.0.2.1",))}
    assert checker.seconds_until_due() is None  # never checked here: due at once

    fake.answers = {"api.test": Resolution(error="Timeout")}
    changed = asyncio.run(checker.check(["api.test"]))
    assert changed == ["api.test"]
    assert checker.observations["api.test"] == DnsObservation(("192.0.2.1",), "Timeout")
    # Restored names no longer asked for are forgotten, as checked ones are.
    checker.restore({"old.test": AcceptedAnswer(("192.0.2.9",), 30.0, 1000.0)})
    asyncio.run(checker.check(["api.test"]))
    assert set(checker.observations) == {"api.test"}
