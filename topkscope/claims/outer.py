"""The claims on pseudo-gradients: Top-k where it is used today, in DiLoCo-style training (H
inner steps per worker, then one exchange of the accumulated pseudo-gradient u = beta e + Delta;
SparseLoCo, Sarfi et al., arXiv 2508.15706: chunk-wise Top-k, 2-bit values, the error-feedback
accumulator as the only outer momentum).

The distribution claims (u bell-shaped, delta below the bounds and the Gaussian value, the
selectors' counts) apply to the outer u as to the per-step u — the outer runs' condition names
their outer loop (`outer=average(H=15, ...)`), so they are never pooled with per-step runs; two
claims of this module ask what only a pseudo-gradient exchange asks:

chunk_contraction     unit: one recorded u (step, rank, density) with chunk-wise Top-k evaluated
                      on it (`chunk_topk_ratio` beside `topk_ratio`); criterion: chunk-wise
                      Top-k keeps at least 90% of the energy global Top-k keeps,
                      1 - delta_chunk >= 0.9 (1 - delta). Fraction rule.
quantization_error    unit: the same with the recorder's `quantize` setting, on the set
                      training sends (chunk-wise Top-k: `chunk_topk_quantized_ratio` beside
                      `chunk_topk_ratio`); criterion: quantizing the sent values loses at most
                      10% of the energy the selection keeps, delta_q - delta <= 0.1 (1 - delta).
                      Fraction rule. quantization_error_global: the same on the global Top-k
                      set (`topk_quantized_ratio`), a set training does not send, named apart.

And three convergence claims, each a paired-seed comparison of two trainings of one outer
experiment (the same seed, the same data), by the accuracy claims' rule (margin 1 point; 3% of
perplexity), the effect the first training's final metric minus the second's:

sparseloco_accuracy           SparseLoCo-style (chunk-wise Top-k, quantized, error feedback as
                              momentum) trains as well as dense DiLoCo (outer Nesterov)
sparseloco_accuracy_per_step  ... as well as per-step TopK-SGD sending the same bytes
outer_momentum_accuracy       the error-feedback accumulator does outer momentum's work:
                              SparseLoCo-style without outer momentum trains as well as with it

`bytes_ratio` is the first training's wire bytes over the second's (train `bytes_sent`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from topkscope.analysis import criteria
from topkscope.analysis.seeds import final_metric
from topkscope.analysis.units import ConditionUnits, floats, with_runs
from topkscope.claims import phrases, verdicts
from topkscope.claims.build import run_ids
from topkscope.claims.distribution import fraction_row, per_density
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.condition import Condition, run_condition

CHUNK_SHARE = 0.9     # chunk-wise Top-k keeps at least this share of global Top-k's energy
QUANTIZED_LOSS = 0.1  # quantization loses at most this share of the energy Top-k keeps


def is_outer(manifest: dict) -> bool:
    """A run of DiLoCo-style training (its manifest's `outer` block)."""
    return bool(manifest.get("outer") or (manifest.get("config") or {}).get("outer"))


def training_of(manifest: dict) -> str:
    """Which training of an outer experiment a run is (topkscope.reproduce.plan's
    outer_trainings, its outer learning rate aside: outer_lr): sparseloco,
    sparseloco-nesterov, diloco, diloco-average, or topk-per-step for a per-step run; else
    the sparsifier's name."""
    outer = manifest.get("outer") or (manifest.get("config") or {}).get("outer") or {}
    sparsifier = str(manifest.get("sparsifier"))
    if not outer:
        return f"{sparsifier}-per-step"
    step = outer.get("step")
    if sparsifier == "dense":
        return "diloco" if step == "nesterov" else "diloco-average"
    return "sparseloco" if step == "average" else "sparseloco-nesterov"


def outer_experiments(runs: list) -> set:
    """The experiments with an outer-loop run (their per-step runs belong to their design)."""
    return {r.manifest.get("experiment") for r in runs if is_outer(r.manifest)}


# ------------------------------------------------------------------ on the outer u
def chunk_contraction(units: ConditionUnits) -> list[dict]:
    u = units.u
    if u.empty or "chunk_topk_ratio" not in u or not u["chunk_topk_ratio"].notna().any():
        return []
    chunk, exact = floats(u["chunk_topk_ratio"]), floats(u["topk_ratio"])
    ok = np.isfinite(chunk) & np.isfinite(exact) & (exact < 1.0)
    kept, kept_exact = 1.0 - chunk[ok], 1.0 - exact[ok]
    passed = kept >= CHUNK_SHARE * kept_exact
    share = kept / kept_exact
    evidence = (f"median delta chunk-wise {np.median(chunk[ok]):.4g} vs global "
                f"{np.median(exact[ok]):.4g}; chunk-wise keeps {np.median(share):.3g}x the "
                f"energy global Top-k keeps (5th-95th percentile {np.percentile(share, 5):.3g}"
                f"-{np.percentile(share, 95):.3g})" if ok.any() else "no finite ratios")
    row = fraction_row(passed, evidence, u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok])
    if ok.any():
        row.update(diff_mean=float(np.median(share)), diff_unit="of global Top-k's kept energy")
    return [row]


