"""The P = 16 claims of the published Gaussian-k rule on published GPU inputs with their bands:
verdicts only where the whole band agrees and no assumed input decides. The bands, their
grades, the speed-ups at their corners and the inputs whose band alone decides are
topkscope.perf.gpu_bands's (its docstring says where each input comes from); here are the rows
and the verdict rules.

Claims per model with published GPU inputs (VGG-16, ResNet-20, AlexNet, ResNet-50, LSTM-PTB)
and network (10gbe, ib100: the presets fitted on published cluster measurements): the rule's
speed-up over Dense and Top-k, Dense + WFBP, Dense fp16 (topkscope.claims.speedup.CLAIMS), over
exact Top-k alone (`_topk`) and over gTop-k (`_gtopk`), all with Top-k's selection from a
published measurement of torch.topk with pytorch/pytorch#164459 (the default); and, labelled
apart, over exact Top-k with Top-k's selection as the published runs logged it
(`_topk_logged_torch`, an older torch: the named variant).

Rules (topkscope.claims.verdicts): band_verdict holds when every speed-up exceeds 1 + e at
every corner of the bands (t_step is monotone in each input, so the corners bound it), fails
when one baseline's speed-up is below 1 - e at every corner, else inconclusive, naming the
inputs whose band alone decides (the verdict at their low and high ends, the others at their
middle). e is perf.gpu_bands.comparison_error. Then assumed_input_verdict: a holds or fails
that an `assumed` input it depends on (nominal k; the rule's selection on a GPU no source
names) flips by taking another value is inconclusive, reason assumed-input; `decided_by` names
those inputs and the cause the value that flips it (perf.gpu_bands.flip).

Each row's evidence grade is the weakest grade among the inputs its speed-ups depend on
(perf.gpu_bands.uses: Top-k's selection does not enter a comparison with a dense method
alone), with the inputs of that grade (`evidence`; the row carries them in `inputs`, and in
`evidence_grade` / `evidence_inputs` where ClaimRow has those fields). Counts: the measured
band (the rule's own training, else on Top-k's u) where a run measured it, else nominal k
(`training_condition` empty). Each row says which torch and GPU its selection inputs come from.

    python -m topkscope.claims.gpu_bands     # results/reference/published/p16-gpu.csv

`p16_answer(table)` returns the numbers of the one-sentence answer from these rows
(topkscope.publish.published_findings renders it into the README).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.claims import verdicts
from topkscope.claims.row import ClaimRow, frame
from topkscope.claims.speedup import CLAIMS
from topkscope.claims.verdicts import assumed_input_verdict, band_verdict
from topkscope.perf import gpu_bands as gb
from topkscope.perf import model as pm
from topkscope.perf.gpu_bands import METHOD, TOPK_CURRENT, TOPK_LOGGED, P, Sources

P16_CSV = gb.PUBLISHED_DIR / "p16-gpu.csv"
REFERENCE = gb.REFERENCE
CLAIM = f"gaussiank_speedup_p{P}_gpu"
TOPK_ONLY = "_topk"
LOGGED_TORCH = "_topk_logged_torch"
# claim-name suffix: (baselines, what the statement says, Top-k's selection from)
SUFFIXES = {
    **{suffix: (baselines, what, TOPK_CURRENT) for suffix, (baselines, what) in CLAIMS.items()},
    TOPK_ONLY: (("topk",), "a shorter step than exact Top-k", TOPK_CURRENT),
    "_gtopk": (("gtopk",), "a shorter step than gTop-k", TOPK_CURRENT),
    LOGGED_TORCH: (("topk",), "a shorter step than exact Top-k running the torch.topk of the "
                              "published runs", TOPK_LOGGED),
}
RULE = ("every corner of the input bands: holds if every speed-up > 1 + e, fails if one "
        "baseline's speed-up < 1 - e at every corner, else inconclusive naming the inputs whose "
        "band decides; e = the sparse exchange's validated one-node error (the slowest "
        "worker's selection), over a dense baseline at least that baseline's cluster error; a "
        "holds or fails that an assumed input it depends on flips by taking another value is "
        "inconclusive (assumed-input)")


def _value(name: str, value: float) -> str:
    """An input's value in words: a count ratio as is, a time in ms."""
    return f"{value:.3g}" if name == "counts" else f"{value * 1e3:.3g} ms"


