"""The real Envoy binary accepts what dragoman emits (`envoy --mode validate`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dragoman.envoy import TranslateOptions, translate
from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_config
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import LISTENER, ROUTE
from tests.support.envoy_checks import translated_bootstrap, validate
from tests.support.envoy_dags import envoy_binary, every_kind_of_dag, messages, with_inline_routes
from tests.support.feature_manifests import every_feature_dag, every_feature_dag_with_dns_check
from tests.support.status_builds import build_text

EXAMPLE = Path(__file__).parents[2] / "examples" / "envoy" / "bootstrap.yaml"
VALIDATE_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def envoy() -> str:
    return envoy_binary()


@pytest.mark.parametrize(
    "options",
    [
        TranslateOptions(),
        TranslateOptions(
            listener_address="127.0.0.1",
            connect_timeout_s=0.5,
            dns_refresh_s=5,
            dns_respect_ttl=False,
            dns_lookup_family="ALL",
        ),
    ],
)
def test_envoy_accepts_translated_resources(
    envoy: str, tmp_path: Path, options: TranslateOptions
) -> None:
    snapshots = translate(every_kind_of_dag(), options)
    for index, (group, snapshot) in enumerate(sorted(snapshots.items())):
        config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
        # Every kind of resource made it in: a DNS cluster, an HTTP/1.1 and an h2c EDS cluster,
        # their CLAs, both listeners.
        names = [c["name"] for c in config["static_resources"]["clusters"]]
        assert len(names) == 6, (group, names)
        assert len(config["static_resources"]["listeners"]) == 2
        path = tmp_path / f"group-{index}.yaml"
        path.write_text(dump_yaml(config))

        validate(envoy, path)


def test_envoy_accepts_the_translation_of_every_feature_from_manifests(
    envoy: str, tmp_path: Path
) -> None:
    """Built from manifests (tests/support/feature_manifests.py), not by hand: what users write."""
    for dag in (every_feature_dag(), every_feature_dag_with_dns_check()):
        for index, (group, snapshot) in enumerate(sorted(translate(dag).items())):
            config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
            assert config["static_resources"]["listeners"], group
            path = tmp_path / f"group-{index}.yaml"
            path.write_text(dump_yaml(config))

            validate(envoy, path)


def test_envoy_accepts_the_example_bootstrap(envoy: str) -> None:
    validate(envoy, EXAMPLE)


@pytest.mark.parametrize(
    ("xds", "resolvers"),
    [
        ("127.0.0.1:18000", []),
        ("dragoman:18000", []),
        ("dragoman:18000", ["127.0.0.1:5353", "[::1]:53"]),
        ("[::1]:18000", ["10.0.0.10"]),
    ],
)
def test_envoy_accepts_generated_bootstraps(
    envoy: str, tmp_path: Path, xds: str, resolvers: list[str]
) -> None:
    config = bootstrap_config(
        xds,
        node_id="n",  # YAML 1.1 reads a bare n as false: must stay a string
        node_cluster="default/demo",
        admin_socket=str(tmp_path / "admin.sock"),
        dns_resolvers=resolvers,
        dns_use_tcp=bool(resolvers),
    )
    path = tmp_path / "bootstrap.yaml"
    path.write_text(dump_yaml(config))

    validate(envoy, path)


def test_validation_reaches_the_inline_routes(envoy: str, tmp_path: Path) -> None:
    """A negative control: a route Envoy must reject fails validation of the same bootstrap."""
    snapshot = translate(every_kind_of_dag())["default/demo"]
    table = messages(snapshot, ROUTE)[0]
    table.virtual_hosts[0].routes[1].match.path_separated_prefix = "/split/"  # must not end in /
    listener = messages(snapshot, LISTENER)[0]
    config = translated_bootstrap(snapshot, tmp_path / "admin.sock")
    config["static_resources"]["listeners"] = [
        to_json_mapping(with_inline_routes(listener, {table.name: table}))
    ]
    path = tmp_path / "broken.yaml"
    path.write_text(dump_yaml(config))

    with pytest.raises(AssertionError, match="path_separated_prefix"):
        validate(envoy, path)


@pytest.mark.parametrize("sds", [False, True], ids=["inline", "sds"])
@pytest.mark.parametrize("xds", ["127.0.0.1:18000", "dragoman.dragoman-system.svc:18000"])
def test_envoy_accepts_the_mutual_tls_bootstrap(
    envoy: str, tmp_path: Path, xds: str, sds: bool
) -> None:
    from dragoman.envoy.bootstrap.envoy_bootstrap import XdsClientTls, xds_tls_secret_files
    from dragoman.security.files_store import write_files

    write_files(tmp_path / "tls", server_names=("dragoman.dragoman-system.svc",), days=1)
    tls = XdsClientTls(
        trusted_ca=str(tmp_path / "tls" / "ca.crt"),
        certificate=str(tmp_path / "tls" / "fleet.crt"),
        private_key=str(tmp_path / "tls" / "fleet.key"),
        sds_directory=str(tmp_path / "sds") if sds else "",
    )
    if sds:
        (tmp_path / "sds").mkdir()
        for name, text in xds_tls_secret_files(tls).items():
            (tmp_path / "sds" / name).write_text(text)
    config = bootstrap_config(
        xds,
        node_id="validate",
        node_cluster="default/demo",
        admin_socket=str(tmp_path / "admin.sock"),
        xds_tls=tls,
    )
    [cluster] = config["static_resources"]["clusters"]
    context = cluster["transport_socket"]["typed_config"]
    common = context["common_tls_context"]
    validation = (
        common["combined_validation_context"]["default_validation_context"]
        if sds
        else common["validation_context"]
    )
    [san] = validation["match_typed_subject_alt_names"]
    host = xds.rsplit(":", 1)[0]
    assert san == {
        "san_type": "IP_ADDRESS" if host[0].isdigit() else "DNS",
        "matcher": {"exact": host},
    }
    assert context.get("sni", "") == ("" if host[0].isdigit() else host)
    path = tmp_path / "bootstrap.yaml"
    path.write_text(dump_yaml(config))
    validate(envoy, path)


RETRY_EXTREMES = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: dragoman
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /shortest}}]
    retry: {attempts: 1, backoff: 0s, codes: [400, 599]}
    timeouts: {backendRequest: 1ms}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /longest}}]
    retry: {attempts: 2147483647, backoff: 99999h99999m99999s99999ms}
    timeouts: {request: 99999h, backendRequest: 99998h}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {value: /defaults}}]
    retry: {}
    backendRefs: [{name: web, port: 80}]
"""


def test_envoy_accepts_retries_at_the_edges_of_what_the_crd_allows(
    envoy: str, tmp_path: Path
) -> None:
    dag = build_text(RETRY_EXTREMES)
    assert dag.problems == ()  # a 0s back-off included: Envoy refuses a zero one
    for index, (_, snapshot) in enumerate(sorted(translate(dag).items())):
        path = tmp_path / f"group-{index}.yaml"
        path.write_text(dump_yaml(translated_bootstrap(snapshot, tmp_path / "admin.sock")))
        validate(envoy, path)
