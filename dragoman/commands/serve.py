"""`dragoman serve`: serve a manifest directory over xDS."""

from __future__ import annotations

import argparse
import asyncio
import logging

from dragoman.commands.common import DEFAULT_XDS_ADDRESS, add_logging, manifest_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("serve", help="serve a manifest directory over xDS")
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    parser.add_argument("--xds-address", default=DEFAULT_XDS_ADDRESS, metavar="HOST:PORT")
    parser.add_argument(
        "--listener-address",
        default="0.0.0.0",
        metavar="IP",
        help="address Envoy binds Gateway listeners to (default: 0.0.0.0)",
    )
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.envoy.options import TranslateOptions
    from dragoman.serve import ServeConfig, serve

    config = ServeConfig(
        manifests=args.manifests,
        xds_address=args.xds_address,
        translate_options=TranslateOptions(listener_address=args.listener_address),
    )
    try:
        asyncio.run(serve(config))
    except OSError as error:
        logging.getLogger("dragoman").error("%s", error)
        return 1
    return 0
