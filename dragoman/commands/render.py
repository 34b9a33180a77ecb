"""`dragoman render`: print the Envoy resources a manifest directory becomes."""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import (
    add_config,
    add_logging,
    add_manifest_inputs,
    checked_build,
    manifest_inputs_problem,
    named_store,
    server_config,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "render",
        help="print the Envoy resources manifests become (files, directories, - for "
        "standard input)",
    )
    add_manifest_inputs(parser)
    parser.add_argument("--listener-address", default="0.0.0.0", metavar="IP")
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.envoy.text.snapshot_yaml import render_yaml
    from dragoman.envoy.translate_options import TranslateOptions
    from dragoman.envoy.translation.translator import translate

    usage = manifest_inputs_problem(args)
    if usage is not None:
        print(f"dragoman render: error: {usage}", file=sys.stderr)
        return 2
    config = server_config(args)
    if config is None:
        return 2
    try:
        store = named_store(args)
    except OSError as error:
        print(f"error: cannot read: {error.strerror or error}", file=sys.stderr)
        return 2
    dag = checked_build(store, config.build_options(), config)
    for problem in dag.problems:
        print(f"problem: {problem}", file=sys.stderr)
    options = config.translate_options(TranslateOptions(listener_address=args.listener_address))
    snapshots = translate(dag, options)
    sys.stdout.write(render_yaml(snapshots))
    return 0
