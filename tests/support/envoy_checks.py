"""Checks of what dragoman emits against Envoy's own rules: nothing deprecated or
work-in-progress set anywhere in a message (`problems_in`), and a configuration Envoy itself
accepts (`validate`, with the real binary in `--mode validate`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any as Json

from envoy.annotations import deprecation_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.any_pb2 import Any
from google.protobuf.descriptor import Descriptor, EnumValueDescriptor, FieldDescriptor
from google.protobuf.message import Message
from udpa.annotations import status_pb2 as udpa_status_pb2
from xds.annotations.v3 import status_pb2 as xds_status_pb2

from dragoman.envoy.bootstrap.envoy_bootstrap import bootstrap_config
from dragoman.envoy.resources.listener_messages import HTTP_CONNECTION_MANAGER
from dragoman.envoy.text.json_mapping import to_json_mapping
from dragoman.snapshots.resources import (
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    SCOPED_ROUTE,
    Snapshot,
)
from tests.support.envoy_dags import messages, with_inline_routes

VALIDATE_TIMEOUT_S = 60


def unpack(value: Any) -> Message:
    type_name = value.type_url.rpartition("/")[2]
    # Fails when the type is not registered: render_yaml could not expand it either.
    message_type = descriptor_pool.Default().FindMessageTypeByName(type_name)
    message = message_factory.GetMessageClass(message_type)()
    assert value.Unpack(message)
    return message


def field_problems(field: FieldDescriptor) -> list[str]:
    options = field.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[deprecation_pb2.deprecated_at_minor_version]:
        problems.append("deprecated_at_minor_version")
    if options.Extensions[deprecation_pb2.disallowed_by_default]:
        problems.append("disallowed_by_default")
    wip = options.Extensions[xds_status_pb2.field_status].work_in_progress
    if wip and field.full_name not in WORK_IN_PROGRESS_REQUIRED:
        problems.append("work_in_progress")
    return problems


# Fields marked work-in-progress that are the only way left to configure something: the UDP
# proxy names its cluster through `matcher` alone, its `cluster` field being deprecated.
WORK_IN_PROGRESS_REQUIRED = frozenset(
    {"envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig.matcher"}
)


def enum_value_problems(value: EnumValueDescriptor) -> list[str]:
    options = value.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[deprecation_pb2.deprecated_at_minor_version_enum]:
        problems.append("deprecated_at_minor_version_enum")
    if options.Extensions[deprecation_pb2.disallowed_by_default_enum]:
        problems.append("disallowed_by_default_enum")
    return problems


def message_type_problems(message_type: Descriptor) -> list[str]:
    options = message_type.GetOptions()
    file_options = message_type.file.GetOptions()
    problems = []
    if options.deprecated:
        problems.append("deprecated")
    if options.Extensions[xds_status_pb2.message_status].work_in_progress:
        problems.append("work_in_progress")
    if file_options.Extensions[xds_status_pb2.file_status].work_in_progress:
        problems.append("file work_in_progress")
    udpa_status = file_options.Extensions[udpa_status_pb2.file_status]
    if udpa_status.work_in_progress:
        problems.append("file work_in_progress")
    if udpa_status.package_version_status in (
        udpa_status_pb2.FROZEN,
        udpa_status_pb2.NEXT_MAJOR_VERSION_CANDIDATE,
    ):
        problems.append(
            "package "
            + udpa_status_pb2.PackageVersionStatus.Name(udpa_status.package_version_status)
        )
    return problems


def walk(message: Message, path: str) -> Iterator[tuple[str, Message]]:
    """Every message inside this one, itself included, with Any values unpacked."""
    yield path, message
    if isinstance(message, Any):
        if message.type_url:  # an empty Any (a route enabling a filter) holds nothing
            yield from walk(unpack(message), f"{path}<{message.type_url.rpartition('/')[2]}>")
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        where = f"{path}.{field.name}"
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is not None:
                for key, item in value.items():
                    yield from walk(item, f"{where}[{key}]")
        elif field.is_repeated:
            for index, item in enumerate(value):
                yield from walk(item, f"{where}[{index}]")
        else:
            yield from walk(value, where)


def problems_in(message: Message, path: str) -> Iterator[str]:
    """`path: problem` for every problem in this message and everything it contains."""
    for where, inner in walk(message, path):
        for problem in message_type_problems(inner.DESCRIPTOR):
            yield f"{where} ({inner.DESCRIPTOR.full_name}): {problem}"
        for field, value in inner.ListFields():
            for problem in field_problems(field):
                yield f"{where}.{field.name}: {problem}"
            if field.enum_type is not None:
                for number in value if field.is_repeated else [value]:
                    enum_value = field.enum_type.values_by_number[number]
                    for problem in enum_value_problems(enum_value):
                        yield f"{where}.{field.name}={enum_value.name}: {problem}"


def validate(envoy: str, config_path: Path) -> str:
    result = subprocess.run(
        [envoy, "--mode", "validate", "--disable-hot-restart", "-c", str(config_path)],
        capture_output=True,
        text=True,
        timeout=VALIDATE_TIMEOUT_S,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "deprecated option" not in output.lower(), output
    return output


def static_copy(assignment: endpoint_pb2.ClusterLoadAssignment) -> dict[str, Json]:
    """A STATIC cluster around a CLA, so Envoy validates the CLA without an EDS fetch."""
    name = assignment.cluster_name + "/static"
    load_assignment = to_json_mapping(assignment)
    load_assignment["cluster_name"] = name
    return {"name": name, "type": "STATIC", "load_assignment": load_assignment}


def translated_bootstrap(snapshot: Snapshot, admin_socket: Path) -> dict[str, Json]:
    """The dragoman bootstrap plus one group's resources as static resources.

    The bootstrap's ADS config lets the EDS clusters and RDS listeners validate as they are.
    """
    config = bootstrap_config(
        "127.0.0.1:18000",
        node_id="validate",
        node_cluster="default/demo",
        admin_socket=str(admin_socket),
    )
    tables = {t.name: t for t in messages(snapshot, ROUTE)}
    listeners = messages(snapshot, LISTENER)
    static = config["static_resources"]
    static["clusters"] += [to_json_mapping(c) for c in messages(snapshot, CLUSTER)]
    static["clusters"] += [static_copy(a) for a in messages(snapshot, ENDPOINT)]
    static["listeners"] = [to_json_mapping(m) for m in listeners] + [
        to_json_mapping(with_inline_routes(m, tables, messages(snapshot, SCOPED_ROUTE)))
        for m in listeners
        # TCP, TLS and UDP listeners fetch no routes.
        if m.filter_chains and m.filter_chains[0].filters[0].name == HTTP_CONNECTION_MANAGER
    ]
    return config
