"""One module per `dragoman` subcommand: each has `add_parser(subparsers)` and `run(args)`."""
