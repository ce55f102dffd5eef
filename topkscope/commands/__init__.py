"""Subcommands of the `topkscope` command, one module each (see topkscope.cli)."""


class CommandError(Exception):
    """What a command raises to fail: topkscope.cli prints `topkscope <command>: error:
    <message>` (one line) on stderr and exits with `code` (2, bad input, unless said)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
