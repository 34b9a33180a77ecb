"""A first load of many files shared with a worker process: the same objects, errors and
origins as a load in one process, whatever share the worker took, and the same when the
worker fails; a record is taken from the worker only for a file still as it read it."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import os
import pickle
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from dragoman.commands.early_start import first_load_worker
from dragoman.sources import manifests, parse_worker, record_pickles
from dragoman.sources.manifests import LoadResult, ManifestDirectory
from dragoman.sources.parse_worker import ParseWorker
from dragoman.sources.tree import holds_at_least
from tests.support.parse_workers import WAIT_S, looking_patiently

FILES = 240


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(parse_worker, "SHARE_FROM", 100)
    monkeypatch.setattr(parse_worker, "idle_cpus", lambda: 1.5)  # whatever runs the tests
    for i in range(FILES):
        (tmp_path / f"d{i % 3}").mkdir(exist_ok=True)
        if i % 50 == 7:
            text = "apiVersion: v1\nkind: Service\nmetadata: {name: [}\n"  # not YAML
        elif i % 50 == 9:
            text = f"apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\nspec: {{ports: 1}}\n"
        elif i % 50 == 11:
            text = "apiVersion: v1\nkind: Service\nmetadata: {name: s1}\nspec: {selector: {}}\n"
        else:
            text = (
                f"apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\n"
                f"spec: {{type: ExternalName, externalName: s{i}.example.test}}\n---\n"
                "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n"
                f"metadata: {{name: r{i}}}\nspec:\n  parentRefs: [{{name: gw}}]\n"
                f"  rules: [{{backendRefs: [{{name: s{i}, port: 80}}]}}]\n"
            )
        (tmp_path / f"d{i % 3}" / f"f{i:04}.yaml").write_text(text)
    return tmp_path


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    looking_patiently(monkeypatch)


def _alone(path: Path, monkeypatch: pytest.MonkeyPatch) -> LoadResult:
    """The load of one process: neither files nor pieces shared."""
    with monkeypatch.context() as patch:
        patch.setattr(parse_worker, "SHARE_FROM", 10**9)
        patch.setattr(parse_worker, "SHARE_BYTES", 10**12)
        loader = ManifestDirectory(path)
        result = loader.load()
        assert loader.parsed_by_worker == 0
        return result


def _same_load(shared: LoadResult, alone: LoadResult) -> None:
    assert shared.objects == alone.objects
    assert shared.errors == alone.errors
    assert dict(shared.origins) == dict(alone.origins)
    assert dict(shared.starts) == dict(alone.starts)


def _same(shared: LoadResult, alone: LoadResult) -> None:
    _same_load(shared, alone)
    assert shared.files == alone.files == FILES


def _finished(path: Path) -> ParseWorker:
    """A worker for `path`, once it has parsed everything (and ended)."""
    worker = ParseWorker.start(path, "default")
    assert worker is not None
    worker._process.wait(WAIT_S)
    return worker


@pytest.mark.usefixtures("patient")
def test_the_worker_and_the_caller_meet(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loader = ManifestDirectory(directory)
    shared = loader.load()
    assert 0 < loader.parsed_by_worker < FILES  # each parsed a share
    _same(shared, _alone(directory, monkeypatch))
    assert len(shared.errors) >= 3 and any("invalid YAML" in e.message for e in shared.errors)
    # A later load reads only what changed, in this process.
    (directory / "d0" / "f0000.yaml").write_text("apiVersion: v1\nkind: Namespace\n")
    again = loader.load()
    assert len(again.objects) == len(shared.objects) - 2


class _CountedWorker:
    """Hands back the first keys at its first look, nothing after; notes when it was looked
    at, and whether it was stopped."""

    def __init__(self, first: list[int]) -> None:
        self.looks: list[float] = []
        self.first = first
        self.stopped = False

    def received(self) -> list[tuple[int, str]]:
        self.looks.append(time.monotonic())
        return [(key, f"worker {key}") for key in self.first] if len(self.looks) == 1 else []

    def stop(self) -> None:
        self.stopped = True


def test_the_callers_looks_at_the_pipe_are_more_than_a_switch_interval_apart() -> None:
    """Each look is a read that lets go of the interpreter lock and takes it back: looks
    closer than a switch interval kept the server's event loop from ever getting it."""
    worker = _CountedWorker(first=[0, 1, 2])
    keys = list(range(1000))

    def parse_here(chunk: list[int]) -> list[str]:
        time.sleep(0.001)  # a chunk parsed here: under a switch interval
        return [f"here {key}" for key in chunk]

    results, taken = parse_worker.parse_meeting(
        worker,  # type: ignore[arg-type]  # what parse_meeting uses of a worker
        keys,
        parse_here,
        lambda record, at: True,
    )

    assert results[:3] == ["worker 0", "worker 1", "worker 2"] and taken == 3
    assert results[3:] == [f"here {key}" for key in keys[3:]]
    assert worker.stopped
    gaps = [later - earlier for earlier, later in itertools.pairwise(worker.looks)]
    assert len(gaps) >= 2, gaps  # 31 chunks here, over 31 ms: three looks or more
    assert min(gaps) > sys.getswitchinterval(), (min(gaps), sys.getswitchinterval())