def _row(model: str, network, suffix: str, bands: dict, src: Sources, cluster: dict,
         sparse: float) -> ClaimRow:
    from topkscope.models import DATASET
    from topkscope.sparsify import label_of

    baselines, what, topk = SUFFIXES[suffix]
    d = gb.model_d(model, src)
    backward = src.backward_share(model)
    errs = {b: gb.comparison_error(b, cluster, sparse) for b in baselines}

    def judge(points):
        return band_verdict(points, baselines, errs)

    every = gb.corners(backward, d, network, bands, baselines)
    banded = judge(every)
    flips = gb.deciding(backward, d, network, bands, baselines, judge)
    used = [k for k in gb.VARIED if gb.uses(backward, d, network, bands, baselines, k)]
    grade, weakest = evidence(bands, used)
    # the assumed inputs whose value alone flips a decided verdict (an undecided one stays)
    assumed = [f for k in used if banded in verdicts.DECIDED and bands[k].grade == "assumed"
               and (f := gb.flip(backward, d, network, bands, baselines, k, judge))]
    verdict, reason = assumed_input_verdict(banded, assumed)
    reason = reason or _reason(verdict, every, baselines, errs, flips)
    span = {b: (min(s[b] for s in every), max(s[b] for s in every)) for b in baselines}
    names = [label_of(b) for b in baselines]
    spans = ", ".join(f"over {n} {lo:.3g}x-{hi:.3g}x (e ±{errs[b]:.1%})"
                      for n, b, (lo, hi) in zip(names, baselines, span.values()))
    deciding = "; ".join(f"{f.name} ({_value(f.name, f.low)}: {f.at_low}; "
                         f"{_value(f.name, f.high)}: {f.at_high})" for f in flips)
    if reason == "assumed-input":
        cause = (f"would {'hold' if banded == 'holds' else 'fail'} over the input bands "
                 f"(predicted {spans} at {network.name}), but only at the assumed value of "
                 + "; ".join(f"{f.name} ({_value(f.name, bands[f.name].low)}"
                             + ("" if bands[f.name].low == bands[f.name].high else
                                f" ... {_value(f.name, bands[f.name].high)}")
                             + f"): {f.verdict} at {f.name} = {_value(f.name, f.value)}"
                             for f in assumed))
    elif reason == "within-model-error":
        cause = f"within the model's error over the whole input band: predicted {spans} at " \
                f"{network.name}"
    elif reason:
        cause = (f"decided by {deciding or 'the inputs together'} (predicted {spans} at "
                 f"{network.name})")
    else:
        cause = f"predicted {spans} over the whole input band at {network.name}"
    if verdict == "holds":
        cause += "; " + _margins(backward, d, network, bands, baselines, errs)
    sources = "; ".join(f"{k} {_value(k, bands[k].low)} ... {_value(k, bands[k].high)} "
                        f"[{bands[k].grade}]: {bands[k].source}" for k in gb.VARIED)
    counts = bands["counts"]
    nominal = counts.grade == "assumed"
    selection = gb.selection_note(model, src, topk)
    middle = gb.speedups(backward, d, network, [{k: bands[k].mid for k in gb.VARIED}],
                         baselines[:1])[0][baselines[0]]
    dense = [b for b in baselines if b in pm.DENSE_METHODS]
    first = baselines[0]
    decided_by = [f.name for f in assumed] if reason == "assumed-input" else \
        [f.name for f in flips]
    return ClaimRow(
        model=model, dataset=DATASET.get(model), dataset_substitute=None,
        claim=f"{CLAIM}{suffix}", sparsifier=METHOD,
        statement=f"{label_of(METHOD)} gives {what} at P = {P} ({network.name}), on published "
                  "GPU inputs with their bands",
        n_units=len(every), evidence=f"{spans}; inputs: {sources}", verdict=verdict,
        reason=reason, rule=RULE,
        condition=(f"prediction, not a measurement: published GPU inputs with bands; batch "
                   f"{int(bands['batch'].low)} per worker; counts "
                   f"{'nominal k (assumed)' if nominal else counts.source}; selection inputs: "
                   f"{selection}; e: the sparse exchange's validated one-node error "
                   f"±{sparse:.1%} (slowest worker's selection)"),
        section="prediction", cause=cause, network=network.name,
        inputs=(", ".join(f"{k} {bands[k].grade}" for k in used)
                + "; Top-k's selection: " + ("torch.topk with pytorch/pytorch#164459, "
                                             "published" if topk == TOPK_CURRENT else
                                             "as the published runs logged it")),
        baselines=", ".join(names),
        training_condition="" if nominal else counts.source,
        selection_basis="band", model_error=max(errs.values()), diff_unit="speed-up ×",
        diff_mean=middle, ci_low=span[first][0], ci_high=span[first][1],
        decided_by=", ".join(decided_by),
        breakeven_ms=gb.breakeven(backward, d, network, bands, dense[0], errs[dense[0]],
                                  "select") * 1e3 if dense else math.nan,
        speedup_low=span[dense[0]][0] if dense else math.nan,
        speedup_high=span[dense[0]][1] if dense else math.nan,
        speedup_topk_low=span["topk"][0] if "topk" in span else math.nan,
        speedup_topk_high=span["topk"][1] if "topk" in span else math.nan,
        evidence_grade=grade, weakest_inputs=", ".join(weakest),
        claim_key=f"speedup_p{P}_gpu", claim_family="prediction")


