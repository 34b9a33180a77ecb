"""`dragoman demo --check` judges each answer: status, which backend, and the Host it saw."""

from __future__ import annotations

import json

from dragoman.demo.run import CHECKS


def _answer(backend: str, host: str = "127.0.0.1") -> bytes:
    return json.dumps({"backend": backend, "host": host}).encode()


def test_each_check_accepts_only_the_right_answer() -> None:
    root, external, split, refused = CHECKS
    assert root.holds(200, _answer("web-2"))
    assert not root.holds(200, _answer("api"))
    assert not root.holds(503, b"no healthy upstream")
    assert external.holds(200, _answer("api", host="api.demo.test"))
    assert not external.holds(200, _answer("api", host="127.0.0.1"))  # Host not rewritten
    assert not external.holds(503, b"no healthy upstream")  # the name did not resolve
    assert split.holds(200, _answer("web-1")) and split.holds(200, _answer("api"))
    assert not split.holds(200, _answer("local"))
    assert refused.holds(500, b"")
    assert not refused.holds(200, _answer("web-1"))
