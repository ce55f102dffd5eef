"""The P = 16 claims of the published Gaussian-k rule on GPU inputs with their bands: verdicts
only where the whole input band agrees.

The step-time model (topkscope.perf.model.step) at P = 16 on the published clusters' fitted
networks (10gbe, ib100), per paper model with imported GPU runs (VGG-16, ResNet-20 at
their logged per-worker batch), every input a band of what was measured or published
(results/reference/published/, topkscope.perf.gpu_runs):

    compute      from the smallest logged forward + backward of the model's dense GPU runs to
                 the largest measured dense time per iteration (which includes its own
                 exchange: an upper bound of the compute)
    topk select  its logged COMP, 5th-95th percentile over both runs (VGG-16); without a
                 logged one (ResNet-20) the authors' P102-100 fit x0.5 ... x4
    rule select  the memory-traffic model's band (gpu_selection.csv, modelled)
    rule counts  count/k of the published rule in its own training (results/reference/
                 claims-quick.csv, gaussiank_count_in_training rows of the target density:
                 5th-95th percentile); without such runs of the model, as the recorder
                 measured it on Top-k's u (gaussiank_count rows; the quick profile's MNIST
                 stand-in for CIFAR-10), where the rule behaves otherwise than in its own
                 training: the row says so and its verdict is at most inconclusive
    overhead     0 ... the largest per-iteration cost of the authors' sparse exchange the model
                 misses on one node (validation.csv: logged COMM_TOTAL less the model's
                 all-gather), added to every sparse method's step

A claim (CLAIMS of topkscope.claims.speedup: over Dense and Top-k, over Dense with WFBP, over Dense
in fp16; and TOPK_ONLY: over exact Top-k alone) holds when every speed-up exceeds 1 + e at every corner of the band (t_step is
monotone in each input, so the corners bound it), fails when one baseline's speed-up is below
1 - e at every corner, else is inconclusive; its `cause` names the inputs whose band alone
decides (the verdict at their low and high ends, the others at their middle). e: the cluster
families' validated error (topkscope.perf.published.validated_errors), as the other P = 16
claims. FNN-3 leaves these claims: no published GPU run of it exists, and its FLOP estimate
(18 us) is below what one kernel launch costs. ResNet-50, LSTM 2x1500 and AlexNet have no
imported run either; their P = 16 rows stay those of topkscope.perf.report (nominal k).
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from topkscope.claims.row import ClaimRow, frame
from topkscope.claims.verdicts import band_verdict
from topkscope.perf import model as pm
from topkscope.perf.gpu_runs import PUBLISHED_DIR, REFERENCE
from topkscope.perf.model import Input
from topkscope.perf.networks import PRESETS
from topkscope.perf.workload import backward_fraction

NETWORKS = ("10gbe", "ib100")  # the presets fitted on published cluster measurements
METHOD = "gaussiank-2019"
P = 16
CLAIMS_QUICK = REFERENCE / "claims-quick.csv"
P16_CSV = PUBLISHED_DIR / "p16-gpu.csv"
NOT_OWN_TRAINING = "on Top-k's u, not its own training"  # a count band read off another u


@dataclass(frozen=True)
class Band:
    """An input's low and high ends and where they come from."""

    low: float
    high: float
    source: str

    @property
    def mid(self) -> float:
        return 0.5 * (self.low + self.high)


