"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine): check that they
parse and that every file and command they name exists."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from dragoman.cli import _parser

ROOT = Path(__file__).parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_services_and_images() -> None:
    services = _compose()["services"]
    assert set(services) == {"dragoman", "envoy", "echo"}
    assert services["envoy"]["image"].startswith("envoyproxy/envoy:v1.40")
    assert services["dragoman"]["build"] == "."
    assert services["echo"]["build"] == "."


def test_compose_mounts_name_files_that_exist() -> None:
    for name, service in _compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert (ROOT / source).exists(), f"{name}: {source}"


def test_compose_dragoman_command_parses() -> None:
    service = _compose()["services"]["dragoman"]
    command = list(service["command"])
    # /manifests is the mounted examples/compose directory inside the container.
    (mount,) = service["volumes"]
    source, target = mount.split(":")[:2]
    command[command.index(target)] = str(ROOT / source)
    args = _parser().parse_args(command)
    assert args.command == "serve"
    assert args.xds_address == "0.0.0.0:18000"


def test_compose_echo_backend_is_the_external_name_target() -> None:
    services = _compose()["services"]
    echo = services["echo"]
    assert echo["entrypoint"] == ["python", "-m", "dragoman.demo.backends"]
    from dragoman.demo.backends import main as backend_main  # the module the entrypoint runs

    assert callable(backend_main)
    aliases = echo["networks"]["default"]["aliases"]
    manifests = list(yaml.safe_load_all((ROOT / "examples/compose/manifests.yaml").read_text()))
    external = next(m for m in manifests if m["kind"] == "Service")
    assert external["spec"]["externalName"] in aliases
    assert external["spec"]["ports"][0]["port"] == int(echo["command"][-1])


def test_compose_envoy_bootstrap_points_at_the_dragoman_service() -> None:
    services = _compose()["services"]
    bootstrap_path = services["envoy"]["volumes"][0].split(":")[0]
    bootstrap = yaml.safe_load((ROOT / bootstrap_path).read_text())
    xds = bootstrap["static_resources"]["clusters"][0]
    address = xds["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert address["socket_address"]["address"] == "dragoman"
    assert address["socket_address"]["port_value"] == 18000
    assert services["envoy"]["command"][:3] == ["envoy", "-c", "/etc/envoy/bootstrap.yaml"]


def test_dockerfile_copies_what_exists_and_runs_dragoman() -> None:
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    for line in lines:
        if line.startswith("COPY "):
            *sources, _ = shlex.split(line)[1:]
            for source in sources:
                assert (ROOT / source).exists(), source
    assert 'ENTRYPOINT ["dragoman"]' in lines
