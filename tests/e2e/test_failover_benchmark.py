"""benchmarks/failover.py, run small: a row per variant and mode with what the client and the
flapping endpoint saw, the active checks with 1 route and with N, the external failover, and
the targets judged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(240)


def test_a_short_run_reports_every_mode_and_judges_the_targets() -> None:
    args = [
        *("--duration", "3", "--period", "1", "--routes", "5", "--variants", "503"),
        *("--modes", "none,passive+retry", "--failovers", "1", "--check-seconds", "2"),
    ]
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "failover.py"), *args],
        capture_output=True,
        text=True,
        timeout=200,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    rows = {
        m["mode"]: (int(m["sent"]), int(m["failed"]), int(m["to_failing"]))
        for m in re.finditer(
            r"^503 +(?P<mode>\S+) +(?P<sent>\d+) +(?P<failed>\d+) +(?P<to_failing>\d+) ",
            out,
            re.MULTILINE,
        )
    }
    assert set(rows) == {"none", "passive+retry"}, out
    sent, failed, to_failing = rows["none"]
    assert sent > 50 and to_failing > 0 and failed == to_failing, out  # every 503 seen
    assert rows["passive+retry"][1] == 0, out  # hidden by the retry
    assert re.search(r"1 route\(s\) \d+\.\d\d, 5 route\(s\) \d+\.\d\d", out), out
    assert "failover within 2 s of the first failed check" in out
    assert "zero client failures" in out and "load average after" in out
