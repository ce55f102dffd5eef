"""The `topkscope` command: one subcommand per module in topkscope.commands.

Adding a subcommand: write topkscope/commands/<name>.py with `HELP`, `add_arguments(parser)`
and `main(args) -> int`, then add its name to COMMANDS. A command module imports only the
standard library at top level (heavy imports go inside `main`), so `topkscope --help` and
every other subcommand stay fast.

This module is the only place that wires a command to another package's entry point
(`WIRED`): `topkscope figures` gets the figures driver of topkscope.reproduce here, so
`commands` and `reproduce` never import each other.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> module supplying HELP, add_arguments(parser) and main(args)
COMMANDS = {
    "run": "topkscope.commands.run",
    "figures": "topkscope.commands.figures",
    "analyze": "topkscope.commands.analyze",
    "bench": "topkscope.commands.bench",
    "scale": "topkscope.commands.scale",
}


def _figures_driver(log, **options):
    from topkscope.reproduce.driver import Options, reproduce

    return reproduce(Options(**options), log=log)


# subcommand -> extra keyword arguments of its main(args, ...)
WIRED = {"figures": {"driver": _figures_driver}}


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="topkscope", description="Top-k sparsification in distributed deep learning.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = importlib.import_module(COMMANDS[args.command])
    return int(command.main(args, **WIRED.get(args.command, {})) or 0)


if __name__ == "__main__":
    sys.exit(main())
