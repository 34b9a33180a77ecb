"""The TLS parameters a BackendTLSPolicy's options set, as Envoy receives them, and accepted by
the real binary (`envoy --mode validate`): every cipher suite and group dragoman knows, and
the versions."""

from __future__ import annotations

from pathlib import Path

import pytest
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, tls_pb2

from dragoman.dag.backend_tls_options import CIPHER_SUITE_NAMES, ECDH_CURVE_NAMES
from dragoman.envoy import translate
from dragoman.envoy.text.yaml_text import dump_yaml
from dragoman.snapshots.resources import CLUSTER
from tests.support.builders import (
    backend_tls_policy,
    external_service,
    gateway,
    gateway_class,
    http_route,
)
from tests.support.envoy_checks import translated_bootstrap, unpack, validate
from tests.support.envoy_dags import envoy_binary, messages
from tests.support.status_builds import build_text


def snapshot_with(options: dict[str, str]):  # type: ignore[no-untyped-def]
    dag = build_text(
        gateway_class(),
        gateway("gw", 80),
        external_service("partner", "api.partner.example", 443),
        backend_tls_policy(
            "partner", "partner", "api.partner.example", well_known="System", options=options
        ),
        http_route("r", "partner", 443),
    )
    return translate(dag)["default/gw"]


@pytest.mark.parametrize(
    "options",
    [
        {
            "dragoman.dev/cipher-suites": ",".join(CIPHER_SUITE_NAMES),
            "dragoman.dev/ecdh-curves": ",".join(ECDH_CURVE_NAMES),
            "dragoman.dev/min-tls-version": "TLSv1_0",
            "dragoman.dev/max-tls-version": "TLSv1_3",
        },
        {"dragoman.dev/min-tls-version": "TLSv1_3"},
    ],
    ids=["every-name", "tls13-only"],
)
def test_envoy_accepts_the_tls_parameters(options: dict[str, str], tmp_path: Path) -> None:
    snapshot = snapshot_with(options)
    [cluster] = [c for c in messages(snapshot, CLUSTER) if c.name.startswith("default/partner")]
    context = unpack(cluster.transport_socket.typed_config)
    assert isinstance(context, tls_pb2.UpstreamTlsContext)
    params = context.common_tls_context.tls_params
    low = options["dragoman.dev/min-tls-version"]
    assert common_pb2.TlsParameters.TlsProtocol.Name(params.tls_minimum_protocol_version) == low
    if "dragoman.dev/cipher-suites" in options:
        assert tuple(params.cipher_suites) == CIPHER_SUITE_NAMES
        assert tuple(params.ecdh_curves) == ECDH_CURVE_NAMES
    else:
        # Envoy's client maximum (TLSv1_2) raised with the minimum, or nothing connects.
        assert params.tls_maximum_protocol_version == common_pb2.TlsParameters.TLSv1_3
    path = tmp_path / "bootstrap.yaml"
    path.write_text(dump_yaml(translated_bootstrap(snapshot, tmp_path / "admin.sock")))

    validate(envoy_binary(), path)


def test_without_options_the_context_has_no_tls_parameters() -> None:
    snapshot = snapshot_with({})
    [cluster] = [c for c in messages(snapshot, CLUSTER) if c.name.startswith("default/partner")]
    context = unpack(cluster.transport_socket.typed_config)
    assert isinstance(context, tls_pb2.UpstreamTlsContext)
    assert not context.common_tls_context.HasField("tls_params")