def quantization_error(units: ConditionUnits, sent: str = "chunk_topk") -> list[dict]:
    """Quantizing the values a selection sends: the set training sends (chunk-wise Top-k:
    the recorder's chunk_topk_quantized_ratio against chunk_topk_ratio, `sent` its column
    prefix) or, for quantization_error_global, the global Top-k set (topk_quantized_ratio
    against topk_ratio)."""
    u = units.u
    q_col, exact_col = ((f"{sent}_quantized_ratio", f"{sent}_ratio") if sent
                        else ("topk_quantized_ratio", "topk_ratio"))
    if u.empty or q_col not in u or exact_col not in u or not u[q_col].notna().any():
        return []
    q, exact = floats(u[q_col]), floats(u[exact_col])
    ok = np.isfinite(q) & np.isfinite(exact) & (exact < 1.0)
    added = q[ok] - exact[ok]
    passed = added <= QUANTIZED_LOSS * (1.0 - exact[ok])
    share = added / (1.0 - exact[ok])
    which = "chunk-wise Top-k's sent set" if sent else "the global Top-k set"
    evidence = (f"on {which}: quantization adds {np.median(added):.3g} to delta (median; "
                f"{np.median(share):.3g} of the energy the selection keeps, 95th percentile "
                f"{np.percentile(share, 95):.3g}, largest {share.max():.3g})" if ok.any()
                else "no finite ratios")
    row = fraction_row(passed, evidence, u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok])
    if ok.any():
        row.update(diff_mean=float(np.median(share)),
                   diff_unit="of the kept energy lost (median)")
    return [row]


# ------------------------------------------------------------------ trainings compared
PAIRS = {  # claim -> (training, reference, statement)
    "sparseloco_accuracy": ("sparseloco", "diloco",
                            "SparseLoCo-style Top-k on pseudo-gradients trains as well as dense "
                            "DiLoCo"),
    "sparseloco_accuracy_per_step": ("sparseloco", "topk-per-step",
                                     "SparseLoCo-style Top-k trains as well as per-step "
                                     "TopK-SGD sending the same bytes"),
    "outer_momentum_accuracy": ("sparseloco", "sparseloco-nesterov",
                                "the error-feedback accumulator does the work of outer "
                                "momentum (SparseLoCo-style trains as well without it)"),
}
DIFF_UNITS = {"accuracy": "points", "perplexity": "% of the reference's"}


def _wire_bytes(run) -> float:
    tr = getattr(run, "train", None)
    if tr is None or tr.empty or "bytes_sent" not in tr:
        return math.nan
    return float(tr.drop_duplicates("step", keep="last")["bytes_sent"].astype(float).sum())


