"""The series check itself (tests/_figure_series.py), and the method styles figures draw with:
one (colour, line style) per method in every figure, the families' colours far apart."""

from __future__ import annotations

import itertools

import pytest

from tests._figure_series import MIN_DELTA_E, delta_e, series_problems
from topkscope.plots.style import FAMILY_COLORS, method_styles, new_figure
from topkscope.sparsify import available


def _panel():
    fig, axes = new_figure(1)
    return fig, axes[0][0]


def test_the_check_catches_unnamed_alike_and_near_coloured_series():
    fig, ax = _panel()  # two methods, no legend: what the selection-speed figures drew
    ax.plot([1, 2, 3], [1, 2, 3], color="#0072b2", label="Top-k")
    ax.plot([1, 2, 3], [2, 3, 4], color="#2ca02c", label="DGC")
    assert sorted(series_problems(fig)) == [
        "panel 0: series 'DGC' is in no legend and labelled nowhere on the figure",
        "panel 0: series 'Top-k' is in no legend and labelled nowhere on the figure"]
    ax.legend()
    assert series_problems(fig) == []
    fig, ax = _panel()  # the convergence figure's oranges: one style, ΔE 26 apart
    ax.plot([1, 2, 3], [1, 2, 3], color="#de8f05", ls="--", label="Top-k")
    ax.plot([1, 2, 3], [2, 3, 4], color="#d55e00", ls="--", label="RedSync (2019)")
    ax.plot([1, 2, 3], [3, 4, 5], color="#de8f05", ls="--", label="DGC")
    ax.legend()
    problems = series_problems(fig)
    assert "panel 0: ['DGC', 'Top-k'] share one colour and line style" in problems[0]
    assert any("'Top-k' and 'RedSync (2019)' have one line style and colours only ΔE 26 apart"
               in p for p in problems)
    fig, ax = _panel()  # one series needs no legend; reference lines are not series
    ax.plot([1, 2, 3], [1, 2, 3])
    ax.axhline(1.0, color="k", ls="--")
    assert series_problems(fig) == []


def test_every_method_has_one_look_in_every_figure_and_no_two_share_it():
    names = available()
    colors, styles = method_styles(names)
    looks = {(colors[n], styles[n]) for n in names}
    assert len(looks) == len(names)
    # the same method looks the same whatever else a figure draws
    for pair in (["topk", "dgc"], ["redsync-2019", "topk", "dense"], ["gaussiank_2019", "dgc"]):
        c, s = method_styles(pair)
        for name in pair:
            registered = name.replace("_", "-")
            assert (c[name], s[name]) == (colors[registered], styles[registered]), name
    # a family shares its hue, its members told apart by line style
    assert colors["gaussiank"] == colors["gaussiank-2019"] and \
        (styles["gaussiank"], styles["gaussiank-2019"]) == ("-", "--")
    assert len({colors[n] for n in ("dense", "topk", "gaussiank", "dgc", "redsync", "sidco",
                                    "tail-k", "randk", "threshold")}) == 9
    # names no sparsifier has (a baseline of the benchmark) take a look nobody has
    c, s = method_styles([*names, "torch.topk", "gtopk"])
    assert len({(c[n], s[n]) for n in c}) == len(names) + 2


def test_the_family_colours_are_far_apart():
    gaps = [delta_e(a, b) for a, b in itertools.combinations(FAMILY_COLORS, 2)]
    assert min(gaps) >= MIN_DELTA_E + 10
    with pytest.raises(ValueError):
        delta_e("not a colour", "#000000")
