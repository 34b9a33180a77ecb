"""Gateway listeners' access logs: JSON on Envoy's standard output by default, Envoy's text
line, or none; chosen in the server configuration file."""

from __future__ import annotations

import pytest
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from dragoman.dag.model import HttpListener
from dragoman.envoy.resources.listener_messages import listener
from dragoman.envoy.translate_options import TranslateOptions
from dragoman.runtime.server_config import ConfigError, parse_config


def manager(access_log: str) -> hcm_pb2.HttpConnectionManager:
    made = listener(HttpListener("http-80", 80, "http-80"), TranslateOptions(access_log=access_log))
    found = hcm_pb2.HttpConnectionManager()
    made.filter_chains[0].filters[0].typed_config.Unpack(found)
    return found


def test_json_to_stdout_by_default() -> None:
    assert TranslateOptions().access_log == "json"
    [log] = manager("json").access_log
    assert log.name == "envoy.access_loggers.stdout"
    stdout = stream_pb2.StdoutAccessLog()
    log.typed_config.Unpack(stdout)
    fields = dict(stdout.log_format.json_format.items())
    assert fields["response_code"] == "%RESPONSE_CODE%"
    assert fields["path"] == "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"


def test_text_uses_envoys_default_line_and_off_logs_nothing() -> None:
    [log] = manager("text").access_log
    stdout = stream_pb2.StdoutAccessLog()
    log.typed_config.Unpack(stdout)
    assert not stdout.HasField("log_format")
    assert list(manager("off").access_log) == []


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({}, "json"),
        ({"accessLog": {"format": "text"}}, "text"),
        ({"accessLog": {"enabled": False}}, "off"),
        ({"accessLog": {"format": "json", "enabled": True}}, "json"),
    ],
)
def test_the_configuration_file_chooses(document: dict[str, object], expected: str) -> None:
    config = parse_config(document)
    assert config.access_log == expected
    assert config.translate_options().access_log == expected


def test_a_bad_access_log_setting_is_named() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config({"accessLog": {"format": "xml", "colour": True}})
    fields = {field for field, _ in error.value.problems}
    assert fields == {"accessLog.format", "accessLog.colour"}
