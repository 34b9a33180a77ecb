"""The `dragoman` commands as a user runs them: render, bootstrap, demo."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from dragoman.cli import main

EXAMPLES = Path(__file__).parents[2] / "examples"


def test_render_prints_resources_grouped_by_type(capsys) -> None:
    assert main(["render", "--manifests", str(EXAMPLES / "manifests")]) == 0
    out, err = capsys.readouterr()
    documents = [d for d in yaml.safe_load_all(out) if d]
    by_group = {d["group"]: d for d in documents}
    assert set(by_group) >= {"", "default/demo"}
    demo = by_group["default/demo"]
    clusters = {c["name"]: c for c in demo["clusters"]}
    assert clusters["default/api/http"]["cluster_type"]["name"] == "envoy.cluster.dns"
    assert clusters["default/web/80"]["type"] == "EDS"
    assert "default/sneaky/9901" not in clusters  # refused, never a cluster
    assert [e["cluster_name"] for e in demo["endpoints"]] == ["default/web/80"]
    assert [listener["name"] for listener in demo["listeners"]] == ["http-8080"]
    assert [r["name"] for r in demo["routes"]] == ["http-8080"]
    # The refusal goes to standard error, naming the route, the field and the Service.
    assert "HTTPRoute/default/demo" in err
    assert "spec.rules[2].backendRefs[0]" in err
    assert "default/sneaky" in err


def test_render_reports_malformed_files_and_renders_the_rest(tmp_path: Path, capsys) -> None:
    (tmp_path / "ok.yaml").write_text((EXAMPLES / "manifests" / "external.yaml").read_text())
    (tmp_path / "bad.yaml").write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Service
            metadata: {name: bad}
            spec:
              ports: [{port: seventy}]
            """
        )
    )
    assert main(["render", "--manifests", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "bad.yaml#1 Service/default/bad" in err and "spec.ports[0].port" in err
    assert "group:" in out


def test_render_rejects_a_missing_directory(tmp_path: Path, capsys) -> None:
    try:
        main(["render", "--manifests", str(tmp_path / "nope")])
    except SystemExit as exit:
        assert exit.code == 2
    else:
        raise AssertionError("a missing directory must be a usage error")
    assert "not a directory" in capsys.readouterr().err


def test_bootstrap_names_the_gateway_and_keeps_admin_off_tcp(capsys) -> None:
    assert (
        main(
            [
                "bootstrap",
                "--xds-address",
                "127.0.0.1:18000",
                "--gateway",
                "shop/front",
                "--dns-resolver",
                "127.0.0.1:5353",
                "--dns-tcp",
            ]
        )
        == 0
    )
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["node"]["cluster"] == "shop/front"
    assert "pipe" in config["admin"]["address"]
    assert "socket_address" not in config["admin"]["address"]
    resolver = config["typed_dns_resolver_config"]["typed_config"]
    assert resolver["resolvers"][0]["socket_address"]["port_value"] == 5353
    assert resolver["dns_resolver_options"]["use_tcp_for_dns_lookups"] is True


def test_bootstrap_sets_the_downstream_connection_limit(capsys) -> None:
    assert main(["bootstrap", "--max-connections", "1000"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    monitor = config["overload_manager"]["resource_monitors"][0]
    assert monitor["typed_config"]["max_active_downstream_connections"] == "1000"
    for bad in ("0", "-3", "many"):
        try:
            main(["bootstrap", "--max-connections", bad])
        except SystemExit as exit:
            assert exit.code == 2
        else:
            raise AssertionError(f"--max-connections {bad} must be a usage error")
        assert "expected a positive integer" in capsys.readouterr().err


def test_example_bootstraps_are_what_the_command_prints(tmp_path: Path) -> None:
    # Each example names the command that regenerates it in its header comment.
    for path in sorted((EXAMPLES / "envoy").glob("*.yaml")):
        text = path.read_text()
        command = " ".join(
            line.lstrip("#").strip().rstrip("\\").strip()
            for line in text.splitlines()
            if line.startswith("#")
            and ("dragoman bootstrap" in line or line.startswith("#     --"))
        ).split()
        assert command[:2] == ["dragoman", "bootstrap"], path
        # The SDS files it writes go to a scratch directory, compared with the example's.
        sds_out = None
        if "--sds-files-out" in command:
            at = command.index("--sds-files-out") + 1
            sds_out, command[at] = EXAMPLES.parent / command[at], str(tmp_path / path.stem)
        printed = subprocess.run(
            [sys.executable, "-m", "dragoman", *command[1:]],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
        assert yaml.safe_load(body) == yaml.safe_load(printed), path
        if sds_out is not None:
            written = {f.name: f.read_text() for f in (tmp_path / path.stem).iterdir()}
            assert written == {f.name: f.read_text() for f in sds_out.iterdir()}, path


def test_demo_check_routes_through_a_real_envoy() -> None:
    """The README's main command, non-interactively: every demo request behaves."""
    result = subprocess.run(
        [sys.executable, "-m", "dragoman", "demo", "--check"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'backend "api", host "api.demo.test"' in result.stdout
    assert "HTTP 500" in result.stdout
    assert "update_rejected counters: 0" in result.stdout


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["bootstrap", "--xds-address", "nope"], "expected host:port"),
        (["bootstrap", "--xds-address", "127.0.0.1:99999"], "port out of range"),
        (["bootstrap", "--dns-resolver", "dns.google"], "expected an IP address"),
        (["bootstrap", "--gateway", "demo"], "expected NAMESPACE/NAME"),
        (["serve", "--manifests", str(EXAMPLES), "--xds-address", "127.0.0.1"], "host:port"),
        (["clients", "--xds-address", "[::1]:0"], "port out of range"),
    ],
)
def test_bad_arguments_are_usage_errors_naming_the_argument(argv, says, capsys) -> None:
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}" in err and says in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (["bootstrap", "--xds-tls-ca", "ca.crt"], "missing --xds-tls-cert, --xds-tls-key"),
        (["clients", "--xds-tls-cert", "c", "--xds-tls-key", "k"], "missing --xds-tls-ca"),
        (["bootstrap", "--xds-server-name", "x"], "--xds-server-name needs"),
    ],
)
def test_client_tls_flags_come_together(command: list[str], says: str, capsys) -> None:
    assert main(command) == 2
    assert says in capsys.readouterr().err


def test_bootstrap_with_tls_names_the_files_as_given(capsys) -> None:
    argv = ["bootstrap", "--xds-address", "dragoman:18000", "--xds-tls-ca", "tls/ca.crt"]
    argv += ["--xds-tls-cert", "tls/a.crt", "--xds-tls-key", "tls/a.key"]
    assert main(argv) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    [cluster] = config["static_resources"]["clusters"]
    common = cluster["transport_socket"]["typed_config"]["common_tls_context"]
    [certificate] = common["tls_certificates"]
    assert certificate["certificate_chain"] == {"filename": "tls/a.crt"}
    # Inline, the files are read once: watched_directory would be ignored (SDS only).
    assert "watched_directory" not in certificate
    assert common["validation_context"]["trusted_ca"] == {"filename": "tls/ca.crt"}
    assert cluster["transport_socket"]["typed_config"]["sni"] == "dragoman"


def test_bootstrap_with_an_sds_directory_writes_the_secret_files(tmp_path: Path, capsys) -> None:
    sds = tmp_path / "sds"
    argv = ["bootstrap", "--xds-address", "dragoman:18000", "--xds-tls-ca", "tls/ca.crt"]
    argv += ["--xds-tls-cert", "tls/a.crt", "--xds-tls-key", "tls/a.key"]
    assert main([*argv, "--xds-tls-sds-dir", str(sds)]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    [cluster] = config["static_resources"]["clusters"]
    common = cluster["transport_socket"]["typed_config"]["common_tls_context"]
    [certificate] = common["tls_certificate_sds_secret_configs"]
    source = certificate["sds_config"]["path_config_source"]
    assert source == {
        "path": str(sds / "xds-client-certificate.yaml"),
        "watched_directory": {"path": str(sds)},
    }
    validation = common["combined_validation_context"]["validation_context_sds_secret_config"]
    assert validation["sds_config"]["path_config_source"]["path"] == str(
        sds / "xds-validation-context.yaml"
    )
    [secret] = yaml.safe_load((sds / "xds-client-certificate.yaml").read_text())["resources"]
    assert secret["name"] == certificate["name"]
    assert secret["tls_certificate"]["certificate_chain"] == {"filename": "tls/a.crt"}
    assert secret["tls_certificate"]["watched_directory"] == {"path": "tls"}
    [secret] = yaml.safe_load((sds / "xds-validation-context.yaml").read_text())["resources"]
    assert secret["name"] == validation["name"]
    assert secret["validation_context"]["trusted_ca"] == {"filename": "tls/ca.crt"}
    # Elsewhere (a ConfigMap's source), with the bootstrap still naming the SDS directory.
    out = tmp_path / "out"
    assert main([*argv, "--xds-tls-sds-dir", "/etc/envoy", "--sds-files-out", str(out)]) == 0
    assert sorted(f.name for f in out.iterdir()) == sorted(f.name for f in sds.iterdir())
    assert main([*argv[:3], "--xds-tls-sds-dir", str(sds)]) == 2
    assert "needs the --xds-tls-* files" in capsys.readouterr().err
