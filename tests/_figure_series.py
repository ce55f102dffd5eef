"""The one check that a figure's series can be told apart: every series is named, and no two
look alike.

series_problems(fig) lays the figure out and takes, in every visible panel, the series a
reader has to decode: each line with a label of its own, and each unlabelled line of three
points or more (an axis-spanning reference line, two points, is not a series). A figure with
more than one series must name each: its label is an entry of a legend of the figure (a
panel's or the figure's, drawn inside the canvas) or a text on the figure, or — an unlabelled line — a legend entry
has its colour and one has its line style (colour: method, style: network). No two series of
different labels may share a look (colour and line style; a line without a line: colour and
marker) in one panel, and two series drawn in one panel with one line style must differ in
colour by at least MIN_DELTA_E (CIE76 ΔE in L*a*b*): the three oranges the convergence figure once gave
Top-k, DGC and RedSync (2019) were 26 to 41 apart.
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from topkscope.plots.style import PNG_DPI

MIN_DELTA_E = 30.0


def lab(color) -> np.ndarray:
    """CIE L*a*b* (D65) of a matplotlib colour."""
    rgb = np.asarray(to_rgb(color), dtype=float)
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722],
                    [0.0193, 0.1192, 0.9505]]) @ rgb / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a, b) -> float:
    return float(np.linalg.norm(lab(a) - lab(b)))


def _look(line: Line2D) -> tuple:
    """What tells a line apart: its colour and line style, or its marker when it has no line."""
    color = tuple(round(c, 3) for c in to_rgba(line.get_color()))
    style = line.get_linestyle()
    return (color, style) if style not in ("None", "", " ", "none") else \
        (color, f"marker {line.get_marker()}")


def _named(label: str) -> bool:
    return bool(label) and not label.startswith("_")


def _series(ax) -> list[Line2D]:
    return [line for line in ax.lines if line.get_visible() and (
        _named(line.get_label()) or len(np.atleast_1d(line.get_xdata())) >= 3)]


def _on_canvas(artist, fig: Figure, slack: float = 1.0) -> bool:
    box, canvas = artist.get_window_extent(), fig.bbox
    return (box.x0 >= canvas.x0 - slack and box.y0 >= canvas.y0 - slack
            and box.x1 <= canvas.x1 + slack and box.y1 <= canvas.y1 + slack)


def _legend_entries(fig: Figure) -> tuple[set[str], list]:
    """The texts and handles of every legend of the figure (the panels' and its own) that is
    drawn on the canvas (the selection-speed figures' legend was pushed off it)."""
    legends = [leg for leg in [*fig.legends, *[ax.get_legend() for ax in fig.axes]]
               if leg is not None and leg.get_visible() and _on_canvas(leg, fig)]
    texts = {t.get_text() for leg in legends for t in leg.get_texts()}
    handles = [h for leg in legends for h in leg.legend_handles]
    return texts, handles


def series_problems(fig: Figure, dpi: float = PNG_DPI) -> list[str]:
    """What keeps a reader from telling fig's series apart, one line each (empty: nothing),
    with fig drawn as its PNG is (Agg at PNG_DPI: constrained layout places legends anew)."""
    fig.set_dpi(dpi)
    FigureCanvasAgg(fig).draw()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    lines = [(i, line) for i, ax in enumerate(panels) for line in _series(ax)]
    if len({_look(line) for _, line in lines}) <= 1:
        return []  # one series: nothing to tell apart
    texts, handles = _legend_entries(fig)
    texts |= {t.get_text() for ax in panels for t in ax.texts} | {t.get_text() for t in fig.texts}
    colors = {_look(h)[0] for h in handles if isinstance(h, Line2D)} | {
        tuple(round(c, 3) for c in h.get_facecolor()) for h in handles
        if not isinstance(h, Line2D) and hasattr(h, "get_facecolor")}
    styles = {h.get_linestyle() for h in handles if isinstance(h, Line2D)}
    problems = []
    for i, line in lines:
        label = line.get_label()
        if _named(label):
            if label not in texts:
                problems.append(f"panel {i}: series {label!r} is in no legend and labelled "
                                "nowhere on the figure")
        elif not (_look(line)[0] in colors and line.get_linestyle() in styles):
            problems.append(f"panel {i}: an unlabelled series (colour {line.get_color()}, "
                            f"{line.get_linestyle()}) that no legend entry decodes")
    looks: dict[tuple, set[str]] = {}  # per panel: what a reader compares there
    for i, line in lines:
        if _named(line.get_label()):
            looks.setdefault((i, _look(line)), set()).add(line.get_label())
    for (i, look), labels in looks.items():
        if len(labels) > 1:
            problems.append(f"panel {i}: {sorted(labels)} share one colour and line style "
                            f"{look}")
    for i, ax in enumerate(panels):
        shown: dict[tuple, str] = {}
        for line in _series(ax):
            shown.setdefault(_look(line), line.get_label())
        for (a, la), (b, lb) in itertools.combinations(shown.items(), 2):
            if a[1] == b[1] and a[0] != b[0] and delta_e(a[0][:3], b[0][:3]) < MIN_DELTA_E:
                problems.append(f"panel {i}: {la!r} and {lb!r} have one line style and colours "
                                f"only ΔE {delta_e(a[0][:3], b[0][:3]):.0f} apart "
                                f"(< {MIN_DELTA_E:g})")
    return problems


def assert_series_decodable(fig: Figure) -> None:
    problems = series_problems(fig)
    assert not problems, f"{len(problems)} series problem(s):\n" + "\n".join(problems)
