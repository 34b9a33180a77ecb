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