def model_bands(model: str, validation: pd.DataFrame, selection: pd.DataFrame,
                claims: pd.DataFrame) -> dict[str, Band] | None:
    """The input bands of `model` (module docstring); None without a dense GPU run of it."""
    dense = validation[(validation["model"] == model) & (validation["method"] == "dense")]
    if dense.empty:
        return None
    batch = int(dense["batch_per_gpu"].mode().iloc[0])
    dense = dense[dense["batch_per_gpu"] == batch]
    bands = {"compute": Band(float(dense["compute_s"].min()), float(dense["measured_s"].max()),
                             f"dense GPU runs at batch {batch}: logged forward + backward to "
                             "measured time per iteration (jobs " + ", ".join(
                                 str(j) for j in dense["job"]) + ")")}
    sel = selection[selection["model"] == model]
    topk = sel[(sel["method"] == "topk") & (sel["phase"] == "target")]
    if len(topk):
        bands["topk"] = Band(float(topk["low_s"].min()), float(topk["high_s"].max()),
                             "logged COMP, 5th-95th percentile (jobs " + ", ".join(
                                 str(int(j)) for j in topk["job"]) + ")")
    else:
        fit = sel[(sel["method"] == "topk") & sel["label"].str.startswith("fitted")]
        if fit.empty:
            return None
        t = float(fit["select_s"].iloc[0])
        bands["topk"] = Band(0.5 * t, 4.0 * t, "the authors' P102-100 fit x0.5 ... x4")
    rule = sel[sel["method"] == METHOD]
    if rule.empty:
        return None
    bands["select"] = Band(float(rule["low_s"].iloc[0]), float(rule["high_s"].iloc[0]),
                           str(rule["label"].iloc[0]))
    bands["counts"] = Band(1.0, 1.0, "nominal k (no recorded count of the rule)")
    for claim, where in (("gaussiank_count_in_training", "in its own training"),
                         ("gaussiank_count", NOT_OWN_TRAINING)):
        rows = claims[(claims["claim"] == claim) & (claims["sparsifier"] == METHOD)
                      & (claims["model"] == model)
                      & ~claims["condition"].astype(str).str.contains("during warm-up")]
        found = rows[["count_p5", "count_p95"]].dropna() if {"count_p5", "count_p95"} <= set(
            rows.columns) else rows.iloc[:0]
        if not found.empty:  # a table of schema 2 (earlier ones do not give the percentiles)
            lo, hi = float(found["count_p5"].min()), float(found["count_p95"].max())
            bands["counts"] = Band(lo, hi, f"count/k of the published rule {where}, "
                                           "5th-95th percentile (claims-quick.csv, condition "
                                           + str(rows["condition"].iloc[0]) + ")")
            break
    sparse = validation[validation["family"] == "one-node sparse"]
    missed = (sparse["communicate_s"] - sparse["predicted_communicate_s"]).dropna()
    bands["overhead"] = Band(0.0, float(missed.max()) if len(missed) else 0.0,
                             "0 ... the authors' one-node sparse exchange less the model's "
                             "all-gather (validation.csv)")
    bands["batch"] = Band(batch, batch, "logged per-worker batch")
    return bands


def _steps(model: str, d: int, net, point: dict[str, float]) -> dict[str, float]:
    """t_step of every method at one point of the band."""
    compute = Input(point["compute"], "band", "gpu")
    fraction, _ = backward_fraction(model)
    out = {}
    for method, select, ratio, extra in (
            ("dense", 0.0, 1.0, 0.0), ("dense-wfbp", 0.0, 1.0, 0.0),
            ("dense-fp16", 0.0, 1.0, 0.0), ("topk", point["topk"], 1.0, point["overhead"]),
            (METHOD, point["select"], point["counts"], point["overhead"])):
        overlap = Input(fraction, "backward share") if method == "dense-wfbp" else None
        inputs = pm.MethodInputs(Input(select, "band"), Input(ratio, "band"), overlap)
        out[method] = pm.step(method, P, d, pm.PAPER_DENSITY, net, compute, inputs)["t_step"] \
            + extra
    return out


VARIED = ("compute", "topk", "select", "counts", "overhead")
# the comparison with Top-k alone: the paper's third claim is that the rule beats exact
# Top-k's slow selection on GPUs, whatever Dense does
TOPK_ONLY = {"_topk": (("topk",), "a shorter step than exact Top-k")}


def _speedups(model: str, d: int, net, points: list[dict], baselines) -> list[dict]:
    """Per point of the band: baseline -> t_step(baseline) / t_step(the rule)."""
    out = []
    for point in points:
        t = _steps(model, d, net, point)
        out.append({b: t[b] / t[METHOD] for b in baselines})
    return out


def _value(name: str, value: float) -> str:
    """An input's value in words: a count ratio as is, a time in ms."""
    return f"{value:.3g}" if name == "counts" else f"{value * 1e3:.3g} ms"


