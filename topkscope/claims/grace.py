"""Claims on the GRACE data release (section `published`): does compression pay in the field's
own measurements, what it costs in accuracy, Top-k against Random-k, and whether our step-time
model tells the paying settings from the others. The numbers are topkscope.perf.grace's (its
docstring says how each is made); here are the rows and their verdicts
(topkscope.claims.verdicts). Every row's `inputs` names the source: sands-lab/grace-data@41915bb
GRACE_data_release.pickle, converted to results/reference/published/grace/measurements.csv.

    grace_pays                one row per compressor: its throughput against dense SGD's in the
                              same task, model, workers and bandwidth; unit = one compressor
                              setting (run); criterion speed-up > 1
    grace_accuracy_cost       one row per compressor: its accuracy-run quality against dense's
    grace_topk_vs_randk       Top-k's throughput against Random-k's at the same ratio (unit =
                              one shared setting; criterion Top-k faster)
    grace_topk_vs_randk_accuracy   the same for the accuracy runs
    grace_model_pays          our step-time model's pays / does not pay against the measured
                              one (unit = one predicted Top-k, Random-k or DGC throughput row)

Verdicts: the share rules (pays, Top-k against Random-k, the model) are the fraction rule on the
share alone (verdicts.fraction_verdict without an interval: one run per setting, nothing to
resample): holds at or above 90%, fails at or below 10%, else mixed. The accuracy rows are
insufficient-data with reason seeds-not-published: the release has one run per setting and no
seed (run_no 0 but for 62 ml-20m data-volume runs, numbered 4), so a difference cannot be told from
seed noise; their evidence gives the differences.

    python -m topkscope.claims.grace     # results/reference/published/grace/claims.csv
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.claims import phrases, verdicts
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.claims.row import ClaimRow, frame
from topkscope.importers import grace as imp
from topkscope.perf import grace as pg

SECTION = "published"
CLAIMS_CSV = imp.COMMITTED / "claims.csv"
INPUTS = (f"published: {imp.short_source()}, converted to "
          "results/reference/published/grace/measurements.csv")
CONDITION = "GRACE release: V100 GPUs, 1-8 workers, 1/10/25 Gbit/s"
SHARE_RULE = (
    "unit = one setting of the release (one run); the share of units meeting the criterion, "
    f"alone (one run per setting, no interval): holds at or above "
    f"{verdicts.HOLDS_FRACTION:.0%}, fails at or below {verdicts.FAILS_FRACTION:.0%}, else "
    "mixed; fewer than 3 units insufficient-data")
ACCURACY_RULE = (
    "one accuracy run per setting and no seed in the release: insufficient-data "
    "(seeds-not-published); evidence: the differences from dense SGD's run(s) of the setting")
SHOWN = 3  # settings named in a row's evidence, then "and N more"


@functools.lru_cache(maxsize=1)
def _runs() -> pd.DataFrame:
    return pg.runs()


GRADED = {"grace_model_pays": ("modelled", "the step-time model's predicted throughput "
                                             "(topkscope.perf.grace)")}


def _graded(claim: str) -> dict:
    """The registry's names of a row and its evidence grade: the release's measurements are
    published; the model's agreement with them rests on our model (modelled)."""
    key = "grace_topk_vs_randk" if claim == "grace_topk_vs_randk_accuracy" else claim
    grade, inputs = GRADED.get(claim, ("published", INPUTS))
    return {"claim_key": key, "claim_family": "published", "evidence_grade": grade,
            "weakest_inputs": inputs}


def _share_row(claim: str, sparsifier: str, statement: str, n_pass: int, n: int,
               evidence: str, **fields) -> ClaimRow:
    verdict = verdicts.fraction_verdict(n_pass, n)
    return ClaimRow(
        model=None, dataset=None, dataset_substitute=None, claim=claim, sparsifier=sparsifier,
        statement=statement, n_units=n, n_runs=n, fraction=n_pass / n if n else np.nan,
        verdict=verdict, reason=verdicts.fraction_reason(verdict, n, n),
        cause=verdicts.fraction_cause(n_pass, n), evidence=evidence, rule=SHARE_RULE,
        condition=CONDITION, section=SECTION, inputs=INPUTS, **_graded(claim), **fields)


def _named(texts: list[str]) -> str:
    more = f" and {len(texts) - SHOWN} more" if len(texts) > SHOWN else ""
    return "; ".join(texts[:SHOWN]) + more


