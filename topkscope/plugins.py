"""Users' modules imported before any command runs, so that what they register — a sparsifier
(`topkscope.sparsify.register_sparsifier`), a statistic (`topkscope.columns.register_statistic`),
a claim (`topkscope.claims.register_claim`) — works in every command as it does in one Python
process of the user's own.

A plugin is a module, named three ways, imported in this order (each once):

    entry points        group `topkscope.plugins` of every installed distribution (a user's
                        pyproject.toml: [project.entry-points."topkscope.plugins"]
                        strided = "mypkg.strided")
    TOPKSCOPE_PLUGINS   comma-separated module names
    --plugin MODULE     `topkscope --plugin MODULE COMMAND ...`, repeatable

A module name is looked up on sys.path, then in the working directory (where a user's one file
usually lies; a console script, unlike `python -m`, does not search it).

`activate` writes the modules of the environment and of the command line back into
TOPKSCOPE_PLUGINS (and the working directory into PYTHONPATH when a module was found there), so
every process a command starts imports the same modules: the figures driver's `topkscope run`,
torchrun's workers, the benchmark scripts (`benchmarks/_options.py` calls `activate` too).
Entry points need no passing down: each process finds them itself.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import MutableMapping, Sequence

ENV_VAR = "TOPKSCOPE_PLUGINS"
GROUP = "topkscope.plugins"


class PluginError(ValueError):
    """A plugin that is not a module name or failed to import; the message names the module,
    where it was named and the error, on one line."""


def from_environment(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """The module names of TOPKSCOPE_PLUGINS (comma-separated; blanks ignored)."""
    text = (os.environ if environ is None else environ).get(ENV_VAR, "")
    return [name.strip() for name in text.split(",") if name.strip()]


def _entry_points() -> list:
    from importlib.metadata import entry_points

    return list(entry_points(group=GROUP))


def _check_name(name: str, where: str) -> None:
    if not name or not all(part.isidentifier() for part in name.split(".")):
        raise PluginError(f"plugin {name!r} ({where}) is not a module name; give a dotted "
                          "module name such as mypkg.strided (not a file path), importable "
                          "from sys.path or the working directory")


def _import(name: str, where: str):
    _check_name(name, where)
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure of a user's module is one line
        raise PluginError(f"plugin {name!r} ({where}) failed to import: "
                          f"{type(exc).__name__}: {exc}") from None


def activate(modules: Sequence[str] = (),
             environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Import the entry points' modules, TOPKSCOPE_PLUGINS's and `modules` (the command
    line's), in that order; return the module names imported. Then TOPKSCOPE_PLUGINS holds the
    environment's and `modules`, and PYTHONPATH ends with the working directory when a module
    was found there, for the processes started from here. PluginError on the first module
    that fails (nothing is written to the environment then)."""
    environ = os.environ if environ is None else environ
    named = list(dict.fromkeys([*from_environment(environ), *modules]))
    given = set(modules)
    imported = []
    for point in _entry_points():
        where = f"entry point {point.name!r} of group {GROUP}"
        try:
            point.load()
        except Exception as exc:  # noqa: BLE001 - as _import
            raise PluginError(f"plugin {point.value!r} ({where}) failed to import: "
                              f"{type(exc).__name__}: {exc}") from None
        imported.append(point.module)
    here = os.getcwd()
    searched = here in sys.path or "" in sys.path
    if named and not searched:
        sys.path.append(here)  # last, so it never shadows an installed module
    from_here = False
    for name in named:
        module = _import(name, "--plugin" if name in given else f"${ENV_VAR}")
        origin = os.path.abspath(getattr(module, "__file__", None) or os.sep)
        from_here |= not searched and origin.startswith(here + os.sep)
        imported.append(name)
    if named:
        environ[ENV_VAR] = ",".join(named)
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if from_here and here not in paths:
        environ["PYTHONPATH"] = os.pathsep.join([*paths, here])
    return list(dict.fromkeys(imported))
