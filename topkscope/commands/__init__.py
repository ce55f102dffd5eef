"""Subcommands of the `topkscope` command, one module each (see topkscope.cli), and what
they share: CommandError, and the one command-line language's helpers — `list_option` (lists
space-separated and repeatable) and `deprecated` (an old spelling kept for one release)."""

import argparse as _argparse
import sys as _sys


class CommandError(Exception):
    """What a command raises to fail: topkscope.cli prints `topkscope <command>: error:
    <message>` (one line) on stderr and exits with `code` (2, bad input, unless said)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


# ---- one command-line language: the old spellings, kept for one release ------------------
NEXT_RELEASE = "it goes in the next release"


def _note(prog: str, text: str) -> None:
    print(f"{prog}: note: {text}", file=_sys.stderr)


class _Deprecated(_argparse.Action):
    """An old spelling of an option: stores what the new one stores, with a one-line note."""

    def __init__(self, option_strings, dest, new: str, **kwargs) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        _note(parser.prog, f"{option_string} is deprecated; use {self.new} ({NEXT_RELEASE})")
        setattr(namespace, self.dest, values)


def deprecated(parser: _argparse.ArgumentParser, old: str, new: str, **kwargs) -> None:
    """Accept the option `old` as the option `new` (same dest; hidden from --help), with a
    one-line deprecation note on stderr when used. kwargs: the new option's type, nargs."""
    dest = new.lstrip("-").replace("-", "_")
    parser.add_argument(old, dest=dest, action=_Deprecated, new=new, help=_argparse.SUPPRESS,
                        **kwargs)


class SpacedList(_argparse.Action):
    """A list option in the one form: values space-separated after the flag, the flag
    repeatable (the lists add up). A comma-separated value (the old form) is still split,
    with a one-line deprecation note."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        items = []
        for value in values:
            if isinstance(value, str) and "," in value:
                _note(parser.prog, f"{option_string} {value}: comma-separated lists are "
                      f"deprecated; give the values space-separated ({NEXT_RELEASE})")
                items += [v.strip() for v in value.split(",") if v.strip()]
            else:
                items.append(value)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), *items])


def list_option(parser: _argparse.ArgumentParser, flag: str, **kwargs) -> None:
    """`flag VALUE...`: a SpacedList option (default None: the command's own default)."""
    parser.add_argument(flag, nargs="+", action=SpacedList, default=None, **kwargs)
