"""Subcommands of the `topkscope` command, one module each (see topkscope.cli)."""
