"""`dragoman check`: judge manifests (files, directories, `-` for standard input) for a CI
pipeline.

Prints every problem (file, `kind/namespace/name`, field, reason) and exits 1 when any
object is invalid or refused, 0 when every object is served as written. Exit code 2 is a
usage error (a bad flag, a missing directory, a bad configuration file).
"""

from __future__ import annotations

import argparse
import sys

from dragoman.commands.common import (
    add_config,
    add_logging,
    add_manifest_inputs,
    manifest_inputs_problem,
    server_config,
)

OK, PROBLEMS, USAGE = 0, 1, 2


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "check",
        help="print every problem of manifests (files, directories, - for standard input); "
        "exit 1 if any object is invalid or refused (for CI)",
    )
    add_manifest_inputs(parser)
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.commands.common import checked_build, load_manifests
    from dragoman.store import Store

    usage = manifest_inputs_problem(args)
    if usage is not None:
        print(f"dragoman check: error: {usage}", file=sys.stderr)
        return USAGE
    config = server_config(args)
    if config is None:
        return USAGE
    try:
        result = load_manifests(args)
    except OSError as error:
        where = error.filename or args.manifests
        print(f"{where}: cannot read: {error.strerror or error}", file=sys.stderr)
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
