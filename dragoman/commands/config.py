"""`dragoman config NODE`: what one connected proxy holds, by type, with its client's version,
when it connected and which replica serves it (CSDS, the admin identity)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from dragoman.commands.common import (
    DEFAULT_XDS_ADDRESS,
    add_xds_client_tls,
    host_port,
    xds_client_tls,
)

if TYPE_CHECKING:
    from dragoman.xds.csds.node_config import NodeConfig


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "config",
        help="show what one connected proxy holds: its resources by type, client and replica",
    )
    parser.add_argument("node", metavar="NODE", help="the node id the proxy connects with")
    parser.add_argument(
        "--xds-address", type=host_port, default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT"
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "yaml"),
        default="text",
        help="text: names, versions and standing per type (default); yaml: the resources "
        "themselves too, as `dragoman render` prints them (Secrets by name only)",
    )
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS", help="default: 5")
    add_xds_client_tls(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import grpc

    from dragoman.commands.clients import report_rpc_error
    from dragoman.security.files import TlsFileError
    from dragoman.xds.csds.node_config import fetch_node_configs, format_node_config

    try:
        configs, replica = fetch_node_configs(
            args.xds_address,
            args.node,
            timeout=args.timeout,
            tls=xds_client_tls(args),
            server_name=args.xds_server_name or "",
        )
    except TlsFileError as error:
        print(f"dragoman config: {error}", file=sys.stderr)
        return 2
    except grpc.RpcError as error:
        report_rpc_error("config", args, error)
        return 1
    if not configs:
        print(
            f"dragoman config: node {args.node!r} is not connected to replica "
            f"{replica or '?'} at {args.xds_address} (with several replicas, each serves its "
            "own clients: ask each, or see `dragoman clients` on each)",
            file=sys.stderr,
        )
        return 1
    if args.output == "yaml":
        sys.stdout.write("".join(_yaml(config) for config in configs))
    else:
        sys.stdout.write("\n".join(format_node_config(config) for config in configs))
    return 0


def _yaml(config: NodeConfig) -> str:
    """One YAML document: the node, then each type's resources in Envoy's JSON mapping."""
    from dragoman.envoy.text.json_mapping import to_json_mapping
    from dragoman.envoy.text.snapshot_yaml import SECTIONS, redacted
    from dragoman.envoy.text.yaml_text import dump_yaml
    from dragoman.snapshots.resources import SHORT_NAMES

    document: dict[str, Any] = {
        "node": config.node,
        "client": config.agent,
        "connected_at": config.connected_at,
        "peer": config.peer,
        "replica": config.replica,
    }
    classes = {type_url: message_class for _, type_url, message_class in SECTIONS}
    for type_url, held in config.resources.items():
        message_class = classes.get(type_url)
        entries = []
        for resource in held:
            entry: dict[str, Any] = {
                "name": resource.name,
                "version": resource.version,
                "status": resource.status,
            }
            if resource.error:
                entry["error"] = resource.error
            if resource.body and message_class is not None:
                entry["resource"] = redacted(
                    to_json_mapping(message_class.FromString(resource.body))
                )
            entries.append(entry)
        document[SHORT_NAMES.get(type_url, type_url)] = entries
    return f"---\n{dump_yaml(document)}"