def outer_lr(manifest: dict) -> float | None:
    """The outer learning rate of an outer-loop run (None for a per-step one)."""
    outer = manifest.get("outer") or (manifest.get("config") or {}).get("outer") or {}
    lr = outer.get("lr")
    return float(lr) if isinstance(lr, (int, float)) else None


def inner_steps(manifest: dict) -> int | None:
    """H, the inner steps between two exchanges of an outer-loop run (None for a per-step
    one)."""
    outer = manifest.get("outer") or (manifest.get("config") or {}).get("outer") or {}
    h = outer.get("inner_steps")
    return int(h) if isinstance(h, (int, float)) else None


def main_inner_steps(runs: list) -> int | None:
    """The H most of an experiment's outer-loop runs train at (the config's; runs at other H,
    the tails over H, are compared by claims.atlas alone), the smaller on a tie."""
    counts: dict[int, int] = {}
    for run in runs:
        h = inner_steps(run.manifest)
        if h is not None:
            counts[h] = counts.get(h, 0) + 1
    return min(counts, key=lambda h: (-counts[h], h)) if counts else None


def trainings_rows(model: ModelRuns) -> list[dict]:
    """The paired comparisons of PAIRS for every outer experiment of the model, at its main H
    (main_inner_steps). A training run at several outer learning rates (the plan's sweep) is
    compared at its best: the rate whose paired seeds' mean final held-out metric is best
    (best_reference), and the row's reference says which rate and of which it was the best."""
    out = []
    for experiment in sorted(outer_experiments(model.runs), key=str):
        runs = [r for r in model.runs if r.manifest.get("experiment") == experiment
                and r.manifest.get("status") in ("complete", "failed")]
        h = main_inner_steps(runs)
        runs = [r for r in runs if inner_steps(r.manifest) in (None, h)]
        by: dict[str, dict[float | None, dict[int, object]]] = {}
        for run in runs:
            m = run.manifest
            by.setdefault(training_of(m), {}).setdefault(outer_lr(m), {})[m.get("seed", 0)] = run
        for claim, (mine, ref, statement) in PAIRS.items():
            if mine not in by and ref not in by:
                continue
            mine_runs = best_reference(by.get(mine, {}), {})[1]
            lr, ref_runs, label, rates = best_reference(by.get(ref, {}), mine_runs, ref)
            out.append(_pair_row(claim, statement, experiment, mine_runs, ref_runs, mine,
                                 ref, model.options, label, rates))
    return out


def best_reference(groups: dict, mine: dict, name: str = "") -> tuple:
    """(lr, {seed: run}, label, the rates shown) of a training run at one or several outer
    learning rates:
    one rate: its runs ('diloco lr 0.7'); several: the rate with the best
    mean final held-out metric over the seeds it shares with `mine` (every seed when `mine` is
    empty), 'diloco lr 0.5 (best of 3)'. The choice reads the same held-out metric
    the comparison reports, so it favours the reference: a claim that the other training
    matches it is the harder to hold."""
    if not groups:
        return None, {}, name, []
    rates = sorted(groups, key=lambda r: (r is None, r or 0.0))
    shown = [f"{r:g}" for r in rates if r is not None]

    def score(rate) -> float:
        finals = [final_metric(run) for seed, run in groups[rate].items()
                  if not mine or seed in mine]
        finals = [f for f in finals if f]
        if not finals:
            return -math.inf
        sign = 1.0 if criteria.higher_is_better(finals[0][1]) else -1.0
        return sign * float(np.mean([f[0] for f in finals]))

    best = max(rates, key=score) if len(rates) > 1 else rates[0]
    label = name if best is None else f"{name} lr {best:g}"
    if len(rates) > 1:  # the rule says how the best was chosen, the evidence of which rates
        label += f" (best of {len(rates)})"
    return best, groups[best], label, shown


