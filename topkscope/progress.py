"""Progress bars for users' long work (training, import, claims over many runs, the report):
drawn on a terminal only, so CI logs and piped output stay quiet, and never with
`--no-progress` (enabled=False)."""

from __future__ import annotations

import sys


def shown(enabled: bool = True, stream=None) -> bool:
    """Whether a bar is drawn: enabled, and `stream` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    return bool(enabled) and bool(getattr(stream, "isatty", lambda: False)())


def bar(iterable=None, *, total: int | None = None, desc: str, unit: str,
        enabled: bool = True, **options):
    """A tqdm bar on stderr, disabled where shown() is False."""
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=not shown(enabled), dynamic_ncols=True, **options)
