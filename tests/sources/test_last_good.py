"""The last good version of each manifest file, kept on disk for the next process."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dragoman.sources.last_good import LastGoodFiles
from dragoman.sources.manifests import ManifestDirectory
from tests.support.builders import service, yaml_text

TYPO = "kind: Service\nspec: {ports: [\n"


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def names(directory: ManifestDirectory) -> list[str]:
    return sorted(o.meta.name for o in directory.load().objects)


def kept(state: Path) -> LastGoodFiles:
    return LastGoodFiles(state)


def test_a_new_process_serves_the_last_good_version_of_a_broken_file(tmp_path: Path) -> None:
    manifests, state = tmp_path / "manifests", tmp_path / "state"
    write(manifests, "a.yaml", yaml_text(service("a", namespace=None)))
    write(manifests, "sub/b.yaml", yaml_text(service("b", namespace=None)))
    first = kept(state)
    assert names(ManifestDirectory(manifests, last_good=first)) == ["a", "b"]
    first.close()
    write(manifests, "a.yaml", TYPO)  # broken while no one runs
    (manifests / "sub" / "b.yaml").unlink()
    (manifests / "sub" / "b.yaml").symlink_to("b.yaml")  # a loop: cannot be read

    second = kept(state)
    directory = ManifestDirectory(manifests, last_good=second)
    result = directory.load()
    assert sorted(o.meta.name for o in result.objects) == ["a", "b"]
    messages = sorted(e.message for e in result.errors)
    assert all(m.endswith("(still serving its previous version (1 objects))") for m in messages)
    assert len(messages) == 2
    # Fixed: the new version is served, and kept.
    write(manifests, "a.yaml", yaml_text(service("a2", namespace=None)))
    assert sorted(o.meta.name for o in directory.load({"a.yaml"}).objects) == ["a2", "b"]
    second.close()
    write(manifests, "a.yaml", TYPO)
    third = kept(state)
    assert "a2" in names(ManifestDirectory(manifests, last_good=third))
    third.close()


def test_without_a_state_a_new_process_skips_the_broken_file(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", TYPO)
    assert names(ManifestDirectory(tmp_path)) == []


def test_a_damaged_entry_is_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifests, state = tmp_path / "manifests", tmp_path / "state"
    write(manifests, "a.yaml", yaml_text(service("a", namespace=None)))
    first = kept(state)
    ManifestDirectory(manifests, last_good=first).load()
    first.close()
    (entry,) = (state / "manifests").glob("*.entry")
    whole = entry.read_bytes()
    write(manifests, "a.yaml", TYPO)
    for damaged in (whole[: len(whole) - 7], whole.replace(b"name: a", b"name: z")):
        entry.write_bytes(damaged)  # cut short by a crash, or altered
        caplog.clear()
        with caplog.at_level(logging.WARNING, "dragoman.sources"):
            assert names(ManifestDirectory(manifests, last_good=kept(state))) == []
        assert any("is damaged; ignoring it" in m for m in caplog.messages)


def test_a_write_cut_short_leaves_the_previous_entry(tmp_path: Path) -> None:
    manifests, state = tmp_path / "manifests", tmp_path / "state"
    write(manifests, "a.yaml", yaml_text(service("a", namespace=None)))
    first = kept(state)
    ManifestDirectory(manifests, last_good=first).load()
    first.close()
    (entry,) = (state / "manifests").glob("*.entry")
    entry.with_suffix(".tmp").write_bytes(b'dragoman-last-good 1\n{"pa')  # a crash mid-write
    write(manifests, "a.yaml", TYPO)
    assert names(ManifestDirectory(manifests, last_good=kept(state))) == ["a"]
    assert not entry.with_suffix(".tmp").exists()


def test_entries_go_with_their_files_and_are_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manifests, state = tmp_path / "manifests", tmp_path / "state"
    for name in "abc":
        write(manifests, f"{name}.yaml", yaml_text(service(name, namespace=None)))
    first = kept(state)
    directory = ManifestDirectory(manifests, last_good=first)
    directory.load()
    (manifests / "a.yaml").unlink()
    directory.load({"a.yaml"})
    first.close()
    assert len(list((state / "manifests").glob("*.entry"))) == 2
    (manifests / "b.yaml").unlink()  # while no one runs
    second = kept(state)
    ManifestDirectory(manifests, last_good=second).load()
    second.close()
    assert len(list((state / "manifests").glob("*.entry"))) == 1

    size = len(yaml_text(service("c", namespace=None)).encode())
    small = LastGoodFiles(tmp_path / "small", max_bytes=size + 10)
    with caplog.at_level(logging.WARNING, "dragoman.sources"):
        ManifestDirectory(manifests, last_good=small).load()
        write(manifests, "d.yaml", yaml_text(service("d", namespace=None)))
        ManifestDirectory(manifests, last_good=small).load()
    small.close()
    assert len(list((tmp_path / "small" / "manifests").glob("*.entry"))) == 1
    assert any("newer versions are not kept" in m for m in caplog.messages)
