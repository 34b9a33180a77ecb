"""YAML text that Envoy reads back exactly as written."""

from __future__ import annotations

from typing import Any

import yaml

# YAML 1.1 booleans PyYAML leaves unquoted but Envoy's yaml-cpp reads as true/false, which
# turns e.g. a node id "n" into `false` and fails the bootstrap.
_BOOLEAN_TO_ENVOY = frozenset({"y", "Y", "n", "N"})


class _EnvoyDumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if value in _BOOLEAN_TO_ENVOY else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_EnvoyDumper.add_representer(str, _represent_str)


def dump_yaml(data: Any) -> str:
    """Block style, keys in the given order (protobuf field order), strings kept strings."""
    text: str = yaml.dump(data, Dumper=_EnvoyDumper, sort_keys=False, default_flow_style=False)
    return text
