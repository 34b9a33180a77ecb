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
    parser.add_argument(
        "-o",
        "--output",
        choices=["text", "json"],
        default="text",
        help="text (default): one problem a line, file:line:column first; json: one document "
        "with every problem (severity, file, line, column, object, field, message, reason)",
    )
    add_config(parser)
    add_logging(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from dragoman.commands.check_report import as_json, check_problems
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
    dag = checked_build(Store.from_objects(result.objects), config.build_options(), config)
    problems = check_problems(result, dag.problems)
    objects = len(result.objects)
    if args.output == "json":
        sys.stdout.write(as_json(problems, objects, result.files))
    else:
        for problem in problems:
            print(problem.text())
    errors = sum(problem.severity == "error" for problem in problems)
    if errors:
        print(f"{errors} problems; {objects} objects in {result.files} files", file=sys.stderr)
        return PROBLEMS
    warnings = len(problems) - errors
    verdict = f"{warnings} warnings" if warnings else "no problem"
    print(f"ok: {objects} objects in {result.files} files, {verdict}", file=sys.stderr)
    return OK
