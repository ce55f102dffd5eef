"""The `topkscope` command: one subcommand per module in topkscope.commands.

Adding a subcommand: write topkscope/commands/<name>.py with `HELP`, `add_arguments(parser)`
and `main(args) -> int`, then add its name to COMMANDS. A command module imports only the
standard library at top level (heavy imports go inside `main`), so `topkscope --help` and
every other subcommand stay fast.

This module is the command's error boundary, the one place that turns a failure into what a
user sees: a usage error (OneLineParser), a `CommandError` a command raises (bad input,
exit 2, or a failure with its own code) and Ctrl-C become one line on stderr,
`topkscope <command>: error: <message>` / `topkscope <command>: interrupted`, with exit
status 2 / the error's code / 130. Commands never print their own errors. Output to a pipe
closed early (`topkscope analyze ... | head`) ends the command quietly with status 141
(128 + SIGPIPE, what a shell reports for a process killed by SIGPIPE), with no traceback.

It is also the only place that wires a command to another package's entry point (`WIRED`):
`topkscope figures`, `claims`, `gallery` and `report` get what they need of topkscope.reproduce here, so
`commands` and `reproduce` never import each other.

Plugins (topkscope.plugins): the modules named by `--plugin MODULE` (before the subcommand,
repeatable), by TOPKSCOPE_PLUGINS and by the entry-point group `topkscope.plugins` are imported
after parsing and before the command runs; one that fails is one line, exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from topkscope import plugins
from topkscope.commands import CommandError

# subcommand -> module supplying HELP, add_arguments(parser) and main(args)
COMMANDS = {
    "run": "topkscope.commands.run",
    "figures": "topkscope.commands.figures",
    "analyze": "topkscope.commands.analyze",
    "claims": "topkscope.commands.claims",
    "bench": "topkscope.commands.bench",
    "scale": "topkscope.commands.scale",
    "fetch": "topkscope.commands.fetch",
    "gallery": "topkscope.commands.gallery",
    "import": "topkscope.commands.import",
    "report": "topkscope.commands.report",
    "tables": "topkscope.commands.tables",
    "runs": "topkscope.commands.runs",
}


def _figures_driver(log, **options):
    from topkscope.reproduce.driver import Options, reproduce

    return reproduce(Options(**options), log=log)


def _claims_table(runs, roots=None, **options):
    from topkscope.claims import build

    return build(runs, roots=roots, **options)


def _claims_summary(table) -> str:
    from topkscope.publish.findings import claims_summary

    return claims_summary(table)


def _gallery(**options):
    from topkscope.publish.gallery import publish

    return publish(**options)


def _report(paths, out, **options):
    from topkscope.publish.report import write_report

    return write_report(paths, out, **options)


def _tables(runs, paths, out, **options):
    from topkscope.publish.paper_tables import write_for_paths

    return write_for_paths(runs, paths, out, **options)


# subcommand -> extra keyword arguments of its main(args, ...)
WIRED = {
    "figures": {"driver": _figures_driver},
    "claims": {"tabulate": _claims_table, "summarize": _claims_summary},
    "gallery": {"publish": _gallery},
    "report": {"write": _report},
    "tables": {"write": _tables},
}


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (no usage block), exit status 2. Subcommand parsers
    are of this class too (argparse makes them of the parent's class); an unrecognized
    argument is reported by the subcommand's parser, so the line names the subcommand."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.subcommands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            owner = self.subcommands.get(getattr(parsed, "command", None), self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


def one_line(message: object) -> str:
    """message with its whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(message).split())


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="topkscope", description="Top-k sparsification in distributed deep learning.")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="import this module of yours before the command runs, e.g. one "
                             "that registers a sparsifier (repeatable; also "
                             f"${plugins.ENV_VAR}, and the entry-point group {plugins.GROUP})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        parser.subcommands[name] = command
    return parser


# exit status when stdout is a pipe whose reader has gone: 128 + SIGPIPE, as a shell reports
BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a pipe closed early fails here rather than at interpreter exit
        return code
    except BrokenPipeError:
        # stdout to /dev/null, so that Python's own flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE


def _import_plugins(modules: Sequence[str]) -> None:
    """The users' modules (topkscope.plugins.activate); a failure is bad input (exit 2)."""
    try:
        plugins.activate(modules)
    except plugins.PluginError as exc:
        raise CommandError(str(exc)) from None


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    command = importlib.import_module(COMMANDS[args.command])
    try:
        _import_plugins(args.plugin)
        return int(command.main(args, **WIRED.get(args.command, {})) or 0)
    except CommandError as exc:
        print(f"topkscope {args.command}: error: {one_line(exc) or type(exc).__name__}",
              file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"topkscope {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
