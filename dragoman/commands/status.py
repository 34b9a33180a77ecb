"""`dragoman status`: print the status dragoman would write back for each object."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from typing import TYPE_CHECKING, Any

from dragoman.commands.common import (
    add_config,
    add_logging,
    checked_build,
    gateway_address,
    loaded_store,
    manifest_dir,
    server_config,
)
from dragoman.dag.options import DEFAULT_CONTROLLER_NAME

if TYPE_CHECKING:
    from dragoman.dag.model import ObjectStatus
    from dragoman.store import Store


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "status",
        help="print the status dragoman would write back for each Gateway API object",
    )
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    parser.add_argument(
        "--output",
        "-o",
        choices=["yaml", "json"],
        default="yaml",
        help="yaml: one document per object (default); json: a v1 List",
    )
    parser.add_argument(
        "--controller-name",
        default=DEFAULT_CONTROLLER_NAME,
        metavar="NAME",
        help=f"the GatewayClass controllerName dragoman answers to (default: "
        f"{DEFAULT_CONTROLLER_NAME})",
    )
    parser.add_argument(
        "--gateway-address",
        action="append",
        dest="gateway_addresses",
        type=gateway_address,
        metavar="IP_OR_HOSTNAME",
        help="where clients reach the Gateways, shown in their status.addresses (repeatable)",
    )
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.dag.options import BuildOptions
    from dragoman.envoy.text.yaml_text import dump_yaml

    config = server_config(args)
    if config is None:
        return 2
    store = loaded_store(args.manifests)
    options = config.build_options(
        BuildOptions(
            controller_name=args.controller_name,
            gateway_addresses=tuple(dict.fromkeys(args.gateway_addresses or ())),
        )
    )
    dag = checked_build(store, options, config)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    documents = [status_document(status, store, now) for status in dag.statuses.values()]
    if args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": documents}
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    else:
        sys.stdout.write("".join("---\n" + dump_yaml(document) for document in documents))
    return 0


def status_document(status: ObjectStatus, store: Store, now: str) -> dict[str, Any]:
    """The object as dragoman would write it: identity, generation and stamped status."""
    from dragoman.dag.status.stamp import stamp

    key = status.key
    metadata: dict[str, Any] = {"name": key.name}
    if key.namespace:
        metadata["namespace"] = key.namespace
    obj = _lookup(store, key.kind, key.namespace, key.name)
    if obj is not None:
        metadata["generation"] = obj.meta.generation
    return {
        "apiVersion": status.api_version,
        "kind": key.kind,
        "metadata": metadata,
        "status": stamp(status.status, now),
    }


def _lookup(store: Store, kind: str, namespace: str, name: str) -> Any:
    from dragoman.objects.kinds import KINDS_BY_NAME

    known = KINDS_BY_NAME.get(kind)
    return getattr(store, known.store_field).get((namespace, name)) if known else None
