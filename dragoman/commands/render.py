"""`dragoman render`: print the Envoy resources a manifest directory becomes."""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import (
    add_config,
    add_logging,
    checked_build,
    loaded_store,
    manifest_dir,
    server_config,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "render", help="print the Envoy resources a manifest directory becomes"
    )
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    parser.add_argument("--listener-address", default="0.0.0.0", metavar="IP")
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.envoy.text.snapshot_yaml import render_yaml
    from dragoman.envoy.translate_options import TranslateOptions
    from dragoman.envoy.translation.translator import translate

    config = server_config(args)
    if config is None:
        return 2
    dag = checked_build(loaded_store(args.manifests), config.build_options(), config)
    for problem in dag.problems:
        print(f"problem: {problem}", file=sys.stderr)
    options = config.translate_options(TranslateOptions(listener_address=args.listener_address))
    snapshots = translate(dag, options)
    sys.stdout.write(render_yaml(snapshots))
    return 0
