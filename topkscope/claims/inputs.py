"""What a claim evaluates on: the build options, one model's runs (scope "model") and the whole
build (scope "table"), with the tables several claims share computed once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from topkscope import validate
from topkscope.analysis.criteria import ACCURACY_MARGIN_POINTS, PERPLEXITY_MARGIN_PCT


@dataclass(frozen=True)
class Options:
    """How the claims are built (one set for `claims`, `figures` and `report`).

    sparsifiers: training sparsifiers whose runs feed the distribution claims (default exact
    Top-k, the paper's TopK-SGD, and chunk-wise Top-k, SparseLoCo's on pseudo-gradients). max_snapshots: at most this many snapshots per condition get
    the full normality / fit / curve analysis; max_n: their subsample size (None: each
    statistic's own). margin: the accuracy claims' non-inferiority margin in points;
    perplexity_margin: the same in % of Top-k's perplexity. predictions: add the predicted
    P = 16 speed-up and time-to-accuracy rows of the runs' models. selection_csv: the
    selection benchmark those predictions use (None: the results' own, else the committed
    CPU reference)."""

    sparsifiers: tuple[str, ...] = ("topk", "chunk-topk")
    max_snapshots: int = 30
    max_n: int | None = None
    margin: float = ACCURACY_MARGIN_POINTS
    perplexity_margin: float = PERPLEXITY_MARGIN_PCT
    predictions: bool = True
    selection_csv: str | None = None

    def __post_init__(self) -> None:
        sparsifiers = self.sparsifiers
        object.__setattr__(self, "sparsifiers", (sparsifiers,) if isinstance(sparsifiers, str)
                           else tuple(sparsifiers))
        object.__setattr__(self, "max_snapshots", validate.integer(
            "max_snapshots", self.max_snapshots, 0, whole_floats=True))
        object.__setattr__(self, "margin", validate.number("margin", self.margin, 0.0))
        object.__setattr__(self, "perplexity_margin", validate.number(
            "perplexity_margin", self.perplexity_margin, 0.0))


@dataclass
class ModelRuns:
    """One (model, dataset, substitute)'s runs: `runs` (ours), `published` (imported from
    published logs, never pooled with ours) and the options."""

    key: tuple
    runs: list
    published: list
    options: Options


@dataclass
class Context:
    """The whole build: every loaded run, the roots they were found under (the scaling
    inputs' results roots; None: no predictions), the options; `model_runs` per model and the
    prediction tables, each computed once and shared by the claims that read them."""

    runs: list
    roots: list[Path] | None
    options: Options
    notes: list[str] = field(default_factory=list)

    @cached_property
    def own_runs(self) -> list:
        """The runs of ours (not imported from published logs) that name a model."""
        from topkscope.manifest import is_published

        return [r for r in self.runs if r.manifest.get("model") and not is_published(r.manifest)]

    @cached_property
    def root(self):
        """The results root the prediction inputs are read under: the one root, or the list
        of roots (topkscope.manifest.find_runs takes either)."""
        if not self.roots:
            return None
        return self.roots[0] if len(self.roots) == 1 else list(self.roots)

    @cached_property
    def selection(self):
        """The selection benchmark the predictions use (topkscope.perf.inputs.selection_table:
        the options' CSV, else the results' own, else the committed CPU reference)."""
        from topkscope.perf import inputs as inp

        root = self.root if not isinstance(self.root, list) else None
        return inp.selection_table(root, self.options.selection_csv,
                                   inp.selection_device(inp.DEFAULT_INPUTS))

    @cached_property
    def scaling(self):
        """The step-time model's table at P = 16 for the runs' models on every network preset
        at the paper's density, of the default methods and every selector whose counts the
        runs recorded (topkscope.perf.report.runs_scaling: a model of the user's own
        from its parameter count and its run's compute time); empty without roots."""
        import pandas as pd

        if not self.roots or not self.own_runs:
            return pd.DataFrame()
        from topkscope.claims.speedup import recorded_selectors
        from topkscope.perf.model import DEFAULT_METHODS
        from topkscope.perf.networks import available
        from topkscope.perf.report import CLAIM_P, runs_scaling

        recorded = [m for ms in recorded_selectors(self.own_runs).values() for m in ms]
        table, notes = runs_scaling(self.own_runs, available(), (CLAIM_P,), self.root,
                                    selection=self.selection,
                                    methods=tuple(dict.fromkeys([*DEFAULT_METHODS, *recorded])))
        self.notes += [f"scaling: {n}" for n in notes]
        return table

    @cached_property
    def time_to_accuracy(self):
        """The predicted time to accuracy of the runs' seeds
        (topkscope.perf.time_to_accuracy.time_to_accuracy_table)."""
        import pandas as pd

        if not self.roots:
            return pd.DataFrame()
        from topkscope.perf.time_to_accuracy import time_to_accuracy_table

        table, notes = time_to_accuracy_table(
            self.root, self.runs, selection=self.selection, margin=self.options.margin,
            perplexity_margin=self.options.perplexity_margin)
        self.notes += [f"time to accuracy: {n}" for n in notes]
        return table


def nan_if_none(value) -> float:
    return math.nan if value is None else float(value)
