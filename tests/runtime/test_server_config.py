"""The server configuration file: what it sets, how every problem is named, and the commands
that stop on a bad one (`serve`, `render`, `status` with --config)."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from dragoman.dag.model import HappyEyeballs
from dragoman.dag.options import BuildOptions
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.runtime.server_config import (
    DEFAULT_CONFIG,
    ConfigError,
    DnsCheckSettings,
    load_config,
    parse_config,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "dragoman-config.yaml"

FULL = """
clusterDomain: corp.example
externalNames:
  allowedDomains: [example.com, "*.partner.net"]
  deniedDomains: [internal.example.com]
  allowedNetworks: [203.0.113.0/24]
  deniedNetworks: [10.0.0.0/8, "fd00::/8"]
  dnsCheck:
    enabled: true
    resolvers: ["10.96.0.10", "127.0.0.1:5353", "[fd00::a]:53"]
    timeout: 1500ms
    minInterval: 10s
    maxInterval: 10m
    grace: 45s
dnsDefaults:
  refreshRate: 1m
  respectTTL: false
  lookupFamily: all
  minRefreshRate: 10s
  happyEyeballsFirstFamily: v6
  happyEyeballsFirstFamilyCount: 2
upstreamTLS: {systemCABundle: /etc/pki/tls/certs/ca-bundle.crt}
endpoints: {allowedNetworks: [127.0.0.0/8, "::1/128"]}
"""


def test_a_full_file() -> None:
    config = parse_config(yaml.safe_load(FULL), "full.yaml")

    assert config.cluster_domain == "corp.example"
    policy = config.external_names
    assert [r.text for r in policy.allowed_domains] == ["example.com", "*.partner.net"]
    assert [r.text for r in policy.denied_domains] == ["internal.example.com"]
    assert policy.allowed_networks == (ipaddress.ip_network("203.0.113.0/24"),)
    assert policy.denied_networks == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
    )
    assert policy.source == "full.yaml"
    assert config.dns_check == DnsCheckSettings(
        enabled=True,
        resolvers=(("10.96.0.10", 53), ("127.0.0.1", 5353), ("fd00::a", 53)),
        timeout_s=1.5,
        min_interval_s=10,
        max_interval_s=600,
        grace_s=45,
    )
    build = config.build_options(BuildOptions(controller_name="x/y"))
    assert (build.cluster_domain, build.dns_check, build.controller_name) == (
        "corp.example",
        True,
        "x/y",
    )
    assert build.external_names is policy
    assert build.endpoint_networks == (
        ipaddress.ip_network("127.0.0.0/8"),
        ipaddress.ip_network("::1/128"),
    )
    translate = config.translate_options(TranslateOptions(listener_address="127.0.0.1"))
    assert translate == TranslateOptions(
        listener_address="127.0.0.1",
        dns_refresh_s=60,
        dns_respect_ttl=False,
        dns_lookup_family="ALL",
        dns_min_refresh_s=10,
        dns_happy_eyeballs=HappyEyeballs("V6", 2),
        system_ca_file="/etc/pki/tls/certs/ca-bundle.crt",
    )


@pytest.mark.parametrize("document", [None, {}])
def test_an_empty_file_is_the_defaults(document: Any) -> None:
    config = parse_config(document)

    assert config.build_options() == BuildOptions()
    assert config.translate_options() == TranslateOptions()
    assert config.dns_check.enabled is False


def test_the_defaults_change_nothing() -> None:
    assert DEFAULT_CONFIG.build_options() == BuildOptions()
    assert DEFAULT_CONFIG.translate_options() == TranslateOptions()


PROBLEMS = [
    # (YAML, field, words)
    ("clusterDomain: Cluster.Local", "clusterDomain", "DNS-1123 subdomain"),
    ("externalName: {}", "externalName", "unknown setting"),
    ("externalNames: {allowDomains: [a.com]}", "externalNames.allowDomains", "unknown setting"),
    ("externalNames: {allowedDomains: example.com}", "externalNames.allowedDomains", "a list"),
    ("externalNames: {allowedDomains: ['ex ample.com']}", "externalNames.allowedDomains[0]",
     "a domain such as"),
    ("externalNames: {deniedDomains: ['*.*.com']}", "externalNames.deniedDomains[0]",
     "a domain such as"),
    ("externalNames: {deniedNetworks: [10.0.0.1/8]}", "externalNames.deniedNetworks[0]",
     "host bits set"),
    ("externalNames: {allowedNetworks: [nonsense]}", "externalNames.allowedNetworks[0]",
     "expected a CIDR"),
    ("externalNames: {dnsCheck: {enabled: yes please}}", "externalNames.dnsCheck.enabled",
     "true or false"),
    ("externalNames: {dnsCheck: {resolvers: [dns.example.com]}}",
     "externalNames.dnsCheck.resolvers[0]", "an IP address"),
    ("externalNames: {dnsCheck: {timeout: 5}}", "externalNames.dnsCheck.timeout", "a string"),
    ("externalNames: {dnsCheck: {timeout: 5x}}", "externalNames.dnsCheck.timeout", "a duration"),
    ("externalNames: {dnsCheck: {timeout: 2m}}", "externalNames.dnsCheck.timeout",
     "must be from 0.1s to 60s"),
    # Exceptions to the always-denied endpoint ranges only: anything else needs none.
    ("endpoints: {allowedNetworks: [10.0.0.0/8]}", "endpoints.allowedNetworks[0]",
     "must lie inside one of the always-denied ranges"),
    ("endpoints: {allowedNetworks: [0.0.0.0/0]}", "endpoints.allowedNetworks[0]",
     "must lie inside one of the always-denied ranges"),
    ("endpoints: {deniedNetworks: []}", "endpoints.deniedNetworks", "unknown setting"),
    ("externalNames: {dnsCheck: {grace: 25h}}", "externalNames.dnsCheck.grace",
     "must be from 0s to 86400s"),
    ("externalNames: {dnsCheck: {minInterval: 1m, maxInterval: 30s}}",
     "externalNames.dnsCheck.maxInterval", "not be shorter than minInterval"),
    # Address rules need the DNS check: without it they would look in force, and refuse nothing.
    ("externalNames: {deniedNetworks: [10.0.0.0/8]}", "externalNames.deniedNetworks",
     "takes effect only with the DNS check on"),
    ("externalNames: {allowedNetworks: [203.0.113.0/24], dnsCheck: {enabled: false}}",
     "externalNames.allowedNetworks", "takes effect only with the DNS check on"),
    ("dnsDefaults: {lookupFamily: ipv4}", "dnsDefaults.lookupFamily", "one of"),
    ("dnsDefaults: {refreshRate: 0s}", "dnsDefaults.refreshRate", "must be from 1s"),
    ("dnsDefaults: {minRefreshRate: 500ms}", "dnsDefaults.minRefreshRate", "must be from 1s"),
    ("dnsDefaults: {happyEyeballsFirstFamily: ipv6}", "dnsDefaults.happyEyeballsFirstFamily",
     "one of"),
    ("dnsDefaults: {happyEyeballsFirstFamilyCount: 0}",
     "dnsDefaults.happyEyeballsFirstFamilyCount", "from 1 to 64"),
    ("upstreamTLS: {systemCABundle: certs/ca.pem}", "upstreamTLS.systemCABundle",
     "an absolute path"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "field", "words"), PROBLEMS)
def test_problems_name_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(yaml.safe_load(text), "bad.yaml")

    matching = [message for path, message in raised.value.problems if path == field]
    assert matching, raised.value.problems
    assert any(words in message for message in matching), matching
    assert f"bad.yaml: {field}: " in str(raised.value)


def test_every_problem_is_reported_at_once() -> None:
    text = "foo: 1\nexternalNames: {deniedNetworks: [x], dnsCheck: {timeout: y}}\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(yaml.safe_load(text), "bad.yaml")

    assert [path for path, _ in raised.value.problems] == [
        "foo",
        "externalNames.deniedNetworks[0]",
        "externalNames.dnsCheck.timeout",
    ]


def test_files_that_are_not_yaml_or_not_mappings(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("externalNames: [unclosed\n")
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n")

    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(broken)
    with pytest.raises(ConfigError, match="expected a mapping, got a list"):
        load_config(listing)
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "missing.yaml")


def test_the_example_file_is_valid() -> None:
    config = load_config(EXAMPLE)

    assert config.external_names.denied_domains
    assert config.dns_check.enabled is False  # the example shows the setting, off


def run_dragoman(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dragoman", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", ["serve", "render", "status"])
def test_commands_stop_on_a_bad_file_naming_the_field(command: str, tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    config = tmp_path / "dragoman.yaml"
    config.write_text("externalNames:\n  dnsCheck: {timeout: soon}\n")
    args = [command, "--manifests", str(manifests), "--config", str(config)]
    if command == "serve":
        args += ["--xds-address", "127.0.0.1:1"]  # never reached: the file stops it first

    result = run_dragoman(*args)

    assert result.returncode == 2, result.stderr
    assert f"{config}: externalNames.dnsCheck.timeout: expected a duration" in result.stderr
    assert result.stdout == ""


def test_render_applies_the_policy_from_the_file(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "all.yaml").write_text(
        textwrap.dedent(
            """
            apiVersion: gateway.networking.k8s.io/v1
            kind: Gateway
            metadata: {name: gw}
            spec: {gatewayClassName: dragoman, listeners: [{name: http, protocol: HTTP, port: 80}]}
            ---
            apiVersion: v1
            kind: Service
            metadata: {name: db}
            spec: {type: ExternalName, externalName: db.internal.example.com, ports: [{port: 80}]}
            ---
            apiVersion: gateway.networking.k8s.io/v1
            kind: HTTPRoute
            metadata: {name: r}
            spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: db, port: 80}]}]}
            """
        )
    )
    config = tmp_path / "dragoman.yaml"
    config.write_text("externalNames: {deniedDomains: [internal.example.com]}\n")

    plain = run_dragoman("render", "--manifests", str(manifests))
    refused = run_dragoman("render", "--manifests", str(manifests), "--config", str(config))

    assert "default/db/80" in plain.stdout
    assert refused.returncode == 0
    assert "default/db/80" not in refused.stdout
    assert "matches the denied domain 'internal.example.com'" in refused.stderr
    assert "(NotAllowedByPolicy)" in refused.stderr


def test_a_dns_check_without_resolvers_needs_the_system_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dragoman.runtime.server_config

    path = tmp_path / "dragoman.yaml"
    path.write_text("externalNames: {dnsCheck: {enabled: true}}\n")
    monkeypatch.setattr(dragoman.runtime.server_config, "_system_resolvers", lambda: False)

    with pytest.raises(ConfigError) as raised:
        load_config(path)

    [(field, message)] = raised.value.problems
    assert field == "externalNames.dnsCheck.resolvers"
    assert "no resolver configuration" in message
    monkeypatch.setattr(dragoman.runtime.server_config, "_system_resolvers", lambda: True)
    assert load_config(path).dns_check.enabled is True


def test_hostile_config_files_are_errors_not_crashes(tmp_path: Path) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("externalNames: " + "[" * 40_000 + "]" * 40_000 + "\n")
    two = tmp_path / "two.yaml"
    two.write_text("externalNames: {}\n---\nexternalNames: {}\n")

    with pytest.raises(ConfigError, match="nested more than 100 levels deep"):
        load_config(deep)
    with pytest.raises(ConfigError, match="more than one YAML document"):
        load_config(two)
