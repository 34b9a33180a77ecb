"""`dragoman check`: judge a manifest directory for a CI pipeline.

Prints every problem (file, `kind/namespace/name`, field, reason) and exits 1 when any
object is invalid or refused, 0 when every object is served as written. Exit code 2 is a
usage error (a bad flag, a missing directory, a bad configuration file).
"""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import add_config, add_logging, manifest_dir, server_config

OK, PROBLEMS, USAGE = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check",
        help="print every problem of a manifest directory; exit 1 if any object is invalid "
        "or refused (for CI)",
    )
    parser.add_argument("--manifests", type=manifest_dir, required=True, metavar="DIR")
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.commands.common import checked_build
    from dragoman.sources.manifests import ManifestDirectory
    from dragoman.store import Store

    config = server_config(args)
    if config is None:
        return USAGE
    try:
        result = ManifestDirectory(args.manifests).load()
    except OSError as error:
        print(f"{args.manifests}: cannot read: {error.strerror or error}", file=sys.stderr)
        return PROBLEMS
    lines = [str(error) for error in result.errors]
    dag = checked_build(Store.from_objects(result.objects), config.build_options(), config)
    for problem in dag.problems:
        origin = result.origins.get(problem.object, "")
        where = f"{origin} {problem.object}" if origin else str(problem.object)
        parts = [where, problem.field, f"{problem.message} ({problem.reason})"]
        lines.append(": ".join(part for part in parts if part))
    for line in lines:
        print(line)
    objects = len(result.objects)
    if lines:
        print(
            f"{len(lines)} problems; {objects} objects in {result.files} files",
            file=sys.stderr,
        )
        return PROBLEMS
    print(f"ok: {objects} objects in {result.files} files, no problem", file=sys.stderr)
    return OK