def pays_rows(run_table: pd.DataFrame | None = None) -> list[ClaimRow]:
    """grace_pays: one row per compressor (module docstring)."""
    pairs = pg.pairs(_runs() if run_table is None else run_table)
    out = []
    for s in pg.pays_summary(pairs).itertuples(index=False):
        where = [w for w in s.where_it_pays.split("; ") if w]
        out.append(_share_row(
            "grace_pays", s.compressor,
            f"{s.compressor} gives a higher training throughput than dense SGD in the same "
            "task, model, workers and bandwidth (GRACE release)", s.pays, s.settings,
            f"{s.pays} of {s.settings} settings faster than dense; speed-up median "
            f"{s.median_speedup:.2f}x, range {s.min_speedup:.2f}-{s.max_speedup:.2f}x"
            + (f"; pays at {_named(where)}" if where else "; pays nowhere"),
            diff_mean=s.median_speedup, diff_unit="speed-up ×", speedup_low=s.min_speedup,
            speedup_high=s.max_speedup, metric="throughput"))
    return out


def accuracy_rows(run_table: pd.DataFrame | None = None) -> list[ClaimRow]:
    """grace_accuracy_cost: one row per compressor, insufficient-data (module docstring)."""
    acc = pg.accuracy_pairs(_runs() if run_table is None else run_table)
    out = []
    for compressor, g in acc.groupby("compressor", sort=True):
        points = g[g["unit"] == "points"]["difference"].to_numpy(np.float64)
        ppl = g[g["unit"] == "perplexity"]["difference"].to_numpy(np.float64)
        parts = []
        if len(points):
            parts.append(f"{len(points)} runs in points: median {np.median(points):+.2f}, "
                         f"range {points.min():+.2f} … {points.max():+.2f}")
        if len(ppl):
            parts.append(f"{len(ppl)} PTB runs in perplexity (sign flipped, + is better): "
                         f"median {np.median(ppl):+.2f}")
        out.append(ClaimRow(
            model=None, dataset=None, dataset_substitute=None, claim="grace_accuracy_cost",
            sparsifier=compressor,
            statement=f"{compressor} trains to dense SGD's quality (GRACE release)",
            n_runs=len(g), n_units=0, n_seeds=0, verdict="insufficient-data",
            reason="seeds-not-published", cause="one run per setting, seeds not published",
            evidence="difference from dense: " + "; ".join(parts), rule=ACCURACY_RULE,
            condition=CONDITION, section=SECTION, inputs=INPUTS, metric="accuracy",
            diff_mean=float(np.median(points)) if len(points) else np.nan,
            diff_unit="points" if len(points) else "", **_graded("grace_accuracy_cost")))
    return out


def topk_randk_rows(run_table: pd.DataFrame | None = None) -> list[ClaimRow]:
    """grace_topk_vs_randk (throughput, a share) and its accuracy row (module docstring)."""
    r = _runs() if run_table is None else run_table
    thr = pg.topk_vs_randk(r)
    ratios = thr["ratio_topk_randk"].to_numpy(np.float64)
    faster = thr[thr["ratio_topk_randk"] > 1]
    named = [f"{pg.setting_text({**row, 'compressor': 'topk'})} {row['ratio_topk_randk']:.2f}x"
             for _, row in faster.sort_values("ratio_topk_randk", ascending=False).iterrows()]
    rows = [_share_row(
        "grace_topk_vs_randk", "topk",
        "Top-k gives a higher training throughput than Random-k at the same ratio, error "
        "feedback, task, model, workers and bandwidth (GRACE release)", len(faster), len(thr),
        f"Top-k faster in {len(faster)} of {len(thr)} shared settings; Top-k / Random-k "
        f"median {np.median(ratios):.2f}, range {ratios.min():.2f}-{ratios.max():.2f}"
        + (f"; faster at {_named(named)}" if named else ""),
        diff_mean=float(np.median(ratios)), diff_unit="Top-k / Random-k throughput",
        metric="throughput")]
    acc = pg.topk_vs_randk(r, "accuracy")
    points = acc[acc["unit"] == "points"]["difference"].to_numpy(np.float64)
    better = int((acc["difference"] > 0).sum())
    rows.append(ClaimRow(
        model=None, dataset=None, dataset_substitute=None,
        claim="grace_topk_vs_randk_accuracy", sparsifier="topk",
        statement="Top-k trains to a better quality than Random-k at the same ratio (GRACE "
                  "release)", n_runs=2 * len(acc), n_units=0, n_seeds=0,
        verdict="insufficient-data", reason="seeds-not-published",
        cause="one run per setting, seeds not published",
        evidence=(f"Top-k better in {better} of {len(acc)} shared accuracy settings; "
                  f"Top-k - Random-k in points: median {np.median(points):+.2f}, range "
                  f"{points.min():+.2f} … {points.max():+.2f} ({len(points)} settings)"),
        rule=ACCURACY_RULE, condition=CONDITION, section=SECTION, inputs=INPUTS,
        metric="accuracy", diff_mean=float(np.median(points)), diff_unit="points",
        **_graded("grace_topk_vs_randk_accuracy")))
    return rows


