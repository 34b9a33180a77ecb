"""Reading manifest files, here or ahead in threads once they come slowly: in order, each
outcome as one read would give it, and nothing left running when the reader stops early."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from dragoman.sources import reads as reads_module
from dragoman.sources.reads import CHUNK, READ_AHEAD_FROM, FileRead, read_file, read_files
from dragoman.sources.tree import FileStamp


def _tree(root: Path, count: int) -> list[str]:
    names = [f"d{i % 7}/f{i:05}.yaml" for i in range(count)]
    for index, name in enumerate(names):
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(f"n: {index}\n")
    return names


@pytest.fixture(params=["page cache", "slow disk"])
def speed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Files read as fast as from the page cache, or slowly: then read ahead in threads."""
    if request.param == "slow disk":
        monkeypatch.setattr(reads_module, "SLOW_READ_S", 0.0)
    return str(request.param)


@pytest.mark.parametrize("count", [3, READ_AHEAD_FROM, 5 * CHUNK + 3])
def test_files_come_in_order_with_their_stamps(tmp_path: Path, count: int, speed: str) -> None:
    names = _tree(tmp_path, count)
    outcomes = list(read_files(str(tmp_path), names, 1000))
    assert [o.data for o in outcomes if isinstance(o, FileRead)] == [
        f"n: {i}\n".encode() for i in range(count)
    ]
    for name, outcome in zip(names, outcomes, strict=True):
        assert isinstance(outcome, FileRead)
        info = os.stat(tmp_path / name)
        assert outcome.stamp == FileStamp(name, info.st_mtime_ns, info.st_size, info.st_ino)


def test_gone_and_unreadable_files_are_outcomes_not_exceptions(tmp_path: Path, speed: str) -> None:
    names = _tree(tmp_path, READ_AHEAD_FROM + 10)
    late = CHUNK + 5  # read ahead in a thread when files come slowly
    for index in (3, 5, late, late + 2):
        (tmp_path / names[index]).unlink()
    for index in (5, late + 2):
        (tmp_path / names[index]).mkdir()  # a directory where a file was: not read as one
    outcomes = list(read_files(str(tmp_path), names, 1000))
    assert outcomes[3] is None and outcomes[late] is None
    assert isinstance(outcomes[5], IsADirectoryError)
    assert isinstance(outcomes[late + 2], IsADirectoryError)
    assert sum(isinstance(o, FileRead) for o in outcomes) == len(names) - 4


def test_at_most_the_limit_is_read(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_bytes(b"x" * 5000)
    outcome = read_file(str(tmp_path), "big.yaml", 100)
    assert isinstance(outcome, FileRead) and outcome.data == b"x" * 100


def test_a_file_larger_than_one_read_is_read_whole(tmp_path: Path) -> None:
    data = bytes(range(256)) * (3 * reads_module.READ_BYTES // 256 + 7)
    (tmp_path / "big.yaml").write_bytes(data)
    outcome = read_file(str(tmp_path), "big.yaml", len(data) + 1)
    assert isinstance(outcome, FileRead) and outcome.data == data
    assert outcome.stamp is not None and outcome.stamp.size == len(data)


def test_files_read_here_while_they_come_quickly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads_module, "SLOW_READ_S", 1.0)  # however busy the machine
    names = _tree(tmp_path, 20 * CHUNK)
    reads = read_files(str(tmp_path), names, 1000)
    outcomes = [next(reads) for _ in range(10 * CHUNK)]
    assert all(isinstance(o, FileRead) for o in outcomes)
    assert not [t for t in threading.enumerate() if t.name.startswith("manifest-read")]
    reads.close()


def test_stopping_early_leaves_no_reader_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reads_module, "SLOW_READ_S", 0.0)  # every file comes slowly
    names = _tree(tmp_path, 20 * CHUNK)
    reads = read_files(str(tmp_path), names, 1000)
    for _ in range(CHUNK + 1):  # the first chunk here, then one read ahead
        assert isinstance(next(reads), FileRead)
    assert [t for t in threading.enumerate() if t.name.startswith("manifest-read")]
    reads.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("manifest-read")]
