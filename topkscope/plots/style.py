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


# a method family's colour, by the tens of its sparsifier's `plot_order` (Dense 0, Top-k 1x,
# Gaussian-k 2x, DGC 3x, RedSync 4x, SIDCo 5x, tail-k 6x, Rand-k 7x, threshold 8x): nine
# colours at least 44 apart in CIE L*a*b* (ΔE76; seaborn's colour-blind orange, vermilion and
# tan, which the convergence figure gave Top-k, DGC and RedSync (2019), are 26-41 apart)
FAMILY_COLORS = ("#000000", "#0072b2", "#ff7f0e", "#2ca02c", "#e377c2", "#8c564b", "#17becf",
                 "#bcbd22", "#332288")
SERIES_COLORS = (*FAMILY_COLORS[1:], FAMILY_COLORS[0])  # other series: black last


def palette(names: Sequence[str]) -> dict[str, str]:
    """A colour per series name, in the order given (SERIES_COLORS, nine colours far apart:
    with linestyles(), (colour, line style) differs between any two of up to 36 series).
    Methods take method_styles instead: the same look in every figure."""
    return {name: SERIES_COLORS[i % len(SERIES_COLORS)] for i, name in enumerate(names)}


def method_styles(names: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(colours, line styles) of the methods `names` (registry names or column prefixes),
    the same in every figure and never one (colour, line style) for two methods of a figure:
    a method's colour is its family's (FAMILY_COLORS by its sparsifier's `plot_order` tens:
    Gaussian-k 20 and Gaussian-k (2019) 21 share one hue) and its line style its place in the
    family (the units: 20 solid, 21 dashed). A pair another method of the figure holds (a
    name no sparsifier has — plot_order 1000 —, or a user's sparsifier placed in a taken
    slot) goes to the next free line style of its colour, then of the next colours."""
    from topkscope.sparsify import in_plot_order, plot_order_of

    colors: dict[str, str] = {}
    styles: dict[str, str] = {}
    taken: set[tuple[str, str]] = set()
    for name in in_plot_order(names):
        order = plot_order_of(name)
        family, place = (order // 10) % len(FAMILY_COLORS), order % 10
        choices = [(FAMILY_COLORS[(family + c) % len(FAMILY_COLORS)],
                    LINESTYLES[(place + j) % len(LINESTYLES)])
                   for c in range(len(FAMILY_COLORS)) for j in range(len(LINESTYLES))]
        pair = next((c for c in choices if c not in taken), choices[0])
        taken.add(pair)
        colors[name], styles[name] = pair
    return colors, styles


LEGEND_ENTRY_IN = 0.55  # inches of a legend entry besides its text (handle, padding)
LEGEND_CHAR_IN = 0.065  # inches per character of legend text at the style's font size


LEGEND_ROW_IN = 0.2  # inches a row of legend entries takes
MAX_PANEL_LEGEND = 6  # entries a panel's own legend holds; more go into one for the figure


def legends(fig: Figure, panels, **legend_kw) -> None:
    """A legend in each panel of `panels` (legend_kw: its placement), or — when a panel would
    list more than MAX_PANEL_LEGEND series, too many to fit in it — one legend below the
    figure's panels with every panel's series once (shared_legend): series that look the same
    in every panel (method_styles) need no legend of their own per panel."""
    entries = [ax.get_legend_handles_labels() for ax in panels]
    if max((len(labels) for _, labels in entries), default=0) <= MAX_PANEL_LEGEND:
        for ax in panels:
            ax.legend(**legend_kw)
        return
    named: dict[str, object] = {}
    for handles, labels in entries:
        for handle, label in zip(handles, labels):
            named.setdefault(label, handle)
    shared_legend(fig, list(named.values()), list(named))


def shared_legend(fig: Figure, handles, labels, ncol: int | None = None) -> None:
    """One legend for the whole figure, below the panels (constrained layout keeps room for
    it), for series that every panel shares; ncol None: as many columns as the widest entry
    lets fit across the figure, the figure made taller by the legend's rows so the panels
    keep their height."""
    if ncol is None:
        widest = LEGEND_ENTRY_IN + LEGEND_CHAR_IN * max((len(str(t)) for t in labels), default=1)
        ncol = max(1, min(len(labels), int(fig.get_figwidth() * 0.95 // widest)))
        fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * -(-len(labels) // ncol))
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, frameon=False)


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