def evidence(bands: dict, used) -> tuple[str, list[str]]:
    """(the weakest grade among the inputs `used`, those inputs of that grade)."""
    grade = pm.weakest(bands[k].grade for k in used)
    return grade, [k for k in used if bands[k].grade == grade]


def row_evidence(row) -> tuple[str, list[str]]:
    """(evidence grade, its inputs) of a p16-gpu row: its evidence_grade and weakest_inputs
    fields."""
    return (str(row["evidence_grade"]),
            [n.strip() for n in str(row.get("weakest_inputs") or "").split(",") if n.strip()])


def _margins(backward: float, d: int, network, bands: dict, baselines, errs: dict) -> str:
    """How far a holding claim's counts and overhead could grow, each with the other inputs
    over their bands, before it stops holding (the binding baseline's break-even)."""
    parts = []
    for name, unit, scale in (("counts", " k", 1.0), ("overhead", " ms", 1e3)):
        limit = min(gb.breakeven(backward, d, network, bands, b, errs[b], name)
                    for b in baselines)
        parts.append(f"{name} up to {limit * scale:.3g}{unit}" if math.isfinite(limit)
                     else f"{name} at any value")
    return "still holds with " + " or ".join(parts) + " (the other inputs over their bands)"


def _reason(verdict: str, every: list[dict], baselines, errs: dict, flips: list) -> str:
    """Why an inconclusive row is not decided: an input whose band alone decides, or the
    inputs together (input-band-too-wide), unless every corner of each baseline that keeps it
    from holding lies within 1 ± e (within-model-error)."""
    if verdict != "inconclusive":
        return ""
    short = [b for b in baselines if not all(s[b] > 1 + errs[b] for s in every)]
    inside = all(1 - errs[b] <= s[b] <= 1 + errs[b] for b in short for s in every)
    return "within-model-error" if inside and not flips else "input-band-too-wide"


def claim_rows(src: Sources | None = None, cluster: dict[str, float] | None = None
               ) -> pd.DataFrame:
    """The rows (module docstring) for every model with published GPU inputs, every network
    and every comparison of SUFFIXES. cluster: the cluster families' validated errors
    (default topkscope.perf.published.validated_errors)."""
    from topkscope.perf.published import validated_errors

    src = Sources.committed() if src is None else src
    cluster = validated_errors() if cluster is None else cluster
    sparse = gb.sparse_error(src.validation)
    rows = []
    for model in gb.models(src):
        bands = {kind: gb.model_bands(model, src, kind) for kind in (TOPK_LOGGED, TOPK_CURRENT)}
        for network in gb.networks():
            for suffix, (_, _, topk) in SUFFIXES.items():
                if bands[topk] is not None:
                    rows.append(_row(model, network, suffix, bands[topk], src, cluster, sparse))
    return frame(rows)