def model_rows(run_table: pd.DataFrame | None = None) -> list[ClaimRow]:
    """grace_model_pays: the model's pays / does not pay against the measurement's."""
    model = pg.model_rows(_runs() if run_table is None else run_table)
    rows = model[(model["mode"] == "throughput") & (model["reason"] == "")]
    agree = int((rows["pays_measured"] == rows["pays_predicted"]).sum())
    err = rows["error"].abs().to_numpy(np.float64)
    c = pg.confusion(model)
    return [_share_row(
        "grace_model_pays", "topk, randomk, dgc",
        "the step-time model tells the settings where Top-k, Random-k and DGC beat dense SGD "
        "from the others (GRACE release)", agree, len(rows),
        f"agree on {agree} of {len(rows)} rows (measured pays / predicted pays "
        f"{c.loc['pays', 'pays']}, pays / not {c.loc['pays', 'does not pay']}, not / pays "
        f"{c.loc['does not pay', 'pays']}, not / not {c.loc['does not pay', 'does not pay']}); "
        f"throughput error |predicted / measured - 1| median {np.median(err):.1%}, largest "
        f"{err.max():.0%}",
        model_error=float(np.median(err)), metric="throughput",
        selection_basis="published: the release's compression cost at another bandwidth")]


def claim_rows() -> pd.DataFrame:
    """Every GRACE row, as the claims table's frame."""
    return frame([*pays_rows(), *accuracy_rows(), *topk_randk_rows(), *model_rows()])


def _pays(rows: pd.DataFrame) -> str:
    """'faster than dense SGD: Top-k in 11 of 71 settings (median 0.55×), Random-k in 37 of
    74 (median 1×), …' (median: the throughput over dense SGD's)."""
    by = rows.set_index("sparsifier")
    parts = []
    for name in ("topk", "randomk", "dgc"):
        if name in by.index:
            r = by.loc[name]
            parts.append(f"{NAMES[name]} in {int(round(r['fraction'] * r['n_units']))} of "
                         f"{int(r['n_units'])}{' settings' if not parts else ''} (median "
                         f"{phrases.number(r['diff_mean'], 2)}×)")
    return "faster than dense SGD: " + ", ".join(parts)


NAMES = {"topk": "Top-k", "randomk": "Random-k", "dgc": "DGC"}  # the release's compressors


def _against(rows: pd.DataFrame) -> str:
    r = rows[rows["claim"] == "grace_topk_vs_randk"].iloc[0]
    return (f"Top-k's throughput was above Random-k's in {phrases.pct(r['fraction'])} of "
            f"{int(r['n_units'])} shared settings (median {phrases.number(r['diff_mean'], 2)}× "
            "Random-k's): the O(d) selector was usually faster")


def _model(rows: pd.DataFrame) -> str:
    r = rows.iloc[0]
    return (f"our model and the measurement agree on pays / does not pay in "
            f"{int(round(r['fraction'] * r['n_units']))} of {int(r['n_units'])} rows (median "
            f"throughput error {phrases.pct(r['model_error'])})")


for _name, _question, _rule, _evaluate, _questions, _show in (
    ("grace_pays", "Does each compressor of the GRACE release beat dense SGD's throughput?",
     SHARE_RULE, pays_rows,
     (Question("grace_pays", "Does compression pay in the field's own measurements (the GRACE "
               "release: 16 compressors on V100s, 1–25 Gbit/s)?", on="any", order=200,
               summary=7, short="Does compression pay in the field's measurements?"),),
     Presentation("published", "beats dense throughput", _pays)),
    ("grace_accuracy_cost", "What does each compressor of the GRACE release cost in accuracy?",
     ACCURACY_RULE, accuracy_rows, (), Presentation("published")),
    ("grace_topk_vs_randk", "Is Top-k faster than Random-k in the GRACE release?", SHARE_RULE,
     topk_randk_rows,
     (Question("grace_topk_vs_randk", "Is exact Top-k faster than Random-k, the O(d) "
               "selector, in the GRACE release?", on="any", order=210),),
     Presentation("published", "Top-k faster than Random-k", _against)),
    ("grace_model_pays", "Does our step-time model tell where compression pays in the GRACE "
     "release?", SHARE_RULE, model_rows,
     (Question("grace_model_pays", "Does our step-time model tell where compression pays in "
               "the GRACE release?", on="any", order=220),),
     Presentation("published", "model agrees", _model)),
):
    if __name__ != "__main__":  # `python -m` runs this file again after the package import
        register_claim(Claim(_name, _question, "", _rule, SECTION, "reference",
                             lambda evaluate=_evaluate: evaluate(), family="published",
                             questions=_questions, show=_show))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CLAIMS_CSV, help="the CSV to write")
    args = parser.parse_args(argv)
    from topkscope.io import write_bytes_atomic

    table = claim_rows()
    write_bytes_atomic(args.out, imp.csv_bytes(table))
    print(f"wrote {args.out}: {len(table)} rows")
    for r in table.itertuples(index=False):
        print(f"{r.claim} {r.sparsifier}: {r.verdict} ({r.evidence})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
