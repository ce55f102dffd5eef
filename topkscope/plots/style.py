"""Look and output of every figure: one seaborn theme, applied per figure, text fitted, a saver.

The theme is applied inside a context manager (`figure_style()`), never set globally, and figures
are plain `matplotlib.figure.Figure` objects (not registered with pyplot), so importing or calling
topkscope.plots changes nothing in a user's own matplotlib session and leaks no open figures.
Every plot function calls `fit_texts(fig)` last, inside the style: long titles and labels are
broken into lines that fit the figure and their panels (no text cut at the canvas edge or
running into a neighbour's).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import matplotlib as mpl
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

from topkscope.io import atomic_write
from topkscope.plots.titles import wrap

SAVE_FORMATS = ("png", "pdf")
PNG_DPI = 150
PANEL_SIZE = (4.2, 3.2)  # inches per panel (width, height)
MIN_WIDTH_IN = 6.3  # a one-panel figure is as wide as a page's text, so its title has room
REFERENCE_COLORS = {
    "classic_bound": "#7f7f7f",
    "paper_bound": "#d62728",
    "gaussian_ratio": "#2ca02c",
    "fitted_ratio": "#9467bd",
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
    """A figure with a nrows x ncols grid of panels (axes always a 2-D array), PANEL_SIZE
    per panel and at least MIN_WIDTH_IN wide, with constrained layout."""
    if ncols < 1 or nrows < 1:
        raise ValueError(f"a figure needs at least one panel, got nrows={nrows}, ncols={ncols}")
    fig = Figure(figsize=(max(PANEL_SIZE[0] * ncols, MIN_WIDTH_IN), PANEL_SIZE[1] * nrows + 0.6),
                 layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=sharey, squeeze=False)
    return fig, axes


TEXT_PAD_IN = 0.1  # inches a figure-wide text keeps free at each side of the canvas
LEGEND_GAP_IN = 0.08  # inches between a panel's x label and a legend moved below it
FIT_PASSES = 3  # layout passes of fit_texts: a wrapped y label can narrow its panel once more


def _length(text) -> float:
    """Extent of a text along its direction, in pixels (height for vertical text)."""
    box = text.get_window_extent()
    return box.height if abs(text.get_rotation() % 180 - 90) < 45 else box.width


def _fit(text, room: float, original: str) -> bool:
    """Set text to `original` with its lines broken (titles.wrap) so that each is at most
    `room` pixels long; whether the text changed."""
    before = text.get_text()
    text.set_text(original)
    if original.strip() and text.get_visible() and _length(text) > room:

        def fits(line: str) -> bool:
            text.set_text(line)
            return _length(text) <= room

        text.set_text(wrap(original, fits))
    return text.get_text() != before


def _label_room(ax) -> float:
    """Room of a panel's y label, which is centred on the panel: the height of the panel with
    its title above and its x tick labels and label below, symmetric about its centre."""
    panel = ax.get_window_extent()
    parts = [panel, ax.xaxis.get_tightbbox()]
    if ax.title.get_text().strip():
        parts.append(ax.title.get_window_extent())
    centre = (panel.y0 + panel.y1) / 2
    top = max(b.y1 for b in parts if b is not None)
    bottom = min(b.y0 for b in parts if b is not None)
    return 2 * min(top - centre, centre - bottom)


def _inside(inner, outer, slack: float = 1.0) -> bool:
    return (inner.x0 >= outer.x0 - slack and inner.y0 >= outer.y0 - slack
            and inner.x1 <= outer.x1 + slack and inner.y1 <= outer.y1 + slack)


def _legend_below(ax, moved: dict) -> bool:
    """Move ax's legend below the panel, under its x tick labels and label, when it does not
    fit inside the panel or covers one of the panel's annotations; a legend moved before
    (in `moved`: legend -> its offset in inches) follows its x axis as the labels change.
    Whether the legend moved."""
    legend = ax.get_legend()
    if legend is None or not legend.get_visible():
        return False
    if legend not in moved:
        if legend.get_bbox_to_anchor() is not ax.bbox:
            return False  # placed by the plot itself
        frame = legend.get_window_extent()
        covered = [t for t in ax.texts if t.get_visible() and t.get_text().strip()
                   and frame.overlaps(t.get_window_extent())]
        if _inside(frame, ax.get_window_extent()) and not covered:
            return False
    axis = ax.xaxis.get_tightbbox()
    below = (ax.get_window_extent().y0 - axis.y0 if axis is not None else 0.0) / ax.figure.dpi
    offset = below + LEGEND_GAP_IN
    if abs(moved.get(legend, -1.0) - offset) * ax.figure.dpi <= 1:
        return False
    moved[legend] = offset
    legend.set_loc("upper center")
    legend.set_bbox_to_anchor(
        (0.5, 0.0), transform=ax.transAxes + ScaledTranslation(0, -offset,
                                                                ax.figure.dpi_scale_trans))
    return True


def fit_texts(fig: Figure) -> Figure:
    """Keep every text of fig readable, changing only where text goes. Lay fig out
    (constrained layout, no rendering); break the lines (titles.wrap: at ' · ', ' | ', '; ',
    ', ', then spaces) of every figure text (the suptitle) wider than the canvas less
    TEXT_PAD_IN at each side, and of each visible panel's title and x label wider than the
    panel; move a panel's legend to its right when it does not fit inside the panel or covers
    an annotation; make the figure taller by what the wrapped lines took from the panels'
    height; then break each y label longer than its panel with the panel's title and x axis
    (_label_room). Repeated, from the texts as the plot set them, until nothing changes (at
    most FIT_PASSES). Call it inside figure_style() after the last text is set: the layout
    pass creates the tick labels. Returns fig."""
    fig.draw_without_rendering()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    heights = {ax: ax.get_window_extent().height for ax in panels}
    rows = max((ax.get_subplotspec().get_gridspec().nrows for ax in panels
                if ax.get_subplotspec() is not None), default=1)
    # each pass breaks the texts as set by the plot, for the room the last layout left them
    labels = [t for ax in panels for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    original = {t: t.get_text() for t in [*fig.texts, *labels]}
    moved: dict = {}  # legends moved below their panel -> offset (inches)
    for _ in range(FIT_PASSES):  # a layout pass only after a change: most figures need none
        wrapped = False
        for text in fig.texts:
            wrapped |= _fit(text, fig.bbox.width - 2 * TEXT_PAD_IN * fig.dpi, original[text])
        for ax in panels:
            width = ax.get_window_extent().width
            for text in (ax.title, ax.xaxis.label):
                wrapped |= _fit(text, width, original[text])
        if wrapped:
            fig.draw_without_rendering()
        placed = False
        for ax in panels:
            placed |= _legend_below(ax, moved)
        if placed:
            fig.draw_without_rendering()
        lost = max((heights[ax] - ax.get_window_extent().height for ax in panels), default=0)
        if lost > 1:  # give the panels their height back
            fig.set_figheight(fig.get_figheight() + lost * rows / fig.dpi)
            fig.draw_without_rendering()
        labelled = False
        for ax in panels:
            labelled |= _fit(ax.yaxis.label, _label_room(ax), original[ax.yaxis.label])
        if not (wrapped or placed or labelled):
            break
        if labelled:
            fig.draw_without_rendering()
    return fig


LINESTYLES = ("-", "--", "-.", ":")


def linestyles(names: Sequence[str]) -> dict[str, str]:
    """A line style per series name, so that coinciding series stay visible."""
    return {name: LINESTYLES[i % len(LINESTYLES)] for i, name in enumerate(names)}


def palette(names: Sequence[str]) -> dict[str, tuple]:
    """A stable colour per series name (same name -> same colour in every figure)."""
    colors = sns.color_palette("colorblind", n_colors=max(len(names), 1))
    return {name: colors[i % len(colors)] for i, name in enumerate(names)}


_saved_formats: list[tuple[str, ...]] = [SAVE_FORMATS]  # the default of save_figure


@contextlib.contextmanager
def saving(formats: Sequence[str]):
    """save_figure writes only `formats` by default inside this block (the report embeds
    PNGs and needs no PDF)."""
    _saved_formats.append(tuple(formats))
    try:
        yield
    finally:
        _saved_formats.pop()


def save_figure(
    fig: Figure, out_dir: str | Path, name: str, formats: Sequence[str] | None = None,
    dpi: int = PNG_DPI,
) -> list[Path]:
    """Write fig as out_dir/name.{png,pdf} (atomically: temporary name, then rename); formats:
    default SAVE_FORMATS, or those of the enclosing `saving` block."""
    formats = _saved_formats[-1] if formats is None else formats
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