class _SteadyWorker:
    """Hands back the next `per_look` keys at each look."""

    def __init__(self, keys: list[int], per_look: int) -> None:
        self.keys, self.per_look, self.at = keys, per_look, 0

    def received(self) -> list[tuple[int, str]]:
        handed = self.keys[self.at : self.at + self.per_look]
        self.at += self.per_look
        return [(key, f"parsed {key}") for key in handed]

    def stop(self) -> None:
        pass


def test_meanwhile_is_given_what_is_parsed_each_time_a_share_more_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the worker parses, the caller works on what is parsed so far (a first build)
    each time a share of the keys more is: never once everything is parsed (that is the
    load's own result), and the results are the same."""
    monkeypatch.setattr(parse_worker, "LOOK_SWITCH_INTERVALS", 0)  # a look every turn
    keys = list(range(600))
    given: list[list[str | None]] = []

    def parse_here(chunk: list[int]) -> list[str]:
        return [f"parsed {key}" for key in chunk]  # as the worker parses it

    def meet(meanwhile: Callable[[Sequence[str | None]], None] | None) -> tuple[list[str], int]:
        worker = _SteadyWorker(keys, per_look=10)
        return parse_worker.parse_meeting(
            worker,  # type: ignore[arg-type]  # what parse_meeting uses of a worker
            keys,
            parse_here,
            lambda record, at: True,
            meanwhile,
        )

    results, by_worker = meet(lambda so_far: given.append(list(so_far)))

    alone, by_worker_alone = meet(None)
    assert results == alone
    assert by_worker > by_worker_alone  # the worker parsed what this core did not meanwhile
    share = math.ceil(len(keys) * parse_worker.MEANWHILE_SHARE)
    parsed = [sum(result is not None for result in so_far) for so_far in given]
    assert len(parsed) >= 2, parsed
    assert all(later - earlier >= share for earlier, later in itertools.pairwise([0, *parsed]))
    assert parsed[-1] < len(keys)
    for so_far in given:  # what was parsed then, in its place
        assert all(r is None or r == results[i] for i, r in enumerate(so_far))


@pytest.mark.usefixtures("patient")
def test_a_first_load_shared_with_a_worker_gives_the_objects_parsed_so_far(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a first load shared with a worker gives them, and only objects the files define
    (before duplicates are resolved: a later load's result decides)."""
    given: list[list[object]] = []
    loader = ManifestDirectory(directory)
    shared = loader.load(meanwhile=lambda objects: given.append(list(objects)))

    _same(shared, _alone(directory, monkeypatch))
    assert given, "nothing given while the worker parsed"
    keys = {obj.key for obj in shared.objects}
    for objects in given:
        assert 0 < len(objects) < len(shared.objects)
        assert {obj.key for obj in objects} <= keys  # type: ignore[attr-defined]
    assert [len(objects) for objects in given] == sorted(len(objects) for objects in given)
    (directory / "d0" / "f0000.yaml").write_text("apiVersion: v1\nkind: Namespace\n")
    given.clear()
    loader.load(["d0/f0000.yaml"], meanwhile=lambda objects: given.append(list(objects)))
    assert given == []  # a later load is parsed here alone


def test_a_worker_started_early_can_parse_the_whole_first_load(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _finished(directory)
    loader = ManifestDirectory(directory, parse_worker=worker)
    shared = loader.load()
    assert loader.parsed_by_worker == FILES
    _same(shared, _alone(directory, monkeypatch))


def test_a_file_changed_since_the_worker_read_it_is_parsed_here(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _finished(directory)
    (directory / "d1" / "f0001.yaml").write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: renamed}\n"
        "spec: {type: ExternalName, externalName: renamed.example.test}\n"
    )
    loader = ManifestDirectory(directory, parse_worker=worker)
    shared = loader.load()
    assert loader.parsed_by_worker == FILES - 1
    names = {obj.key.name for obj in shared.objects}
    assert "renamed" in names and "s1" not in names and "r1" not in names
    _same(shared, _alone(directory, monkeypatch))


def test_a_worker_for_another_directory_is_not_used(
    directory: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path_factory.mktemp("other")
    for i in range(FILES):
        (other / f"o{i}.yaml").write_text(
            f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: n{i}}}\n"
        )
    worker = _finished(other)
    loader = ManifestDirectory(directory, parse_worker=worker)
    _same(loader.load(), _alone(directory, monkeypatch))
    assert worker._process.returncode is not None  # stopped and reaped


FRAME = "import sys; sys.stdout.buffer.write(len({0}).to_bytes(8, 'little') + {0})"


@pytest.mark.parametrize(
    "command",
    [
        ("-c", "import sys; sys.exit(3)"),  # dies
        ("-c", "print('not a pickle')"),  # answers nonsense
        ("-c", FRAME.format("b'garbage!'")),  # a chunk that is no pickle
        ("-c", "import pickle; " + FRAME.format("pickle.dumps([None, 'x'])")),  # not records
    ],
    ids=["dies", "nonsense", "not-a-pickle", "not-records"],
)
@pytest.mark.usefixtures("patient")
def test_a_failing_worker_leaves_its_files_to_the_caller(
    directory: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, str]
) -> None:
    monkeypatch.setattr(parse_worker, "WORKER_COMMAND", command)
    loader = ManifestDirectory(directory)
    shared = loader.load()
    assert loader.parsed_by_worker == 0
    _same(shared, _alone(directory, monkeypatch))


def test_a_silent_worker_is_never_waited_for(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_worker, "WORKER_COMMAND", ("-c", "import time; time.sleep(600)"))
    worker = ParseWorker.start(directory, "default")
    assert worker is not None
    started = time.monotonic()
    loader = ManifestDirectory(directory, parse_worker=worker)
    shared = loader.load()
    assert time.monotonic() - started < 30
    assert loader.parsed_by_worker == 0
    assert worker._process.returncode is not None  # killed and reaped
    _same(shared, _alone(directory, monkeypatch))


def test_no_worker_when_debug_logs_are_on(
    directory: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dragoman.sources")
    monkeypatch.setattr(ParseWorker, "start", _no_start)
    loader = ManifestDirectory(directory)
    loader.load()
    assert loader.parsed_by_worker == 0


def test_no_worker_without_an_idle_cpu(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse_worker, "idle_cpus", lambda: 0.7)
    monkeypatch.setattr(ParseWorker, "start", _no_start)
    loader = ManifestDirectory(directory)
    loader.load()
    assert loader.parsed_by_worker == 0


def _no_start(*_: object) -> None:
    raise AssertionError("no worker should be started")


@pytest.mark.usefixtures("patient")
def test_a_hostile_file_in_the_workers_share_is_reported(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = 40_000
    (directory / "d0" / "0000-deep.yaml").write_text("x: " + "[" * deep + "]" * deep + "\n")
    loader = ManifestDirectory(directory)
    shared = loader.load()
    assert loader.parsed_by_worker > 0  # sorted first: in the worker's share
    [error] = [e for e in shared.errors if e.origin == "d0/0000-deep.yaml"]
    assert "nested more than 100 levels deep (file skipped)" in error.message
    alone = _alone(directory, monkeypatch)
    assert shared.objects == alone.objects and shared.errors == alone.errors


def test_serve_starts_the_worker_from_its_command_line(
    directory: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    small = tmp_path_factory.mktemp("small")
    (small / "one.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    for words in (
        ["serve", "--manifests", str(directory)],
        ["serve", "--xds-address", "127.0.0.1:1", f"--manifests={directory}"],
    ):
        worker = first_load_worker(words)
        assert worker is not None and worker.root == str(directory)
        worker.stop()
        assert worker._process.returncode is not None
    for words in (
        [],
        ["render", "--manifests", str(directory)],
        ["serve", "--kubernetes", "--manifests", str(directory)],
        ["serve", "--manifests", str(directory), "--state-dir", str(small)],
        ["serve", "--manifests", str(directory), "--log-level", "debug"],
        ["serve", "--manifests", str(small)],  # too few files, none large
        ["serve", "--manifests"],
        ["serve", "--", "--manifests", str(directory)],
    ):
        assert first_load_worker(words) is None, words


def test_holds_at_least_counts_manifest_names_below_the_root(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for name in ("a/one.yaml", "a/b/two.yml", "a/b/three.json", "a/notes.txt", ".hidden/x.yaml"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "a" / "b" / "loop").symlink_to(tmp_path / "a")  # visited once
    assert holds_at_least(tmp_path, 3)
    assert not holds_at_least(tmp_path, 4)
    assert not holds_at_least(tmp_path / "missing", 1)
    # Or a YAML file this large (not JSON): one is enough.
    (tmp_path / "a" / "b" / "three.json").write_text("{}" * 50)
    assert not holds_at_least(tmp_path, 4, 100)
    (tmp_path / "a" / "b" / "two.yml").write_text("{}" * 50)
    assert holds_at_least(tmp_path, 4, 100)


@dataclasses.dataclass(frozen=True, slots=True)
class _Pair:
    left: object
    right: object = None


@dataclasses.dataclass(frozen=True, slots=True)
class _One:
    value: object


def test_record_pickles_rebuild_frozen_slotted_dataclasses(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = parse_worker_records(directory)
    assert pickle.loads(record_pickles.dumps(records)) == records
    value = [_Pair(_One((1, "a")), _Pair("x")), _One(None), {"k": _Pair(2)}, Path("p")]
    for cls in (_Pair, _One):  # not through dataclasses' own state methods (slower)
        monkeypatch.setattr(cls, "__getstate__", _no_state)
        monkeypatch.setattr(cls, "__setstate__", _no_state)
    assert pickle.loads(record_pickles.dumps(value)) == value


def _no_state(*_: object) -> None:
    raise AssertionError("pickled through dataclasses' __getstate__/__setstate__")


def parse_worker_records(directory: Path) -> list[object]:
    from dragoman.sources.manifests import parse_fresh_files

    files = sorted(str(p.relative_to(directory)) for p in directory.rglob("*.yaml"))
    return list(parse_fresh_files(str(directory), "default", files[:40]))


def test_usable_cpus_stay_within_the_cgroup_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    monkeypatch.setattr(parse_worker, "CPU_MAX", str(cpu_max))
    assert parse_worker.usable_cpus() == affinity  # no such file
    cpu_max.write_text("max 100000\n")
    assert parse_worker.usable_cpus() == affinity
    cpu_max.write_text("50000 100000\n")  # half a CPU
    assert parse_worker.usable_cpus() == 1
    cpu_max.write_text(f"{150000 * affinity} 100000\n")
    assert parse_worker.usable_cpus() == affinity


@pytest.mark.parametrize(
    ("loadavg", "busy"),
    [
        ("1.80 1.20 0.90 1/312 4242\n", 0.0),  # just gone quiet: only this process runs
        ("0.20 0.30 0.40 3/312 4242\n", 0.2),  # two more runnable for a moment: the average
        ("2.50 2.00 1.00 4/312 4242\n", 2.5),  # busy, and busy now
    ],
)
def test_idle_cpus_judged_by_the_load_now_and_over_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loadavg: str, busy: float
) -> None:
    (tmp_path / "loadavg").write_text(loadavg)
    monkeypatch.setattr(parse_worker, "LOADAVG", str(tmp_path / "loadavg"))
    monkeypatch.setattr(parse_worker, "usable_cpus", lambda: 4)
    assert parse_worker.idle_cpus() == pytest.approx(4 - busy)


def test_idle_cpus_fall_back_to_the_load_average(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parse_worker, "LOADAVG", str(tmp_path / "none"))
    monkeypatch.setattr(parse_worker.os, "getloadavg", lambda: (1.25, 1.0, 1.0))
    monkeypatch.setattr(parse_worker, "usable_cpus", lambda: 2)
    assert parse_worker.idle_cpus() == pytest.approx(0.75)


def test_a_task_runnable_for_a_moment_does_not_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks = iter(["0.1 0.1 0.1 3/90 1\n", "0.1 0.1 0.1 1/90 1\n"] + ["0.1 0.1 0.1 4/90 1\n"] * 9)
    path = tmp_path / "loadavg"
    path.write_text(next(looks))
    monkeypatch.setattr(parse_worker, "LOADAVG", str(path))
    monkeypatch.setattr(parse_worker.time, "sleep", lambda _: path.write_text(next(looks)))
    assert parse_worker._runnable_now() == 0  # the fewest seen, less this process


PIECES = 300


@pytest.fixture
def one_large_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory of a small file and a large one of many documents (among them a broken
    object, a List, an empty document), the large one worth sharing by its pieces."""
    monkeypatch.setattr(parse_worker, "SHARE_BYTES", 10_000)
    monkeypatch.setattr(parse_worker, "idle_cpus", lambda: 1.5)
    documents = []
    for i in range(PIECES):
        if i % 97 == 5:
            documents.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\nspec: 7\n")
        elif i % 97 == 6:
            documents.append("")  # an empty document
        elif i % 97 == 7:
            documents.append(
                "apiVersion: v1\nkind: List\nitems:\n"
                f"  - {{apiVersion: v1, kind: Service, metadata: {{name: l{i}}}}}\n"
            )
        else:
            documents.append(
                f"apiVersion: v1\nkind: Service\nmetadata: {{name: s{i}}}\n"
                f"spec: {{type: ExternalName, externalName: s{i}.example.test}}\n"
            )
    (tmp_path / "all.yaml").write_text("---\n" + "---\n".join(documents))
    (tmp_path / "small.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    return tmp_path


@pytest.mark.usefixtures("patient")
def test_a_large_file_is_shared_by_its_pieces(
    one_large_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = ManifestDirectory(one_large_file)
    shared = loader.load()
    assert 0 < loader.parsed_by_worker < PIECES  # each parsed a share of the pieces
    alone = _alone(one_large_file, monkeypatch)
    _same_load(shared, alone)
    assert any("expected a mapping, got 7" in e.message for e in shared.errors)
    [origin] = [o for k, o in shared.origins.items() if k.name == "s250"]
    assert shared.position(origin) == alone.position(origin) != None  # noqa: E711
    # The record keeps its pieces: an edit of one document parses that one again.
    text = (one_large_file / "all.yaml").read_text()
    (one_large_file / "all.yaml").write_text(text.replace("name: s250}", "name: t250}"))
    again = loader.load({"all.yaml"})
    assert {o.key.name for o in again.objects} - {o.key.name for o in shared.objects} == {"t250"}


def test_a_large_file_changed_since_the_worker_read_it_is_parsed_here(
    one_large_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _finished(one_large_file)
    with (one_large_file / "all.yaml").open("a") as file:
        file.write(
            "---\napiVersion: v1\nkind: Service\nmetadata: {name: late}\n"
            "spec: {type: ExternalName, externalName: late.example.test}\n"
        )
    loader = ManifestDirectory(one_large_file, parse_worker=worker)
    shared = loader.load()
    assert loader.parsed_by_worker == 0 and worker._process.returncode is not None
    assert "late" in {o.key.name for o in shared.objects}
    _same_load(shared, _alone(one_large_file, monkeypatch))


@pytest.mark.usefixtures("patient")
def test_a_large_file_that_does_not_decode_is_reported_as_alone(
    one_large_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (one_large_file / "all.yaml").read_text()
    broken = text.replace("name: s280}", "name: [s280}", 1)  # late: in the caller's share
    (one_large_file / "all.yaml").write_text(broken)
    shared = ManifestDirectory(one_large_file).load()
    alone = _alone(one_large_file, monkeypatch)
    _same_load(shared, alone)
    assert any("all.yaml" in e.origin and "YAML" in e.message for e in shared.errors)


def test_a_large_file_changed_between_the_scan_and_its_read_shares_nothing(
    one_large_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = _finished(one_large_file)  # it read the file as the scan will find it
    path = one_large_file / "all.yaml"
    read_file = manifests.read_file

    def changed_first(root: str, relative: str, limit: int) -> object:
        if relative == "all.yaml" and "t10}" not in path.read_text():
            path.write_text(path.read_text().replace("name: s10}", "name: t10}"))
        return read_file(root, relative, limit)

    monkeypatch.setattr(manifests, "read_file", changed_first)
    loader = ManifestDirectory(one_large_file, parse_worker=worker)
    shared = loader.load()
    names = {o.key.name for o in shared.objects}
    assert "t10" in names and "s10" not in names and loader.parsed_by_worker == 0
    monkeypatch.setattr(manifests, "read_file", read_file)
    _same_load(shared, _alone(one_large_file, monkeypatch))


@pytest.mark.parametrize(
    "change",
    [
        # A document that does not decode early on: in the worker's share.
        lambda text: text.replace("name: s12}", "name: [s12}", 1),
        # A hostile one there too: nested past the depth limit.
        lambda text: text.replace("name: s12}", "name: s12}\nx: " + "[" * 5000 + "]" * 5000, 1),
        # A control character: not YAML text.
        lambda text: text.replace("name: s12}", "name: s\x0712}", 1),
        # A directive: the file is not cut into pieces, and parsed whole.
        lambda text: "%YAML 1.1\n" + text,
        # Windows line ends, and a document of no objects but a comment.
        lambda text: text.replace("\n", "\r\n").replace("---\r\n", "---\r\n# note\r\n---\r\n", 3),
    ],
    ids=["broken-early", "too-deep", "control-character", "directive", "crlf-and-comments"],
)
@pytest.mark.usefixtures("patient")
def test_a_large_file_unusual_or_hostile_loads_as_alone(
    one_large_file: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[str], str]
) -> None:
    path = one_large_file / "all.yaml"
    path.write_text(change(path.read_text()))
    shared = ManifestDirectory(one_large_file).load()
    _same_load(shared, _alone(one_large_file, monkeypatch))
