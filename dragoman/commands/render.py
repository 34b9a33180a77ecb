"""`dragoman render`: print the Envoy resources a manifest directory becomes."""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import add_logging, manifest_dir


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "render", help="print the Envoy resources a manifest directory becomes"
    )
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    parser.add_argument("--listener-address", default="0.0.0.0", metavar="IP")
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.dag.build import build
    from dragoman.envoy.options import TranslateOptions
    from dragoman.envoy.render import render_yaml
    from dragoman.envoy.translate import translate
    from dragoman.sources.manifests import ManifestDirectory

    result = ManifestDirectory(args.manifests).load()
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    dag = build(result.store())
    for problem in dag.problems:
        print(f"problem: {problem}", file=sys.stderr)
    snapshots = translate(dag, TranslateOptions(listener_address=args.listener_address))
    sys.stdout.write(render_yaml(snapshots))
    return 0
