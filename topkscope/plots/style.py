"""Look and output of every figure: one seaborn theme, applied per figure, and a saver.

The theme is applied inside a context manager (`figure_style()`), never set globally, and figures
are plain `matplotlib.figure.Figure` objects (not registered with pyplot), so importing or calling
topkscope.plots changes nothing in a user's own matplotlib session and leaks no open figures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import matplotlib as mpl
import seaborn as sns
from matplotlib.figure import Figure

from topkscope.io import atomic_write

SAVE_FORMATS = ("png", "pdf")
PNG_DPI = 150
PANEL_SIZE = (4.2, 3.2)  # inches per panel (width, height)
REFERENCE_COLORS = {
    "classic_bound": "#7f7f7f",
    "paper_bound": "#d62728",
    "gaussian_ratio": "#2ca02c",
}


@contextlib.contextmanager
def figure_style() -> Iterator[None]:
    """Seaborn 'whitegrid' + 'paper' context with readable fonts, for the duration of a block."""
    rc = {}
    rc.update(sns.axes_style("whitegrid"))
    rc.update(sns.plotting_context("paper", font_scale=1.15))
    rc.update({"figure.dpi": 100, "axes.titlesize": 10, "figure.titlesize": 11, "legend.fontsize": 8})
    with mpl.rc_context(rc):
        yield


def new_figure(ncols: int, nrows: int = 1, *, sharex: bool = False, sharey: bool = False):
    """A figure with a nrows x ncols grid of panels (axes always a 2-D array)."""
    if ncols < 1 or nrows < 1:
        raise ValueError(f"a figure needs at least one panel, got nrows={nrows}, ncols={ncols}")
    fig = Figure(figsize=(PANEL_SIZE[0] * ncols, PANEL_SIZE[1] * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


LINESTYLES = ("-", "--", "-.", ":")


def linestyles(names: Sequence[str]) -> dict[str, str]:
    """A line style per series name, so that coinciding series stay visible."""
    return {name: LINESTYLES[i % len(LINESTYLES)] for i, name in enumerate(names)}


def palette(names: Sequence[str]) -> dict[str, tuple]:
    """A stable colour per series name (same name -> same colour in every figure)."""
    colors = sns.color_palette("colorblind", n_colors=max(len(names), 1))
    return {name: colors[i % len(colors)] for i, name in enumerate(names)}


def save_figure(
    fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] = SAVE_FORMATS,
    dpi: int = PNG_DPI,
) -> list[Path]:
    """Write fig as out_dir/name.{png,pdf} (atomically: temporary name, then rename)."""
    bad = [f for f in formats if f not in ("png", "pdf", "svg")]
    if bad:
        raise ValueError(f"unsupported figure format(s) {bad}; allowed: png, pdf, svg")
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"figure name {name!r} must be a plain file stem (no '/', not hidden)")
    paths = []
    for fmt in formats:
        path = Path(out_dir) / f"{name}.{fmt}"
        atomic_write(path, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, dpi=dpi))
        paths.append(path)
    return paths
