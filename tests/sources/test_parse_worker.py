"""A first load of many files shared with a worker process: the same objects, errors and
origins as a load in one process, and the same when the worker fails."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from dragoman.sources import manifests, parse_worker
from dragoman.sources.manifests import LoadResult, ManifestDirectory

FILES = 240


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(manifests, "SHARE_FROM", 100)
    monkeypatch.setattr(manifests, "idle_cpus", lambda: 1.5)  # whatever runs the tests
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


def _alone(path: Path, monkeypatch: pytest.MonkeyPatch) -> LoadResult:
    with monkeypatch.context() as patch:
        patch.setattr(manifests, "SHARE_FROM", 10**9)
        loader = ManifestDirectory(path)
        result = loader.load()
        assert loader.parsed_by_worker == 0
        return result


def _same(shared: LoadResult, alone: LoadResult) -> None:
    assert shared.objects == alone.objects
    assert shared.errors == alone.errors
    assert dict(shared.origins) == dict(alone.origins)
    assert shared.files == alone.files == FILES


def test_a_worker_parses_a_share_of_a_first_load(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = ManifestDirectory(directory)
    shared = loader.load()
    assert 0 < loader.parsed_by_worker < FILES
    _same(shared, _alone(directory, monkeypatch))
    assert len(shared.errors) >= 3 and any("invalid YAML" in e.message for e in shared.errors)
    # A later load reads only what changed, in this process.
    (directory / "d0" / "f0000.yaml").write_text("apiVersion: v1\nkind: Namespace\n")
    again = loader.load()
    assert len(again.objects) == len(shared.objects) - 2


@pytest.mark.parametrize(
    "command",
    [
        ("-c", "import sys; sys.exit(3)"),  # dies
        ("-c", "print('not a pickle')"),  # answers nonsense
        ("-c", "import pickle, sys; sys.stdout.buffer.write(pickle.dumps([None]))"),  # too few
    ],
    ids=["dies", "nonsense", "too-few"],
)
def test_a_failing_worker_leaves_its_files_to_the_caller(
    directory: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, str]
) -> None:
    monkeypatch.setattr(parse_worker, "WORKER_COMMAND", command)
    loader = ManifestDirectory(directory)
    shared = loader.load()
    assert loader.parsed_by_worker == 0
    _same(shared, _alone(directory, monkeypatch))


def test_no_worker_when_debug_logs_are_on(
    directory: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dragoman.sources")
    loader = ManifestDirectory(directory)
    loader.load()
    assert loader.parsed_by_worker == 0


def test_no_worker_without_an_idle_cpu(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifests, "idle_cpus", lambda: 0.7)
    loader = ManifestDirectory(directory)
    loader.load()
    assert loader.parsed_by_worker == 0


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
