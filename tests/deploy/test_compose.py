"""docker-compose.yml and the Dockerfile cannot run here (no Docker engine): check that they
parse and that every file and command they name exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from cryptography import x509

from dragoman import cli
from dragoman.cli import _parser
from dragoman.commands.common import xds_server_tls

ROOT = Path(__file__).parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_services_and_images() -> None:
    services = _compose()["services"]
    assert set(services) == {"certgen", "dragoman", "envoy", "echo"}
    assert services["envoy"]["image"].startswith("envoyproxy/envoy:v1.40")
    assert services["dragoman"]["build"] == "."
    assert services["echo"]["build"] == "."
    assert services["certgen"]["build"] == "."


def test_compose_mounts_name_files_that_exist() -> None:
    compose = _compose()
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source in compose.get("volumes", {}):
                continue  # a named volume
            assert (ROOT / source).exists(), f"{name}: {source}"


def _in_container(command: list[str], mounts: dict[str, Path]) -> list[str]:
    """`command` with each container path under a mount replaced by the local one."""
    result = []
    for argument in command:
        for target, local in mounts.items():
            argument = argument.replace(target, str(local))
        result.append(argument)
    return result


def test_compose_runs_xds_over_mutual_tls(tmp_path: Path) -> None:
    """certgen's command writes what dragoman's command and Envoy's bootstrap name."""
    services = _compose()["services"]
    tls = tmp_path / "tls"
    mounts = {"/tls": tls, "/manifests": ROOT / "examples/compose"}
    certgen = _in_container(list(services["certgen"]["command"]), mounts)
    assert cli.main(certgen) == 0
    args = _parser().parse_args(_in_container(list(services["dragoman"]["command"]), mounts))
    assert args.command == "serve"
    assert args.xds_address == "0.0.0.0:18000"
    assert not args.xds_insecure
    files = xds_server_tls(args)  # every file there, the server pair signed by the CA
    assert files is not None
    bootstrap_path = services["envoy"]["volumes"][0].split(":")[0]
    # The bootstrap names the SDS files, mounted from the repository; they name the files.
    sds_mounts = [v.split(":") for v in services["envoy"]["volumes"] if "compose-sds" in v]
    [(sds_source, sds_target, _)] = sds_mounts
    text = (ROOT / bootstrap_path).read_text()
    sds_files = set(re.findall(r"path: (" + re.escape(sds_target) + r"/\S+\.yaml)", text))
    assert len(sds_files) == 2
    sds_text = "".join(
        (ROOT / sds_source / Path(path).relative_to(sds_target)).read_text() for path in sds_files
    )
    named = set(re.findall(r"filename: (/tls/\S+)", sds_text))
    assert named == {
        "/tls/ca.crt",
        "/tls/gateway-default-demo.crt",
        "/tls/gateway-default-demo.key",
    }
    for path in named:
        assert (tls / Path(path).name).is_file()
    # The server certificate carries the name Envoy checks (the compose service name).
    assert "exact: dragoman" in text
    server = x509.load_pem_x509_certificate(files.certificate.read_bytes())
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "dragoman" in sans.get_values_for_type(x509.DNSName)


def test_compose_echo_backend_is_the_external_name_target() -> None:
    services = _compose()["services"]
    echo = services["echo"]
    assert echo["entrypoint"] == ["python", "-m", "dragoman.demo.sample_backends"]
    from dragoman.demo.sample_backends import main as backend_main  # the module the entrypoint runs

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
        if line.startswith("COPY ") and "--from=" not in line:  # not from another stage
            *sources, _ = shlex.split(line)[1:]
            for source in sources:
                assert (ROOT / source).exists(), source
    assert 'ENTRYPOINT ["dragoman"]' in lines
