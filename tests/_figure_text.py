"""The one check of a figure's text: everything drawn lies inside the canvas, nothing overlaps.

text_problems(fig) draws the figure with the Agg renderer at the PNG's resolution
(topkscope.plots.style.PNG_DPI) and takes the window extent of every visible, non-empty text
that is drawn: figure texts (the suptitle among them), axes titles, axis labels, offset texts,
the major and minor tick labels inside each axis's view, annotations and other axes texts, and
each legend's texts and title. Each extent must lie inside the canvas and no two may overlap
(tick labels of one axis included); a legend's frame may not cover any text but its own.
Boxes that touch within TOUCH_PX pixels count as apart.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from topkscope.plots.style import PNG_DPI

TOUCH_PX = 1.0


@dataclass(frozen=True)
class Drawn:
    """One box drawn on the canvas: what it is, its extent in pixels, and the legend it
    belongs to (None outside legends; a legend's frame and its texts share the legend)."""

    what: str
    box: Bbox
    legend: int | None = None
    is_frame: bool = False


def _in_view(axis, loc: float) -> bool:
    """Whether a tick at loc is drawn: inside the view interval, in the axis's scale."""
    lo, hi = sorted(axis.get_view_interval())
    t_lo, t_hi, t = axis.get_transform().transform([lo, hi, loc])
    tol = 1e-9 * abs(t_hi - t_lo)
    return t_lo - tol <= t <= t_hi + tol


def tick_labels(axis) -> list[Text]:
    """The major and minor tick labels an axis draws (both sides), those inside its view."""
    out = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks),
                        (axis.get_minorticklocs(), axis.get_minor_ticks)):
        for loc, tick in zip(locs, ticks(len(locs))):
            if tick.get_visible() and _in_view(axis, loc):
                out += [label for label in (tick.label1, tick.label2) if label.get_visible()]
    return out


def _shown(text: Text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _name(text: Text, where: str) -> str:
    return f"{where} {text.get_text()!r}"


def drawn_boxes(fig: Figure, dpi: float = PNG_DPI) -> tuple[Bbox, list[Drawn]]:
    """Draw fig at dpi; the canvas box and every drawn text's (and legend frame's) extent."""
    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    out: list[Drawn] = []

    def add(texts, where: str, legend=None) -> None:
        for text in texts:
            if _shown(text):
                out.append(Drawn(_name(text, where), text.get_window_extent(renderer),
                                 None if legend is None else id(legend)))

    def add_legend(legend, where: str) -> None:
        if legend is None or not legend.get_visible():
            return
        add([*legend.get_texts(), legend.get_title()], f"{where} legend", legend)
        out.append(Drawn(f"{where} legend frame", legend.get_window_extent(renderer), id(legend),
                         is_frame=True))

    add(fig.texts, "figure text")
    for legend in fig.legends:
        add_legend(legend, "figure")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"panel {i} ({ax.get_title()!r})"
        add([ax.title, ax._left_title, ax._right_title], f"{where} title")
        add([ax.xaxis.label, ax.yaxis.label], f"{where} axis label")
        add(ax.texts, f"{where} text")
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            add([axis.get_offset_text()], f"{where} {name} offset")
            add(tick_labels(axis), f"{where} {name} tick label")
        add_legend(ax.get_legend(), where)
    return fig.bbox, out


def _overlap(a: Bbox, b: Bbox) -> bool:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return width > TOUCH_PX and height > TOUCH_PX


def text_problems(fig: Figure, dpi: float = PNG_DPI) -> list[str]:
    """One line per text outside the canvas and per pair of overlapping boxes; [] when the
    figure's text is all readable."""
    canvas, boxes = drawn_boxes(fig, dpi)
    problems = []
    for d in boxes:
        b = d.box
        if (b.x0 < canvas.x0 - TOUCH_PX or b.y0 < canvas.y0 - TOUCH_PX
                or b.x1 > canvas.x1 + TOUCH_PX or b.y1 > canvas.y1 + TOUCH_PX):
            problems.append(f"{d.what} outside the canvas: x {b.x0:.0f}..{b.x1:.0f}, "
                            f"y {b.y0:.0f}..{b.y1:.0f} (canvas {canvas.width:.0f} x "
                            f"{canvas.height:.0f} px)")
    for a, b in itertools.combinations(boxes, 2):
        same_legend = a.legend is not None and a.legend == b.legend
        if same_legend and (a.is_frame or b.is_frame):
            continue  # a legend's own texts lie inside its frame
        if _overlap(a.box, b.box):
            problems.append(f"{a.what} overlaps {b.what}")
    return problems


def assert_text_fits(fig: Figure, dpi: float = PNG_DPI) -> None:
    """AssertionError listing every problem text_problems finds."""
    problems = text_problems(fig, dpi)
    assert not problems, f"{len(problems)} text problem(s):\n" + "\n".join(problems)
