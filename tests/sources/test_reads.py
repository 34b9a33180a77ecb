"""Reading manifest files ahead in threads: in order, each outcome as one read would give it,
and nothing left running when the reader stops early."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dragoman.sources.reads import CHUNK, READ_AHEAD_FROM, FileRead, read_file, read_files
from dragoman.sources.tree import FileStamp


def _tree(root: Path, count: int) -> list[str]:
    names = [f"d{i % 7}/f{i:05}.yaml" for i in range(count)]
    for index, name in enumerate(names):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"n: {index}\n")
    return names


@pytest.mark.parametrize("count", [3, READ_AHEAD_FROM, 5 * CHUNK + 3])
def test_files_come_in_order_with_their_stamps(tmp_path: Path, count: int) -> None:
    names = _tree(tmp_path, count)
    outcomes = list(read_files(str(tmp_path), names, 1000))
    assert [o.data for o in outcomes if isinstance(o, FileRead)] == [
        f"n: {i}\n".encode() for i in range(count)
    ]
    for name, outcome in zip(names, outcomes, strict=True):
        assert isinstance(outcome, FileRead)
        info = os.stat(tmp_path / name)
        assert outcome.stamp == FileStamp(name, info.st_mtime_ns, info.st_size, info.st_ino)


def test_gone_and_unreadable_files_are_outcomes_not_exceptions(tmp_path: Path) -> None:
    names = _tree(tmp_path, READ_AHEAD_FROM + 10)
    (tmp_path / names[3]).unlink()
    (tmp_path / names[5]).unlink()
    (tmp_path / names[5]).mkdir()  # a directory where a file was: cannot be read as one
    outcomes = list(read_files(str(tmp_path), names, 1000))
    assert outcomes[3] is None
    assert isinstance(outcomes[5], IsADirectoryError)
    assert sum(isinstance(o, FileRead) for o in outcomes) == len(names) - 2


def test_at_most_the_limit_is_read(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(b"x" * 5000)
    outcome = read_file(str(tmp_path), "big.yaml", 100)
    assert isinstance(outcome, FileRead) and outcome.data == b"x" * 100


def test_stopping_early_leaves_no_reader_thread(tmp_path: Path) -> None:
    names = _tree(tmp_path, 20 * CHUNK)
    reads = read_files(str(tmp_path), names, 1000)
    assert isinstance(next(reads), FileRead)
    reads.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("manifest-read")]
