"""`serve --xds-max-connection-age`, `--xds-stall-timeout` and `--xds-max-connections`: into
XdsLimits and into gRPC's options."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dragoman.cli import _parser
from dragoman.commands.serve import connection_count, duration, xds_limits
from dragoman.xds.server.limits import XdsLimits


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800.0), ("90s", 90.0), ("1h", 3600.0), ("500ms", 0.5), ("0", 0.0), ("2.5", 2.5)],
)
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "-1s", "soon", "inf", "nan", "1d"])
def test_not_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def grpc_option(limits: XdsLimits, name: str) -> int | None:
    return dict(limits.grpc_options()).get(name)


def test_the_connection_age_and_its_grace_become_grpc_options() -> None:
    limits = xds_limits(
        argparse.Namespace(
            xds_max_connection_age=1800.0, xds_stall_timeout=60.0, xds_max_connections=5000
        )
    )
    assert grpc_option(limits, "grpc.max_connection_age_ms") == 1_800_000
    assert grpc_option(limits, "grpc.max_connection_age_grace_ms") == 10_000
    assert limits.stall_timeout_s == 60.0


def test_age_zero_never_closes_a_connection() -> None:
    limits = xds_limits(
        argparse.Namespace(
            xds_max_connection_age=0.0, xds_stall_timeout=120.0, xds_max_connections=5000
        )
    )
    assert limits.max_connection_age_s is None
    assert grpc_option(limits, "grpc.max_connection_age_ms") is None


def test_the_defaults(tmp_path: Path) -> None:
    args = _parser().parse_args(["serve", "--manifests", str(tmp_path)])
    assert args.xds_max_connection_age == 1800.0 and args.xds_stall_timeout == 120.0
    assert args.xds_max_connections == 5000


def test_connections_open_at_once_become_grpcs_bound() -> None:
    limits = xds_limits(
        argparse.Namespace(
            xds_max_connection_age=0.0, xds_stall_timeout=120.0, xds_max_connections=200
        )
    )
    assert grpc_option(limits, "grpc.max_allowed_incoming_connections") == 200


def test_zero_connections_is_no_bound() -> None:
    limits = xds_limits(
        argparse.Namespace(
            xds_max_connection_age=0.0, xds_stall_timeout=120.0, xds_max_connections=0
        )
    )
    assert limits.max_connections is None
    assert grpc_option(limits, "grpc.max_allowed_incoming_connections") is None


@pytest.mark.parametrize("text", ["-1", "many", "1.5"])
def test_not_connection_counts(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        connection_count(text)
