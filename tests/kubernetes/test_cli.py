"""`dragoman serve --kubernetes`: every flag reaches the configuration the server runs with,
and bad leader-election timings stop it before it starts."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest

from dragoman.cli import main
from dragoman.dag.options import DEFAULT_CONTROLLER_NAME
from dragoman.kubernetes import runtime
from dragoman.kubernetes.leader import LeaseSettings
from dragoman.kubernetes.runtime import KubernetesConfig


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[KubernetesConfig]:
    """The configurations `serve --kubernetes` would have run with (nothing is run)."""
    configs: list[KubernetesConfig] = []

    async def serve(config: KubernetesConfig) -> None:
        configs.append(config)
        await asyncio.sleep(0)

    monkeypatch.setattr(runtime, "serve_kubernetes", serve)
    monkeypatch.delenv("POD_NAME", raising=False)
    monkeypatch.setenv("POD_NAMESPACE", "from-pod")
    return configs


def serve(*flags: str) -> int:
    return main(["serve", "--kubernetes", "--xds-address", "127.0.0.1:18000", *flags])


def test_every_kubernetes_flag_reaches_the_configuration(
    started: list[KubernetesConfig], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    code = serve(
        f"--kubeconfig={kubeconfig}",
        "--context=staging",
        "--namespace=a",
        "--namespace=b",
        "--namespace=a",
        "--gateway-class=internal",
        "--controller-name=example.com/edge",
        "--metrics-address=127.0.0.1:9999",
        "--envoy-service=edge/envoy",
        "--gateway-address=203.0.113.7",
        "--leader-election-name=edge-leader",
        "--leader-election-namespace=edge",
        "--leader-election-identity=me",
        "--lease-duration=30",
        "--renew-deadline=20",
        "--retry-period=4",
        "--listener-address=127.0.0.2",
    )
    assert code == 0
    [config] = started
    assert (config.kubeconfig, config.context) == (kubeconfig, "staging")
    assert config.namespaces == ("a", "b")  # each once, in order
    assert (config.gateway_class, config.controller_name) == ("internal", "example.com/edge")
    assert config.ops_address == "127.0.0.1:9999"
    assert config.build_options.address_service == ("edge", "envoy")
    assert config.build_options.gateway_addresses == ("203.0.113.7",)
    assert config.xds_address == "127.0.0.1:18000"
    assert config.translate_options.listener_address == "127.0.0.2"
    assert config.lease == LeaseSettings(
        identity="me",
        name="edge-leader",
        namespace="edge",
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=4.0,
    )


def test_defaults(started: list[KubernetesConfig]) -> None:
    assert serve() == 0
    [config] = started
    assert config.controller_name == DEFAULT_CONTROLLER_NAME
    assert (config.namespaces, config.gateway_class, config.kubeconfig) == ((), None, None)
    assert config.ops_address == "127.0.0.1:8002"
    lease = config.lease
    assert lease is not None
    assert (lease.name, lease.namespace) == ("dragoman-leader", "from-pod")
    assert (lease.lease_duration, lease.renew_deadline, lease.retry_period) == (15.0, 10.0, 2.0)
    assert lease.identity  # hostname_pid outside a pod


def test_no_leader_election_and_no_operations_endpoint(started: list[KubernetesConfig]) -> None:
    assert serve("--no-leader-election", "--metrics-address=off") == 0
    [config] = started
    assert config.lease is None and config.ops_address is None


@pytest.mark.parametrize(
    "timings",
    [
        ("--lease-duration=5", "--renew-deadline=10"),
        ("--renew-deadline=2", "--retry-period=2"),
        ("--lease-duration=0.5", "--renew-deadline=0.3", "--retry-period=0.1"),
    ],
)
def test_bad_lease_timings_stop_before_starting(
    started: list[KubernetesConfig], timings: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    assert serve(*timings) == 2
    assert started == []
    assert "leader election" in caplog.text


def test_kubernetes_flags_need_kubernetes(tmp_path: Path, started: list[KubernetesConfig]) -> None:
    code = main(["serve", "--manifests", str(tmp_path), "--namespace=a"])
    assert code == 2 and started == []


def test_provision_flags_reach_the_configuration(started: list[KubernetesConfig]) -> None:
    assert serve() == 0 and started[-1].provision is None
    assert serve("--provision") == 0
    provision = started[-1].provision
    assert provision is not None
    assert provision.xds_address == "dragoman.dragoman-system.svc.cluster.local:18000"
    code = serve(
        "--provision",
        "--provision-xds-address=dragoman.infra.svc:18000",
        "--provision-drain-image=registry.example.com/dragoman:1.0.0",
    )
    assert code == 0
    provision = started[-1].provision
    assert provision is not None
    assert provision.xds_address == "dragoman.infra.svc:18000"
    assert provision.drain_image == "registry.example.com/dragoman:1.0.0"


def test_provision_needs_kubernetes_and_a_leader(
    tmp_path: Path, started: list[KubernetesConfig], caplog: pytest.LogCaptureFixture
) -> None:
    assert main(["serve", "--manifests", str(tmp_path), "--provision"]) == 2
    assert serve("--provision", "--no-leader-election") == 2
    assert started == []
    assert "only the leader provisions" in caplog.text


def test_the_provision_ca_secret_turns_issued_certificates_on(
    started: list[KubernetesConfig],
) -> None:
    assert serve("--provision") == 0
    provision = started[-1].provision
    assert provision is not None and provision.ca_secret == ""
    code = serve(
        "--provision",
        "--provision-ca-secret=dragoman-system/dragoman-xds-ca",
        "--provision-renew-before=720h",
    )
    assert code == 0
    provision = started[-1].provision
    assert provision is not None
    assert provision.ca_secret == "dragoman-system/dragoman-xds-ca"
    assert provision.renew_before == datetime.timedelta(days=30)
    assert serve("--provision", "--provision-ca-secret=a/b") == 0
    provision = started[-1].provision
    assert provision is not None and provision.renew_before == datetime.timedelta(days=30)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--provision-ca-secret=a/b",), "need --provision"),
        (("--provision", "--provision-renew-before=10d"), "and each other"),
        (("--provision", "--provision-ca-secret=a/b", "--provision-renew-before=90d"), "90 days"),
    ],
)
def test_issued_certificate_flags_that_cannot_work_stop_before_starting(
    started: list[KubernetesConfig],
    caplog: pytest.LogCaptureFixture,
    flags: tuple[str, ...],
    said: str,
) -> None:
    assert serve(*flags) == 2
    assert started == []
    assert said in caplog.text
