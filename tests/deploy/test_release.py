"""The release workflow and the image name: what a tag publishes is what deploy/, the
Makefile and the README name. The workflow's first step (the image it publishes, and its
refusals) runs here for real; the build and push need GitHub and a registry."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kustomize import kustomize

ROOT = Path(__file__).parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VERSION = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
OWNER = "Dragoman-Dev"  # as GitHub spells an owner; the registry path is lowercase
IMAGE = f"ghcr.io/dragoman-dev/dragoman:{VERSION.group(1) if VERSION else '?'}"


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def steps() -> list[dict[str, Any]]:
    [job] = workflow()["jobs"].values()
    result: list[dict[str, Any]] = job["steps"]
    return result


def image_step(tmp_path: Path, tag: str) -> tuple[int, str, str]:
    """The workflow's step naming the image, run as the runner would: (exit, output, log)."""
    [step] = [s for s in steps() if s.get("id") == "image"]
    output = tmp_path / "output"
    output.write_text("")
    result = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=ROOT,
        env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "GITHUB_REF_NAME": tag,
            "GITHUB_REPOSITORY_OWNER": OWNER,
            "GITHUB_OUTPUT": str(output),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, output.read_text(), result.stdout + result.stderr


def test_a_version_tag_triggers_the_release() -> None:
    # YAML 1.1 reads the key `on` as True.
    assert workflow()[True] == {"push": {"tags": ["v*"]}}
    assert workflow()["permissions"] == {"contents": "write", "packages": "write"}


def test_the_release_publishes_the_image_deploy_names(tmp_path: Path) -> None:
    code, output, log = image_step(tmp_path, f"v{VERSION.group(1) if VERSION else ''}")
    assert code == 0, log
    assert output.strip() == f"image={IMAGE}"
    named = {
        container["image"]
        for doc in kustomize(ROOT / "deploy")
        if doc["kind"] in {"Deployment", "Job", "CronJob"}
        for container in _containers(doc)
        if "dragoman" in container["image"]
    }
    assert named == {IMAGE}
    assert f"IMAGE ?= {IMAGE.rsplit(':', 1)[0]}:$(VERSION)" in (ROOT / "Makefile").read_text()
    assert IMAGE in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("tag", ["v0.0.1", "0.1.0-rc1"])
def test_a_tag_that_is_not_the_declared_version_publishes_nothing(tmp_path: Path, tag: str) -> None:
    code, output, log = image_step(tmp_path, tag)
    assert code != 0
    assert output == ""
    assert "pyproject.toml says version" in log


def test_the_image_is_pushed_with_an_sbom_and_the_manifest_attached() -> None:
    by_action = {s["uses"].split("@")[0]: s for s in steps() if "uses" in s}
    build = by_action["docker/build-push-action"]["with"]
    assert build["push"] is True and build["sbom"] is True
    assert build["tags"] == "${{ steps.image.outputs.image }}"
    assert by_action["docker/login-action"]["with"]["registry"] == "ghcr.io"
    sbom = by_action["anchore/sbom-action"]["with"]
    runs = " ".join(s.get("run", "") for s in steps())
    assert "kubectl kustomize deploy/ > install.yaml" in runs
    assert f"install.yaml {sbom['output-file']}" in runs
    assert "gh release create" in runs


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod = spec["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]