def _pair_row(claim, statement, experiment, mine, ref, mine_name, ref_name, options,
              reference: str = "", rates: list[str] | None = None) -> dict:
    """One comparison's row; reference: the reference training as the row names it (its
    outer learning rate, and whether it was the best of a sweep: best_reference), rates: the
    outer learning rates it was trained at (the evidence names them)."""
    seeds = sorted(set(mine) & set(ref))
    finals = {s: (final_metric(mine[s]), final_metric(ref[s])) for s in seeds}
    seeds = [s for s in seeds if finals[s][0] and finals[s][1]]
    name = finals[seeds[0]][1][1] if seeds else "accuracy"
    margin = criteria.default_margin(name, options.margin, options.perplexity_margin)
    failed = sum(mine[s].manifest.get("status") == "failed" for s in seeds)
    diffs = [criteria.paired_difference(name, finals[s][1][0], finals[s][0][0]) for s in seeds]
    mean, low, high = criteria.paired_interval(diffs) if diffs else (math.nan,) * 3
    verdict, cause = verdicts.convergence_verdict(low, high, len(seeds), failed, name, margin)
    wire = [_wire_bytes(mine[s]) / _wire_bytes(ref[s]) for s in seeds
            if _wire_bytes(ref[s]) > 0]
    condition = f"{experiment}: {mine_name} vs {ref_name}"
    runs = [*mine.values(), *ref.values()]
    reference = reference or ref_name
    fields = with_runs(replace(run_condition(runs[0].manifest), reference=reference), runs) \
        if runs else Condition(experiment=experiment, reference=reference)
    per_seed = ", ".join(f"seed {s} {criteria.signed(d)}" for s, d in zip(seeds, diffs))
    evidence = (f"{condition}: final {name} {mine_name} "
                f"{np.mean([finals[s][0][0] for s in seeds]):.4g} vs {ref_name} "
                f"{np.mean([finals[s][1][0] for s in seeds]):.4g} over {len(seeds)} seed(s)"
                f"; per seed ({mine_name} − {ref_name}) {per_seed}" if seeds
                else f"{condition}: no seed has runs of both")
    if wire and np.isfinite(wire).all():
        evidence += f"; wire bytes {np.mean(wire):.3g}x the reference's"
    if rates and len(rates) > 1:
        evidence += (f"; {reference}: the best of outer lr {', '.join(rates)} by the mean "
                     "final held-out metric over the paired seeds")
    return {"claim_key": claim, "sparsifier": mine_name, "statement": statement,
            "condition": condition, "fields": fields, "run_ids": run_ids(runs),
            "section": "convergence", "metric": name,
            "margin": margin, "diff_unit": DIFF_UNITS.get(name, ""),
            "n_runs": len(mine) + len(ref), "n_units": len(seeds), "n_seeds": len(seeds),
            "n_failed_seeds": failed, "diff_mean": mean, "ci_low": low, "ci_high": high,
            "bytes_ratio": float(np.mean(wire)) if wire else math.nan,
            "evidence": evidence, "verdict": verdict, "cause": cause,
            "reason": verdicts.convergence_reason(verdict, len(seeds), low, high, failed)}


_RULE_PAIR = ("unit = one seed with a run of both trainings of the outer experiment; the "
              "paired difference of the final held-out metric (accuracy in points, perplexity "
              "in % of the reference's), its 95% t-interval against the non-inferiority margin "
              "(1 point; 3%): holds above it, fails below, else inconclusive; fewer than "
              f"{criteria.MIN_SEEDS} seeds: insufficient-data; a reference trained at several "
              "outer learning rates is the one with the best mean final held-out metric over "
              "the paired seeds")
OUTER_QUESTION = Question(
    "outer_accuracy", "Does SparseLoCo-style Top-k train as well as dense DiLoCo, as per-step "
    "TopK-SGD at equal bytes, and without outer momentum?", on="outer",
    also=("sparseloco_accuracy_per_step", "outer_momentum_accuracy"), summary=6, order=160,
    short="Top-k on DiLoCo pseudo-gradients?")