# ------------------------------------------------------------------ the answer
def p16_answer(table: pd.DataFrame) -> dict:
    """The numbers of the P = 16 answer from the p16-gpu rows, read from their fields only:

        comparisons   {baselines: {verdict: {"models": {model: [networks]}, "low", "high" (the
                       speed-up over the comparison's first baseline, ci_low / ci_high, over
                       those rows), "reasons": {model: REASONS keys}, "decided_by": {model:
                       inputs}, "evidence": {model: evidence grades} (empty for a table
                       without them)}}}, in the table's order,
                       Top-k's selection from torch.topk with pytorch/pytorch#164459
        variants      the same for the named variant, keyed "<baselines> (logged torch.topk)"
        model_error   (smallest, largest) error judged against
        counts_nominal  True when no row's counts were measured (nominal k, assumed)
        models        the models with rows
    """
    errors = pd.to_numeric(table["model_error"], errors="coerce")
    graded = bool({"inputs", "evidence_grade"} & set(table.columns))
    out = {"comparisons": {}, "variants": {},
           "model_error": (float(errors.min()), float(errors.max())) if len(table)
           else (math.nan, math.nan),
           "counts_nominal": bool((table["training_condition"].fillna("") == "").all()),
           "models": list(dict.fromkeys(table["model"]))}
    for (claim, baselines), rows in table.groupby(["claim", "baselines"], sort=False):
        variant = str(claim).endswith(LOGGED_TORCH)
        key = f"{baselines} (logged torch.topk)" if variant else str(baselines)
        by_verdict = {}
        for verdict, sub in rows.groupby("verdict", sort=False):
            by_model = dict(tuple(sub.groupby("model", sort=False)))
            by_verdict[verdict] = {
                "models": {m: list(g["network"]) for m, g in by_model.items()},
                "low": float(sub["ci_low"].min()), "high": float(sub["ci_high"].max()),
                "reasons": {m: sorted(set(g["reason"].fillna("")) - {""})
                            for m, g in by_model.items()},
                "decided_by": {m: sorted({n.strip() for v in g["decided_by"].fillna("")
                                          for n in str(v).split(",") if n.strip()})
                               for m, g in by_model.items()},
                "evidence": {m: sorted({row_evidence(r)[0] for _, r in g.iterrows()},
                                       key=pm.GRADES.index)
                             for m, g in by_model.items()} if graded else {}}
        out["variants" if variant else "comparisons"][key] = by_verdict
    return out