def claim_rows(validation: pd.DataFrame | None = None, selection: pd.DataFrame | None = None,
               claims: pd.DataFrame | None = None,
               errors: dict[str, float] | None = None) -> pd.DataFrame:
    """The rows (module docstring) for every model with bands, network and baseline set."""
    from topkscope.claims.speedup import CLAIMS
    from topkscope.models import DATASET
    from topkscope.perf.published import comparison_error, validated_errors
    from topkscope.perf.workload import model_size
    from topkscope.plots.titles import sparsifier_name

    validation = pd.read_csv(PUBLISHED_DIR / "validation.csv") if validation is None \
        else validation
    selection = pd.read_csv(PUBLISHED_DIR / "gpu_selection.csv") if selection is None \
        else selection
    claims = pd.read_csv(CLAIMS_QUICK) if claims is None else claims
    errors = validated_errors() if errors is None else errors
    rows = []
    for model in sorted(set(validation["model"])):
        bands = model_bands(model, validation, selection, claims)
        if bands is None:
            continue
        d = int(validation.loc[validation["model"] == model, "params"].iloc[0]) or \
            model_size(model)
        for network in NETWORKS:
            net = PRESETS[network]
            corners = [dict(zip(VARIED, c)) for c in itertools.product(
                *[(bands[k].low, bands[k].high) for k in VARIED])]
            mid = {k: bands[k].mid for k in VARIED}
            for suffix, (baselines, what) in {**CLAIMS, **TOPK_ONLY}.items():
                errs = {b: comparison_error(METHOD, b, errors) for b in baselines}

                every = _speedups(model, d, net, corners, baselines)
                verdict = band_verdict(every, baselines, errs)
                deciding, decided_by = [], []
                for k in VARIED:
                    ends = [band_verdict(_speedups(model, d, net, [{**mid, k: v}], baselines),
                                     baselines, errs) for v in (bands[k].low, bands[k].high)]
                    if ends[0] != ends[1]:
                        decided_by.append(k)
                        deciding.append(f"{k} ({_value(k, bands[k].low)}: {ends[0]}; "
                                        f"{_value(k, bands[k].high)}: {ends[1]})")
                span = {b: (min(s[b] for s in every), max(s[b] for s in every))
                        for b in baselines}
                names = [sparsifier_name(b) for b in baselines]
                spans = ", ".join(f"over {n} {lo:.3g}x-{hi:.3g}x (e ±{errs[b]:.1%})"
                                  for n, b, (lo, hi) in zip(names, baselines, span.values()))
                cause = (f"predicted {spans} over the whole input band at {network}"
                         if verdict != "inconclusive" else
                         f"decided by {'; '.join(deciding) or 'the inputs together'} "
                         f"(predicted {spans} at {network})")
                reason = "" if verdict != "inconclusive" else "input-band-too-wide"
                if NOT_OWN_TRAINING in bands["counts"].source and verdict != "inconclusive":
                    cause = (f"would be {verdict}, but the rule's counts are {NOT_OWN_TRAINING} "
                             f"({cause})")
                    verdict, reason = "inconclusive", "counts-not-own-training"
                sources = "; ".join(f"{k} {_value(k, bands[k].low)} ... "
                                    f"{_value(k, bands[k].high)}: {bands[k].source}"
                                    for k in VARIED)
                dense = [b for b in baselines if b in pm.DENSE_METHODS]
                rows.append(ClaimRow(
                    model=model, dataset=DATASET.get(model), dataset_substitute=None,
                    claim=f"gaussiank_speedup_p{P}_gpu{suffix}", sparsifier=METHOD,
                    statement=f"{sparsifier_name(METHOD)} gives {what} at P = {P} "
                              f"({network}), on GPU inputs with their bands",
                    n_units=len(corners), evidence=f"{spans}; inputs: {sources}",
                    verdict=verdict, reason=reason, rule=RULE,
                    condition=f"prediction, not a measurement: GPU inputs of published GPU "
                              f"runs with bands; batch {int(bands['batch'].low)} per worker",
                    section="prediction", cause=cause, network=network,
                    inputs="GPU inputs of published GPU runs (bands)",
                    baselines=", ".join(names), selection_basis="band",
                    model_error=max(errs.values()), diff_unit="speed-up ×",
                    decided_by=", ".join(decided_by),
                    speedup_low=span[dense[0]][0] if dense else math.nan,
                    speedup_high=span[dense[0]][1] if dense else math.nan,
                    speedup_topk_low=span["topk"][0] if "topk" in span else math.nan,
                    speedup_topk_high=span["topk"][1] if "topk" in span else math.nan))
    return frame(rows)


RULE = ("every corner of the input band: holds if every speed-up > 1 + e, fails if one "
        "baseline's speed-up < 1 - e at every corner, else inconclusive naming the inputs whose "
        "band decides")


def markdown(table: pd.DataFrame) -> str:
    """The P = 16 GPU-band verdicts as docs/scaling.md shows them."""
    lines = ["| model | network | baselines | verdict | why |", "|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.model} | {r.network} | {r.baselines} | {r.verdict} | {r.cause} |")
    return "\n".join(lines)


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