for _claim in (
    Claim("chunk_contraction", "Does chunk-wise Top-k contract the pseudo-gradient like global "
          "Top-k?", "chunk-wise Top-k keeps at least 90% of the energy global Top-k keeps",
          "unit = one recorded u (step, rank, density) with chunk-wise Top-k evaluated; "
          "criterion 1 - delta_chunk >= 0.9 (1 - delta_topk); " + verdicts.FRACTION_RULE,
          "distribution", "condition", lambda units: per_density(units, chunk_contraction),
          "outer_contraction",
          family="outer",
          questions=(Question("outer_chunk", "Does chunk-wise Top-k contract the "
                              "pseudo-gradient like global Top-k (keeping 90% of global "
                              "Top-k's energy)?", on="outer", order=130),),
          show=Presentation("outer", "chunk-wise keeps 90% of global", phrases.effect)),
    Claim("quantization_error", "What does quantizing the sent values add to the error of "
          "the selection training sends?",
          "quantizing the values chunk-wise Top-k sends loses at most 10% of the energy it "
          "keeps",
          "unit = one recorded u (step, rank, density) with the recorder's quantize setting; "
          "on the set training sends (chunk-wise Top-k: chunk_topk_quantized_ratio, "
          "chunk_topk_ratio), criterion delta_quantized - delta <= 0.1 (1 - delta); "
          + verdicts.FRACTION_RULE,
          "distribution", "condition", lambda units: per_density(units, quantization_error),
          "outer_contraction", family="outer",
          questions=(Question("outer_quantization", "Does quantizing the values chunk-wise "
                              "Top-k sends lose at most 10% of the energy it keeps?",
                              on="outer", order=140),),
          show=Presentation("outer", "quantization loses ≤ 10% (sent set)", phrases.effect)),
    Claim("quantization_error_global", "What would quantizing the global Top-k set add to its "
          "error?", "quantizing the values of the global Top-k set loses at most 10% of the "
          "energy it keeps (a set training does not send: chunk-wise Top-k's is sent)",
          "unit = one recorded u (step, rank, density) with the recorder's quantize setting; "
          "on the global Top-k set (topk_quantized_ratio, topk_ratio), criterion "
          "delta_quantized - delta <= 0.1 (1 - delta); " + verdicts.FRACTION_RULE,
          "distribution", "condition",
          lambda units: per_density(units, lambda at: quantization_error(at, sent="")),
          "outer_contraction", family="outer",
          show=Presentation("outer", "quantization loses ≤ 10% (global set)")),
    Claim("sparseloco_accuracy", "Does SparseLoCo-style Top-k on pseudo-gradients train as well "
          "as dense DiLoCo, and as per-step TopK-SGD at equal bytes?", PAIRS[
              "sparseloco_accuracy"][2], _RULE_PAIR, "convergence", "model", trainings_rows,
          "metric_vs_bytes", family="outer", questions=(OUTER_QUESTION,),
          # the intervals say why a comparison is undecided (against the 1-point margin)
          show=Presentation("outer", "trains as well as the reference", phrases.compared,
                            phrases.compared_lead, says_why=True)),
    Claim("sparseloco_accuracy_per_step", "Does it train as well as per-step TopK-SGD at equal "
          "bytes?", PAIRS["sparseloco_accuracy_per_step"][2], _RULE_PAIR, "convergence",
          "model", lambda model: [], "metric_vs_bytes", family="outer",
          show=Presentation("outer", "trains as well as the reference", phrases.compared)),
    Claim("outer_momentum_accuracy", "Does the error-feedback accumulator do the work of outer "
          "momentum?", PAIRS["outer_momentum_accuracy"][2], _RULE_PAIR, "convergence",
          "model", lambda model: [], "metric_vs_bytes", family="outer",
          show=Presentation("outer", "trains as well as the reference", phrases.compared)),
):
    register_claim(_claim)
