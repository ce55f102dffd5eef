"""The command-line options every benchmark script shares, declared once.

    from _options import benchmark_parser
    parser = benchmark_parser(__file__, __doc__, quick="d in {1e5, 1e6}, 3 rounds")
    parser.add_argument(...)                 # the script's own options
    args = parser.parse_args(argv)

--quick  a short version, well under a minute (`quick` says what it shortens); `topkscope
         bench --quick` forwards it to every script, so every script accepts it
--out    the CSV it writes (default: results/bench/<script>.csv of the repository the script
         lives in, which is where `topkscope bench` looks for it)
--plugin a module of the user's imported first (repeatable), e.g. one that registers a
         sparsifier; the modules of TOPKSCOPE_PLUGINS and the entry-point group
         `topkscope.plugins` are imported when the parser is made (topkscope.plugins), so
         `topkscope --plugin MODULE bench` reaches every script

Usage errors are one line on stderr with exit status 2 (topkscope.cli.OneLineParser). The
leading underscore keeps this module out of `topkscope bench`'s list of benchmarks.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from topkscope import plugins
from topkscope.cli import OneLineParser


def default_out(script: str) -> Path:
    """results/bench/<script name>.csv beside the script's benchmarks/ folder."""
    path = Path(script).resolve()
    return path.parents[1] / "results" / "bench" / f"{path.stem}.csv"


class PluginAction(argparse.Action):
    """--plugin MODULE: imported as it is parsed, so options read after it see what it
    registers; a module that fails to import is a usage error (one line, exit 2)."""

    def __call__(self, parser, namespace, value, option_string=None):
        try:
            plugins.activate([value])
        except plugins.PluginError as exc:
            parser.error(str(exc))
        setattr(namespace, self.dest, [*getattr(namespace, self.dest), value])


def benchmark_parser(script: str, doc: str | None, quick: str) -> argparse.ArgumentParser:
    """A parser with the shared --quick and --out, described by the first paragraph of doc.

    Args:
        script: the script's __file__ (names it and its default CSV).
        doc: the script's __doc__.
        quick: what --quick shortens, for its help (e.g. "2 repeats, steps <= 1 s").
    """
    parser = OneLineParser(prog=f"python benchmarks/{Path(script).name}",
                           description=(doc or "").split("\n\n")[0].strip() or None)
    try:  # before the script's own options, whose defaults may read a registry
        plugins.activate()
    except plugins.PluginError as exc:
        parser.error(str(exc))
    parser.add_argument("--quick", action="store_true", help=f"a short version: {quick}")
    parser.add_argument("--out", type=Path, default=default_out(script),
                        help="the CSV to write (default: results/bench/<script>.csv)")
    parser.add_argument("--plugin", action=PluginAction, default=[], metavar="MODULE",
                        help="import this module of yours first, e.g. one that registers a "
                             f"sparsifier (repeatable; also ${plugins.ENV_VAR})")
    return parser