def markdown(table: pd.DataFrame) -> str:
    """The P = 16 GPU-band verdicts as docs/scaling.md shows them."""
    lines = ["| model | network | baselines | Top-k's selection | verdict | reason | speed-up | "
             "evidence | decided by |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        which = "logged torch" if str(r["claim"]).endswith(LOGGED_TORCH) else "#164459"
        speed = f"{r['ci_low']:.3g}–{r['ci_high']:.3g}×" if np.isfinite(r["ci_low"]) else "—"
        decided = r["decided_by"] if isinstance(r["decided_by"], str) and r["decided_by"] \
            else "—"
        grade, names = row_evidence(r)
        reason = r["reason"] if isinstance(r["reason"], str) and r["reason"] else "—"
        lines.append(f"| {r['model']} | {r['network']} | {r['baselines']} | {which} | "
                     f"{r['verdict']} | {reason} | {speed} | {grade} ({', '.join(names)}) | "
                     f"{decided} |")
    return "\n".join(lines)


# what would narrow each input enough to decide the rows it keeps undecided
SETTLES = {
    "compute": "forward + backward measured on the GPUs of the P = 16 cluster at the batch",
    "topk": "torch.topk timed on the compute's GPU at k = 0.001 d",
    "select": "the rule's selection timed on the compute's GPU (benchmarks/selection.py "
              "--device cuda: results/reference/bench-gpu/selection.csv)",
    "counts": "the rule's count in its own training on the model (a profile that trains it; "
              "python -m topkscope.perf.counts RESULTS)",
    "overhead": "the sparse exchange of the authors' NCCL code timed beyond one node at "
                "P = 16 (only MPI over 1 GbE is published)",
}


def decided_markdown(table: pd.DataFrame) -> str:
    """Which rows are decided (the verdict field), in one line."""
    decided = table[table["verdict"].isin(verdicts.DECIDED)]
    return (f"Decided: {len(decided)} of {len(table)} rows"
            + (": " + "; ".join(f"{r['model']} {r['network']} over {r['baselines']} "
                                f"{r['verdict']}" for _, r in decided.iterrows())
               if len(decided) else "") + ".")


def undecided_markdown(table: pd.DataFrame) -> str:
    """Per (model, network): the decided comparisons, the undecided ones counted by reason,
    and the inputs named in their decided_by fields."""
    lines = ["| model | network | decided | undecided (reason: rows) | decided by |",
             "|---|---|---|---|---|"]
    for (model, network), rows in table.groupby(["model", "network"], sort=False):
        done = rows[rows["verdict"].isin(verdicts.DECIDED)]
        rest = rows[~rows.index.isin(done.index)]
        why = "; ".join(f"{reason}: {len(g)}" for reason, g in rest.groupby("reason"))
        inputs = sorted({n.strip() for v in rest["decided_by"].fillna("")
                         for n in str(v).split(",") if n.strip()})
        lines.append(f"| {model} | {network} | "
                     + (", ".join(f"{r['baselines']} {r['verdict']}"
                                  for _, r in done.iterrows()) or "—")
                     + f" | {why or '—'} | {', '.join(inputs) or '—'} |")
    return "\n".join(lines)


def settles_markdown(table: pd.DataFrame) -> str:
    """What would decide the undecided rows: each input their decided_by fields name, how many
    rows its band alone decides and the measurement that would narrow it (SETTLES); the rows
    within the model's error and those no single band decides."""
    named: dict[str, int] = {}
    for value in table["decided_by"].fillna(""):
        for name in {n.strip() for n in str(value).split(",") if n.strip()}:
            named[name] = named.get(name, 0) + 1
    lines = ["What would decide the rest:"]
    for name, n in sorted(named.items(), key=lambda kv: -kv[1]):
        lines.append(f"- **{name}** (its band alone decides {n} row(s)): "
                     f"{SETTLES.get(name, 'a narrower band')}.")
    inside = int((table["reason"] == "within-model-error").sum())
    alone = int(((table["reason"] == "input-band-too-wide")
                 & (table["decided_by"].fillna("") == "")).sum())
    if inside:
        lines.append(f"- **the model's error** ({inside} row(s) within it over the whole "
                     "band): no narrower input decides them; P = 16 steps of both measured on "
                     "such a cluster would.")
    if alone:
        lines.append(f"- **the inputs together** ({alone} row(s) that no single band "
                     "decides): several of the measurements above.")
    return "\n".join(lines)


def numbers(rows: pd.DataFrame) -> str:
    """The P = 16 answer's numbers from the rows' fields: how many predictions are decided,
    the speed-ups over Dense the bands span, why the rest are not decided and which input's
    range decides most of them."""
    from topkscope.claims import phrases

    decided = rows[rows["verdict"].isin(verdicts.DECIDED)]
    dense = phrases.span(pd.concat([rows["speedup_low"], rows["speedup_high"]]), 2, "×")
    reasons = rows.loc[~rows["verdict"].isin(verdicts.DECIDED), "reason"].value_counts()
    deciding = pd.Series([n.strip() for names in rows["decided_by"].fillna("")
                          for n in str(names).split(",") if n.strip()]).value_counts()
    words = {"input-band-too-wide": "wait on an input's range"
             + (f" ({INPUT_WORDS.get(deciding.index[0], deciding.index[0])}'s alone for "
                f"{int(deciding.iloc[0])})" if len(deciding) else ""),
             "within-model-error": "are within the model's error",
             "assumed-input": "rest on an assumed value"}
    why = ", ".join(f"{n} {words.get(r, verdicts.REASONS.get(r, r))}"
                    for r, n in reasons.items())
    return (f"{len(decided)} of {len(rows)} predictions decided" + (f": {why}" if why else "")
            + (f"; {dense} Dense's speed across the input ranges" if dense else ""))


# the band inputs as people name them (topkscope.perf.gpu_bands)
INPUT_WORDS = {"overhead": "the multi-node exchange", "select": "the selection time",
               "counts": "the count", "compute": "the compute time"}


if __name__ != "__main__":  # `python -m` runs this file again after the package import
    from topkscope.claims.registry import Claim, Presentation, Question, register_claim

    register_claim(Claim(
        f"speedup_p{P}_gpu", "Does the published Gaussian-k speed up training on 16 GPUs on "
        "the GPU inputs of published runs (predicted)?", "", RULE, "prediction", "reference",
        lambda: claim_rows(), family="prediction",
        questions=(Question(f"speedup_p{P}_gpu", "Does the published Gaussian-k speed up "
                            "training on 16 GPUs, on the GPU inputs of the authors' published "
                            "runs (predicted)?", on="any", order=62),),
        show=Presentation("prediction", "on published GPU inputs", numbers, says_why=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=P16_CSV, help="the CSV to write")
    args = parser.parse_args(argv)
    from topkscope.io import write_bytes_atomic

    table = claim_rows()
    write_bytes_atomic(args.out, table.to_csv(index=False).encode())
    print(f"wrote {args.out}: {len(table)} rows")
    print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
