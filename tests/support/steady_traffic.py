"""Steady GETs through an Envoy listener on one kept-alive connection, every answer counted
by status (and every connection error), each failure's time kept."""

from __future__ import annotations

import http.client
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Traffic:
    """`rate` requests a second to `port`, asking for `paths` in turn, until `finish()`."""

    port: int
    rate: float = 50.0
    paths: Sequence[str] = ("/",)
    host: str | None = None  # the Host header (default: the address and port)
    answers: Counter[str] = field(default_factory=Counter)
    # When each failed request (not 2xx, or no answer) ended, by time.monotonic().
    failed_at: list[float] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Traffic:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    @property
    def sent(self) -> int:
        return sum(self.answers.values())

    @property
    def failed(self) -> int:
        return self.sent - self.answers["2xx"]

    def _run(self) -> None:
        connection: http.client.HTTPConnection | None = None
        due = time.monotonic()
        sent = 0
        while not self.stop.is_set():
            due += 1 / self.rate
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            path = self.paths[sent % len(self.paths)]
            sent += 1
            try:
                headers = {"Host": self.host} if self.host is not None else {}
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                body = response.read()
                status = response.status
                if status >= 300:
                    flags = response.getheader("x-envoy-response-flags", "")
                    self.answers[f"{path} {status} {flags or body[:40]!r}"] += 1
                    self.failed_at.append(time.monotonic())
                else:
                    self.answers["2xx"] += 1
            except (OSError, http.client.HTTPException) as error:
                self.answers[f"error {type(error).__name__}"] += 1
                self.failed_at.append(time.monotonic())
                connection.close()
                connection = None
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                due = time.monotonic()  # behind: no burst to catch up
        if connection is not None:
            connection.close()
