"""`dragoman check`: judge manifests (files, directories, `-` for standard input) for a CI
pipeline.

Prints every problem (file, `kind/namespace/name`, field, reason) and exits 1 when any
object is invalid or refused, 0 when every object is served as written. Exit code 2 is a
usage error (a bad flag, a missing directory, a bad configuration file).
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path

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
    from dragoman.sources.decode import MAX_FILE_BYTES
    from dragoman.sources.paths import STDIN
    from dragoman.store import Store

    usage = manifest_inputs_problem(args)
    if usage is not None:
        print(f"dragoman check: error: {usage}", file=sys.stderr)
        return USAGE
    config = server_config(args)
    if config is None:
        return USAGE
    stdin = sys.stdin.buffer.read(MAX_FILE_BYTES + 1) if STDIN in args.paths else b""
    try:
        result = load_manifests(args, io.BytesIO(stdin), unread_fields=True)
    except OSError as error:
        where = error.filename or args.manifests
        print(f"{where}: cannot read: {error.strerror or error}", file=sys.stderr)
        return PROBLEMS
    dag = checked_build(Store.from_objects(result.objects), config.build_options(), config)
    problems = check_problems(result, dag.problems, _reader(args, stdin))
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


def _reader(args: argparse.Namespace, stdin: bytes) -> Callable[[str], bytes | None]:
    """A file's bytes by its label in the problems (read again to place each problem at its
    field); standard input as it was read."""
    from dragoman.sources.decode import MAX_FILE_BYTES
    from dragoman.sources.paths import STDIN

    # Below `--manifests DIR` alone, files are named relative to DIR; else as given.
    root = args.manifests if not args.paths else None

    def read(label: str) -> bytes | None:
        if label == STDIN and args.paths:
            return stdin
        path = Path(root, label) if root is not None else Path(label)
        try:
            with path.open("rb") as file:
                return file.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None

    return read
