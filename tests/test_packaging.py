"""The package's metadata: one version (pyproject.toml, read through the installed
metadata), a LICENSE file that is the license pyproject.toml declares."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import dragoman

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_comes_from_the_package_metadata() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert dragoman.__version__ == version("dragoman") == declared
    printed = subprocess.run(
        [sys.executable, "-m", "dragoman", "--version"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert printed.strip() == f"dragoman {declared}"


def test_the_license_file_is_the_declared_license() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_make_demo_installs_the_demo_extra_alone_and_make_test_the_test_extra() -> None:
    """`make demo` needs no linter or test runner: it installs the `demo` extra under a stamp
    of its own; the test targets install `test` (which holds the demo's too)."""

    def planned(target: str) -> str:
        run = subprocess.run(
            ["make", "-n", "-B", target, "VENV=/nonexistent-venv"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return run.stdout

    demo, test = planned("demo"), planned("test")
    assert "pip install --quiet -e '.[demo]'" in demo
    assert ".[test]" not in demo
    assert "/nonexistent-venv/bin/dragoman demo" in demo
    assert "pip install --quiet -e '.[test]'" in test
    assert "/nonexistent-venv/bin/pytest" in test
    # The grpc-js proxyless client, as its lock file pins it, for the tests alone.
    assert "cd tests/grpcjs && npm ci" in test and "npm" not in demo
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = pyproject["project"]["optional-dependencies"]
    assert set(extras["demo"]) <= set(extras["test"])  # one venv serves both


def test_the_readme_says_how_to_put_dragoman_on_the_path() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and ". .venv/bin/activate" in readme


def test_ci_installs_node_and_the_grpcjs_client_before_the_tests() -> None:
    """The grpc-js tests fail (never skip) without Node.js: CI installs it when missing."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "missing+=(nodejs)" in script and "missing+=(npm)" in script
    assert script.index("npm ci") < script.index("make test")
