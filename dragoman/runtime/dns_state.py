"""The DNS check's accepted answers, kept on disk so that a process restarted while DNS is
down serves the names the last one served.

One file, `dns.json` in the state directory: written whole to a temporary file, flushed to
disk and renamed over the old one, with a SHA-256 of its content; a file that does not
check out is ignored with a warning. An answer is restored only while it is younger than
its grace (`dnsCheck.grace`, else the interval it was accepted for: its TTL clamped to
`minInterval`..`maxInterval`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from dragoman.runtime.dns_checker import AcceptedAnswer
from dragoman.runtime.server_config import DnsCheckSettings

log = logging.getLogger("dragoman.dns")

FILE_NAME = "dns.json"
VERSION = 1
# More names than any configuration sends to the check: what is beyond is not kept.
MAX_NAMES = 100_000


def save_answers(directory: Path, answers: Mapping[str, AcceptedAnswer]) -> None:
    """Writes the answers (atomically: the old file or the new one, whole)."""
    kept = dict(sorted(answers.items())[:MAX_NAMES])
    body = json.dumps(
        {
            name: {
                "addresses": list(answer.addresses),
                "interval": answer.interval,
                "acceptedAt": answer.accepted_at,
            }
            for name, answer in kept.items()
        },
        sort_keys=True,
    )
    document = json.dumps(
        {"version": VERSION, "sha256": hashlib.sha256(body.encode()).hexdigest(), "answers": body}
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE_NAME
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(document)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def kept_answers(directory: Path | None, settings: DnsCheckSettings) -> dict[str, AcceptedAnswer]:
    """What the previous process accepted and is still within its grace, for the first build
    to serve (the checks start at once, and may be slow); {} without a state directory or
    without the check."""
    if directory is None or not settings.enabled:
        return {}
    answers = load_answers(directory, settings)
    if answers:
        log.info("serving %d DNS check answers kept by the previous process", len(answers))
    return answers


def load_answers(
    directory: Path,
    settings: DnsCheckSettings,
    wall_clock: Callable[[], float] = time.time,
) -> dict[str, AcceptedAnswer]:
    """The answers kept that are still within their grace; {} when there are none (or the
    file is damaged: logged)."""
    path = directory / FILE_NAME
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot read the DNS check's kept answers %s (%s); ignoring them", path, exc)
        return {}
    answers = _checked(text)
    if answers is None:
        log.warning("the DNS check's kept answers in %s are damaged; ignoring them", path)
        return {}
    now = wall_clock()
    return {
        name: answer
        for name, answer in answers.items()
        if 0 <= now - answer.accepted_at < _grace(settings, answer)
    }


def _grace(settings: DnsCheckSettings, answer: AcceptedAnswer) -> float:
    return settings.grace_s if settings.grace_s is not None else answer.interval


def _checked(text: str) -> dict[str, AcceptedAnswer] | None:
    try:
        document = json.loads(text)
        body = document["answers"]
        if document["version"] != VERSION or not isinstance(body, str):
            return None
        if document["sha256"] != hashlib.sha256(body.encode()).hexdigest():
            return None
        return {
            str(name): AcceptedAnswer(
                tuple(str(address) for address in fields["addresses"]),
                float(fields["interval"]),
                float(fields["acceptedAt"]),
            )
            for name, fields in json.loads(body).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
