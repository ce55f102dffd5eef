"""The P = 16 step-time predictions on published GPU inputs, each input a graded band with its
source: the numbers behind topkscope.claims.gpu_bands (which builds the rows and applies the
verdict rules; nothing here decides a verdict).

    bands = model_bands("vgg16", Sources.committed())       # {input: Band} or None
    python -m topkscope.perf.gpu_bands                        # gpu_bands.csv, gpu_traffic.csv
    python -m topkscope.perf.counts RESULTS                   # measured_counts.csv, from runs
    corners(model, d, net, bands, baselines)                  # speed-ups at every corner
    deciding(model, d, net, bands, baselines, judge)          # inputs whose band alone flips
                                                              # `judge` (a verdict rule)
    flip(backward, d, net, bands, baselines, name, judge)     # the value of one input, outside
                                                              # its band, that flips `judge`

The models and where their inputs come from: VGG-16 and ResNet-20 from the kljp/topk_results
logs of the authors' code on one node (results/reference/published/validation.csv,
gpu_selection.csv; topkscope.perf.gpu_runs), AlexNet, ResNet-50 and LSTM-PTB from the seed
authors' 32-GPU cluster (gtopkssgd.csv; topkscope.perf.gtopkssgd). Every band carries a grade
(topkscope.perf.model.GRADES: measured, published, modelled, assumed). Per model:

    compute   published. One-node logs: the smallest logged forward + backward of the model's
              dense runs at their most common per-worker batch, to the largest dense time per
              iteration net of the validation waits (it holds its own one-node exchange: an
              upper bound); gtopkssgd: its 1-worker time and its breakdown's compute part
    topk      exact Top-k's selection. Default (TOPK_CURRENT): pytorch/pytorch#164459's
              published time of torch.topk with that fix (topkscope.perf.torch_topk.CURRENT),
              interpolated in d (published; modelled where extrapolated). Named variant
              TOPK_LOGGED, the torch of the published runs: the logged COMP of every density
              phase (5th percentile of the workers' mean to 95th of the slowest worker's: the
              time does not depend on k) and the gtopkssgd breakdown's compression (published);
              where none of these was measured on the compute's GPUs, also the authors'
              P102-100 fit s d log2 d times the measured / fit ratios seen on the compute's
              source (modelled)
    select    the rule's selection: topkscope.perf.traffic's memory-traffic band on the GPUs of
              the compute (modelled on named GPUs; assumed where a GPU is not named: the
              band's slow end is the assumed 300 GB/s floor)
    counts    count/k of the rule, the 5th ... 95th percentile over steps of its largest
              count over workers / k at the target density, from the measured-counts table
              (results/reference/scaling/measured_counts.csv, written from run folders by
              topkscope.perf.counts, never from a claims table): its own training
              where a profile trains it, else as the recorder measured it on Top-k's u
              (measured, the source says which); else nominal k (1 ... 1, assumed)
    overhead  what the authors' sparse exchange costs beyond the model's all-gather, added to
              every sparse step (published): from the one-node sparse rows (validation.csv,
              NCCL on one node: exchange_s - predicted_communicate_s, as a constant and scaled
              by d, the lower envelope) up to the multi-node measurement at P = 16
              (gtopkssgd's Top-k S-SGD on 32 GPU machines over 1 GbE, MPI through host memory:
              its measured exchange less the model's on the authors' constants,
              topkscope.perf.gtopkssgd.sparse_excess; per parameter times d for a model it
              did not run). The multi-node excess hardly moves with P or the link, so it is
              carried to 10 GbE and 100 Gb IB as it is: no multi-node sparse exchange of an
              NCCL code is published

The networks are the presets fitted on published cluster measurements (10gbe, ib100). The
error a comparison is judged against (comparison_error): the larger of the dense baseline's
validated cluster error and the sparse exchange's validated one-node error (`sparse_error`:
the one-node sparse rows with the slowest worker's selection, validation.csv
`ratio_slowest`); what the multi-node sparse exchange costs beyond the model is the overhead
band above, not this error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import gtopkssgd, torch_topk, traffic
from topkscope.perf import model as pm
from topkscope.perf.gtopkssgd import AUTHORS_FIT_SOURCE, AUTHORS_TOPK_S
from topkscope.perf.model import Band, Input
from topkscope.perf.networks import PRESETS
from topkscope.perf.workload import backward_fraction, model_size

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"
PUBLISHED_DIR = REFERENCE / "published"
COUNTS_CSV = REFERENCE / "scaling" / "measured_counts.csv"
OWN_TRAINING, ON_TOPK_U = "own training", "Top-k's u"  # where a count band was measured
NETWORKS = ("10gbe", "ib100")  # the presets fitted on published cluster measurements
METHOD = "gaussiank-2019"
P = 16
VARIED = ("compute", "topk", "select", "counts", "overhead")
SPARSE = ("topk", "gtopk", METHOD)  # the steps the overhead is added to
STEP_METHODS = ("dense", "dense-wfbp", "dense-fp16", "topk", "gtopk", METHOD)
LOGS, GTOPK = "one-node logs", "gtopkssgd"
TOPK_LOGGED, TOPK_CURRENT = "logged", "current torch"
SPARSE_FAMILY = "one-node sparse"
NOMINAL = ("nominal k, assumed: no run here measured the rule's count on this model (in its "
           "own training or on Top-k's u)")
# what each source says of the torch and the GPU behind its selection times
SOURCE_NOTES = {
    LOGS: "torch not logged (the logs name NCCL 2.8.4 only); GPU A100 on nodes gpu32/gpu33 "
          "(named by the source's commit d484573), not named elsewhere",
    GTOPK: "torch not stated in the source; GPU not named in the source",
}


@dataclass
class Sources:
    """The tables the bands read (each a DataFrame as committed): the published ones, and the
    measured counts (topkscope.perf.counts; empty: none measured)."""

    validation: pd.DataFrame
    selection: pd.DataFrame
    gtopk: pd.DataFrame
    counts: pd.DataFrame = field(default_factory=pd.DataFrame)
    evaluations_csv: Path = traffic.EVALUATIONS_CSV
    torch_topk: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the backward share of each model's compute (dense-wfbp's overlap): gpu_compute.csv's
    # FLOP counts (topkscope.perf.published); a model without one: workload.backward_fraction
    backward: dict[str, float] = field(default_factory=dict)

    @classmethod
    def committed(cls) -> Sources:
        compute = pd.read_csv(REFERENCE / "scaling" / "gpu_compute.csv")
        return cls(pd.read_csv(PUBLISHED_DIR / "validation.csv"),
                   pd.read_csv(PUBLISHED_DIR / "gpu_selection.csv"), gtopkssgd.measurements(),
                   read_counts(), torch_topk=torch_topk.measurements(),
                   backward=dict(zip(compute["model"], compute["backward_fraction"])))

    def backward_share(self, model: str) -> float:
        if model in self.backward:
            return float(self.backward[model])
        return backward_fraction(model)[0]


COUNT_COLUMNS = {"model", "method", "density", "basis", "count_p5", "count_p95", "source"}


def read_counts(path: str | Path = COUNTS_CSV) -> pd.DataFrame:
    """The committed measured-counts table (an empty one when it does not exist)."""
    if not Path(path).is_file():
        return pd.DataFrame(columns=sorted(COUNT_COLUMNS))
    return pm.read_csv_with(path, COUNT_COLUMNS, "measured counts")


def model_source(model: str, src: Sources) -> str | None:
    """LOGS when the one-node logs hold a dense run of the model, else GTOPK when gtopkssgd
    published its 1-worker time, else None."""
    dense = src.validation[(src.validation["model"] == model)
                           & (src.validation["method"] == "dense")]
    if len(dense):
        return LOGS
    single = src.gtopk[(src.gtopk["quantity"] == "throughput") & (src.gtopk["model"] == model)
                       & (src.gtopk["workers"] == 1)]
    return GTOPK if len(single) else None


def models(src: Sources) -> list[str]:
    """Every model with published GPU inputs, in the order of pm.PAPER_MODELS."""
    names = set(src.validation["model"]) | set(src.gtopk["model"].dropna())
    return [m for m in pm.PAPER_MODELS if m in names and model_source(m, src)]


def _gpus(model: str, src: Sources) -> tuple[str, ...]:
    if model_source(model, src) == LOGS:
        dense = src.validation[(src.validation["model"] == model)
                               & (src.validation["method"] == "dense")]
        return tuple(sorted(set(dense["gpu"].fillna(traffic.UNNAMED).astype(str))))
    return (traffic.UNNAMED,)


def input_gpus(src: Sources | None = None) -> dict[str, tuple[int, tuple[str, ...]]]:
    """model -> (d, the GPUs its compute ran on): what topkscope.perf.traffic tabulates."""
    src = Sources.committed() if src is None else src
    return {m: (model_d(m, src), _gpus(m, src)) for m in models(src)}


def model_d(model: str, src: Sources) -> int:
    rows = src.validation[src.validation["model"] == model]
    return int(rows["params"].iloc[0]) if len(rows) and rows["params"].iloc[0] else \
        model_size(model)


def _compute(model: str, src: Sources) -> tuple[Band, int] | None:
    if model_source(model, src) == LOGS:
        dense = src.validation[(src.validation["model"] == model)
                               & (src.validation["method"] == "dense")]
        batch = int(dense["batch_per_gpu"].mode().iloc[0])
        dense = dense[dense["batch_per_gpu"] == batch]
        jobs = ", ".join(str(j) for j in dense["job"])
        return Band(float(dense["compute_s"].min()), float(dense["measured_s"].max()),
                    f"dense runs at batch {batch} of the one-node logs (jobs {jobs}): logged "
                    "forward + backward to the time per iteration net of the validation "
                    "waits (validation.csv)", "published"), batch
    thr = gtopkssgd.throughput(src.gtopk)
    single = thr[(thr["model"] == model) & (thr["workers"] == 1)]
    if single.empty:
        return None
    values = {"its 1-worker time": float(single["seconds"].iloc[0])}
    parts = gtopkssgd.breakdown(src.gtopk).set_index("model")
    if model in parts.index:
        values["the breakdown's compute at 32 workers"] = float(parts.loc[model, "compute"])
    row = single.iloc[0]
    batch = int(row["batch_per_worker"])
    return Band(min(values.values()), max(values.values()),
                f"{' and '.join(values)} (gtopkssgd.csv, {row['source'].split(' ')[0]}; batch "
                f"{batch}: {row['batch_source']})", "published"), batch


def _fit(d: int) -> float:
    return AUTHORS_TOPK_S * d * math.log2(d)


def _logged_topk(selection: pd.DataFrame) -> pd.DataFrame:
    """gpu_selection.csv's rows of Top-k's COMP logged by the one-node runs (a job and the
    slowest worker's times; the fitted and breakdown rows have neither)."""
    return selection[(selection["method"] == "topk") & selection["job"].notna()
                     & selection["slowest_high_s"].notna()]


def _topk(model: str, d: int, src: Sources) -> Band | None:
    """Top-k's selection band (module docstring), or None without any evidence."""
    values, parts, on_compute_source, grade = [], [], False, "published"
    logged = _logged_topk(src.selection)
    logged = logged[logged["model"] == model]
    if len(logged):
        values += [float(logged["low_s"].min()), float(logged["slowest_high_s"].max())]
        parts.append(f"logged COMP of jobs {', '.join(sorted({str(int(j)) for j in logged['job']}))}"
                     f" over every density phase ({', '.join(sorted(set(logged['phase'])))}), "
                     "5th percentile of the workers' mean to 95th of the slowest worker's")
        on_compute_source |= model_source(model, src) == LOGS
    breakdown = gtopkssgd.breakdown(src.gtopk).set_index("model")
    if model in breakdown.index:
        t = float(breakdown.loc[model, "compression"])
        values.append(t)
        parts.append(f"the gtopkssgd breakdown's compression {t * 1e3:.3g} ms (32 workers)")
        on_compute_source |= model_source(model, src) == GTOPK
    if not on_compute_source:
        ratios = _measured_over_fit(model_source(model, src), src)
        if ratios is None:
            return None
        lo, hi = ratios
        values += [_fit(d) * lo, _fit(d) * hi]
        grade = "modelled"  # a fit of another GPU scaled by ratios measured on these
        parts.append(f"the authors' fit ({AUTHORS_FIT_SOURCE}) x {lo:.3g}-{hi:.3g}, the "
                     f"measured / fit ratios on the compute's source ({model_source(model, src)})")
    if not values:
        return None
    return Band(min(values), max(values), "; ".join(parts), grade)


def _measured_over_fit(source: str | None, src: Sources) -> tuple[float, float] | None:
    """The range of measured Top-k selection / the authors' fit over the models measured on a
    source's GPUs."""
    ratios = []
    if source == LOGS:
        for r in _logged_topk(src.selection).itertuples(index=False):
            ratios += [r.low_s / _fit(int(r.d)), r.slowest_high_s / _fit(int(r.d))]
    elif source == GTOPK:
        for r in gtopkssgd.breakdown(src.gtopk).itertuples(index=False):
            ratios.append(r.compression / _fit(model_size(r.model)))
    return (min(ratios), max(ratios)) if ratios else None


def _counts(model: str, src: Sources) -> Band:
    """The rule's count/k band from the measured-counts table (module docstring): its own
    training first, else on Top-k's u; else nominal k (assumed)."""
    rows = src.counts
    if len(rows):
        rows = rows[(rows["model"] == model) & (rows["method"] == METHOD)
                    & np.isclose(rows["density"].astype(float), pm.PAPER_DENSITY)]
    for basis in (OWN_TRAINING, ON_TOPK_U):
        found = rows[rows["basis"] == basis] if len(rows) else rows
        if len(found):
            row = found.iloc[0]
            return Band(float(row["count_p5"]), float(row["count_p95"]),
                        f"{row['source']} (5th-95th percentile; {COUNTS_CSV.name})",
                        "measured")
    return Band(1.0, 1.0, NOMINAL, "assumed")


def _overhead(model: str, d: int, src: Sources) -> Band:
    """The sparse exchange beyond the model's all-gather (module docstring): the one-node
    rows' lower envelope up to the multi-node excess at P."""
    sparse = src.validation[src.validation["family"] == SPARSE_FAMILY]
    sparse = sparse.dropna(subset=["exchange_s", "predicted_communicate_s"])
    if sparse.empty:
        return Band(0.0, 0.0, "none measured", "assumed")
    missed = (sparse["exchange_s"] - sparse["predicted_communicate_s"]).clip(lower=0.0)
    per_d = missed / sparse["params"].astype(float)
    low = min(float(missed.min()), float(per_d.min()) * d)
    high = max(float(missed.max()), float(per_d.max()) * d)
    one_node = (f"the authors' one-node sparse exchange (NCCL) beyond the model's all-gather: "
                f"{missed.min() * 1e3:.3g}-{missed.max() * 1e3:.3g} ms (jobs "
                f"{', '.join(str(j) for j in sparse['job'])}, validation.csv exchange_s - "
                f"predicted_communicate_s), as a constant or scaled by d "
                f"({per_d.min() * 1e9:.3g}-{per_d.max() * 1e9:.3g} ns per parameter)")
    excess = gtopkssgd.sparse_excess(gtopkssgd.validation_table(src.gtopk), P)
    if excess.empty:
        return Band(low, high, one_node, "published")
    mine = excess[excess["model"] == model]
    if len(mine):
        multi = float(mine["excess_s"].iloc[0])
        how = f"{multi * 1e3:.4g} ms measured for this model"
    else:
        per = excess["excess_per_parameter_s"]
        multi = float(per.max()) * d
        how = (f"{per.min() * 1e9:.3g}-{per.max() * 1e9:.3g} ns per parameter over "
               f"{', '.join(excess['model'])}, the largest times d")
    return Band(low, max(high, multi), (
        f"{one_node}; up to the multi-node sparse exchange at P = {P} beyond the model "
        f"(gtopkssgd Top-k S-SGD, MPI through host memory on 1 GbE, "
        f"{excess['source'].iloc[0].split(' ')[0]}: {how}; carried to this network as it is)"),
        "published")


def model_bands(model: str, src: Sources, topk: str = TOPK_CURRENT) -> dict[str, Band] | None:
    """The graded input bands of `model` (module docstring) and its batch (Band "batch");
    None without a compute or a Top-k selection. topk: TOPK_CURRENT (the default: a published
    measurement of torch.topk with pytorch/pytorch#164459, torch_topk.CURRENT) or TOPK_LOGGED
    (the published runs' own, a named variant)."""
    found = _compute(model, src)
    if found is None:
        return None
    compute, batch = found
    d = model_d(model, src)
    if topk == TOPK_CURRENT:
        top = torch_topk.band(d, src.torch_topk)
    elif topk == TOPK_LOGGED:
        top = _topk(model, d, src)
    else:
        raise ValueError(f"topk must be {TOPK_CURRENT!r} or {TOPK_LOGGED!r}, got {topk!r}")
    if top is None:
        return None
    gpus = _gpus(model, src)
    return {"compute": compute, "topk": top,
            "select": traffic.selection_band(METHOD, d, gpus, src.selection,
                                             src.evaluations_csv),
            "counts": _counts(model, src), "overhead": _overhead(model, d, src),
            "batch": Band(batch, batch, "per-worker batch of the compute's source",
                          compute.grade)}


def grades(bands: dict[str, Band]) -> dict[str, str]:
    """{input: grade} of the inputs that vary (VARIED)."""
    return {k: bands[k].grade for k in VARIED}


def selection_note(model: str, src: Sources, topk: str = TOPK_CURRENT) -> str:
    """Which torch and GPU the row's selection inputs come from: the compute's sources
    (SOURCE_NOTES: the rule's selection is modelled on their GPUs) and Top-k's (the published
    runs' own, or the published torch.topk measurement)."""
    notes = {model_source(model, src)}
    if topk == TOPK_LOGGED and model in set(gtopkssgd.breakdown(src.gtopk)["model"]):
        notes.add(GTOPK)
    text = "; ".join(f"{s}: {SOURCE_NOTES[s]}" for s in sorted(n for n in notes if n))
    if topk == TOPK_CURRENT:
        text += f"; Top-k's selection: {torch_topk.note(src.torch_topk)}"
    return text


# ------------------------------------------------------------------ the model at a point
def steps(d: int, net, point: dict[str, float], backward: float) -> dict[str, float]:
    """t_step of every method in STEP_METHODS at one point of the bands (the overhead added
    to the sparse steps)."""
    compute = Input(point["compute"], "band", "gpu")
    out = {}
    for method in STEP_METHODS:
        select = {"topk": point["topk"], "gtopk": point["topk"], METHOD: point["select"]}.get(
            method, 0.0)
        ratio = point["counts"] if method == METHOD else 1.0
        overlap = Input(backward, "backward share") if method == "dense-wfbp" else None
        inputs = pm.MethodInputs(Input(select, "band"), Input(ratio, "band"), overlap)
        t = pm.step(method, P, d, pm.PAPER_DENSITY, net, compute, inputs)["t_step"]
        out[method] = t + (point["overhead"] if method in SPARSE else 0.0)
    return out


def speedups(backward: float, d: int, net, points: list[dict], baselines: Sequence[str]
             ) -> list[dict[str, float]]:
    """Per point: baseline -> t_step(baseline) / t_step(the rule); backward: the model's
    backward share of the compute (dense-wfbp's overlap)."""
    out = []
    for point in points:
        t = steps(d, net, point, backward)
        out.append({b: t[b] / t[METHOD] for b in baselines})
    return out


def corner_points(bands: dict[str, Band]) -> list[dict[str, float]]:
    """Every corner of the bands of VARIED (t_step is monotone in each input, so the corners
    bound every speed-up over the band)."""
    return [dict(zip(VARIED, c)) for c in itertools.product(
        *[(bands[k].low, bands[k].high) for k in VARIED])]


def corners(backward: float, d: int, net, bands: dict[str, Band], baselines: Sequence[str]
            ) -> list[dict[str, float]]:
    return speedups(backward, d, net, corner_points(bands), baselines)


@dataclass(frozen=True)
class Deciding:
    """An input whose band alone flips the verdict: the verdict at its low and high ends with
    every other input at its middle."""

    name: str
    low: float
    high: float
    at_low: str
    at_high: str


def deciding(backward: float, d: int, net, bands: dict[str, Band], baselines: Sequence[str],
             judge: Callable[[list[dict[str, float]]], str]) -> list[Deciding]:
    """The inputs of VARIED whose band alone flips `judge` (a verdict rule over speed-ups at a
    set of points; topkscope.claims.verdicts.band_verdict with the errors)."""
    mid = {k: bands[k].mid for k in VARIED}
    out = []
    for k in VARIED:
        ends = [judge(speedups(backward, d, net, [{**mid, k: v}], baselines))
                for v in (bands[k].low, bands[k].high)]
        if ends[0] != ends[1]:
            out.append(Deciding(k, bands[k].low, bands[k].high, *ends))
    return out


def uses(backward: float, d: int, net, bands: dict[str, Band], baselines: Sequence[str],
         name: str) -> bool:
    """Whether input `name` enters a speed-up over `baselines` at all (Top-k's selection does
    not enter a comparison with the dense methods alone): the speed-ups at the bands' middle
    differ between `name` at 0 and at twice its band's high end plus one."""
    mid = {k: bands[k].mid for k in VARIED}
    ends = [speedups(backward, d, net, [{**mid, name: v}], baselines)[0]
            for v in (0.0, 2.0 * bands[name].high + 1.0)]
    return any(not math.isclose(ends[0][b], ends[1][b], rel_tol=1e-12) for b in baselines)


@dataclass(frozen=True)
class Flip:
    """The value of input `name` nearest its band (outside it) at which a verdict becomes
    `verdict`, every other input over its band."""

    name: str
    value: float
    verdict: str


def flip(backward: float, d: int, net, bands: dict[str, Band], baselines: Sequence[str],
         name: str, judge: Callable[[list[dict[str, float]]], str],
         most: float = 1e6) -> Flip | None:
    """Where input `name`, moved out of its band while the others stay over theirs (every
    corner), changes `judge`'s verdict: searched below the band down to 0 and above it up to
    `most` times its high end (t_step is monotone in each input, so each side has at most one
    boundary), the nearer side (in ratio to the band's end) first; bisected to 1e-9 relative.
    None when the verdict stays on both sides."""
    others = [dict(zip([k for k in VARIED if k != name], c)) for c in itertools.product(
        *[(bands[k].low, bands[k].high) for k in VARIED if k != name])]

    def verdict_at(value: float) -> str:
        return judge(speedups(backward, d, net, [{**p, name: value} for p in others],
                              baselines))

    band = bands[name]
    here = judge(speedups(backward, d, net, corner_points(bands), baselines))
    found = []
    if band.low > 0 and verdict_at(0.0) != here:  # below the band
        inside, outside = band.low, 0.0
        for _ in range(200):
            mid = 0.5 * (inside + outside)
            inside, outside = (mid, outside) if verdict_at(mid) == here else (inside, mid)
            if inside - outside <= 1e-9 * band.low:
                break
        found.append((band.low / max(outside, 1e-300), Flip(name, outside, verdict_at(outside))))
    top = band.high if band.high > 0 else 1.0
    outside = top
    while outside <= top * most and verdict_at(outside) == here:
        outside *= 2.0
    if outside <= top * most:  # above the band
        inside = outside / 2.0 if outside > top else band.high
        for _ in range(200):
            mid = 0.5 * (inside + outside)
            inside, outside = (mid, outside) if verdict_at(mid) == here else (inside, mid)
            if outside - inside <= 1e-9 * outside:
                break
        found.append((outside / top, Flip(name, outside, verdict_at(outside))))
    return min(found, key=lambda f: f[0])[1] if found else None


def breakeven(backward: float, d: int, net, bands: dict[str, Band], baseline: str,
              error: float, name: str) -> float:
    """The largest value of input `name` (overhead or select in seconds, counts as count/k) at
    which the rule's speed-up over `baseline` still exceeds 1 + error at every corner of the
    other bands; NaN when its smallest value (0; counts 1) does not. t_step is linear in the
    overhead and the selection (slope 1 in the sparse steps they enter), so those are solved
    exactly per corner; counts by bisection (the exchange grows with them)."""
    others = [dict(zip([k for k in VARIED if k != name], c)) for c in itertools.product(
        *[(bands[k].low, bands[k].high) for k in VARIED if k != name])]
    if name in ("overhead", "select"):
        limits = []
        for point in others:
            t = steps(d, net, {**point, name: 0.0}, backward)
            both = name == "overhead" and baseline in SPARSE  # it adds to the baseline too
            margin = t[baseline] - (1 + error) * t[METHOD]
            limits.append(margin / error if both else t[baseline] / (1 + error) - t[METHOD])
        limit = min(limits)
        return limit if limit > 0 else math.nan

    def holds(value: float) -> bool:
        pts = [{**p, name: value} for p in others]
        return all(s[baseline] > 1 + error
                   for s in speedups(backward, d, net, pts, (baseline,)))

    low = 1.0
    if not holds(low):
        return math.nan
    high = max(bands[name].high, low) * 2
    while holds(high):
        if high > 1e6:
            return math.inf
        low, high = high, high * 2
    for _ in range(40):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if holds(mid) else (low, mid)
    return low


# ------------------------------------------------------------------ errors
def sparse_error(validation: pd.DataFrame) -> float:
    """The sparse exchange's validated error: max |ratio_slowest - 1| over the one-node sparse
    rows (the model with the slowest worker's selection, as the P = 16 steps use it)."""
    rows = validation[validation["family"] == SPARSE_FAMILY]
    column = "ratio_slowest" if "ratio_slowest" in rows else "ratio"
    values = rows[column].dropna().to_numpy(float)
    if not values.size:
        raise ValueError("no one-node sparse rows in the validation table: no sparse error")
    return float(np.max(np.abs(values - 1.0)))


def comparison_error(baseline: str, cluster: dict[str, float], sparse: float) -> float:
    """The error of the rule's speed-up over `baseline`: the sparse exchange's error, and for a
    dense baseline the larger of it and the baseline's cluster family error
    (topkscope.perf.published.error_family)."""
    from topkscope.perf.published import error_family

    if baseline in pm.DENSE_METHODS:
        return max(sparse, cluster[error_family(baseline)])
    return sparse


def error_markdown(src: Sources | None = None, cluster: dict[str, float] | None = None) -> str:
    """The errors the P = 16 verdicts are judged against, as docs/scaling.md states them."""
    from topkscope.perf.published import validated_errors

    src = Sources.committed() if src is None else src
    cluster = validated_errors() if cluster is None else cluster
    multi = gtopkssgd.errors(gtopkssgd.validation_table(src.gtopk))
    sparse = src.validation[src.validation["family"] == SPARSE_FAMILY]
    return (
        "**The error the verdicts are judged against.** The cluster families' "
        + " and ".join(f"±{e:.1%} ({family})" for family, e in sorted(cluster.items()))
        + " were validated on dense all-reduces only; on the gtopkssgd cluster the sparse "
        f"steps miss by up to {multi.get('1gbe topk', math.nan):.0%} (Top-k) and "
        f"{multi.get('1gbe gtopk', math.nan):.0%} (gTop-k) through a cost beyond the α–β "
        "model, which the P = 16 inputs carry as the top of the overhead band. A speed-up is "
        "judged against the **sparse exchange's validated one-node error**, the "
        f"{len(sparse)} one-node sparse rows with the slowest worker's selection (max "
        f"|ratio_slowest − 1| = {sparse_error(src.validation):.1%}, `perf.gpu_bands."
        "sparse_error`), and over a dense baseline against the larger of that and the "
        "baseline's cluster error. Each row names the error in `model_error` and its "
        "condition.")


def networks():
    return [PRESETS[n] for n in NETWORKS]


# ------------------------------------------------------------------ topkscope scale
@cache
def _committed() -> Sources:
    return Sources.committed()


def gpu_selection_input(method: str, model: str | None, d: int) -> Input | None:
    """A GPU selection time for a point prediction (topkscope scale, the figures driver) when
    the compute is a GPU's and no selection benchmark measured on a GPU is at hand; None for a
    method without published GPU inputs (its CPU time is used, with a warning). Exact Top-k
    (and gTop-k's selection): the geometric middle of the model's Top-k band where the model
    has published GPU inputs at this d, else the authors' P102-100 fit s d log2 d; the threshold
    rules of topkscope.perf.traffic: the geometric middle of their memory-traffic band on a GPU
    the compute's source does not name (their source says "modelled")."""
    selector = pm.SELECTOR_OF.get(method, method)
    if selector in pm.DENSE_METHODS:
        return Input(0.0, "none (dense sends everything)")
    if selector == "topk":
        src = _committed()
        if model in models(src) and model_d(model, src) == d:
            # the published runs' own (TOPK_LOGGED): what topkscope scale has always used
            band = model_bands(model, src, TOPK_LOGGED)["topk"]
            return Input(traffic.point(band), f"published GPU measurements: geometric middle "
                                              f"of {band.low * 1e3:.3g}-{band.high * 1e3:.3g} ms "
                                              f"({band.source})", "gpu")
        return Input(_fit(d), f"fitted by the authors ({AUTHORS_FIT_SOURCE})", "gpu")
    if selector in traffic.COUNTS:
        band = traffic.selection_band(selector, d, (traffic.UNNAMED,))
        return Input(traffic.point(band), f"{band.source}; geometric middle of "
                                          f"{band.low * 1e3:.3g}-{band.high * 1e3:.3g} ms", "gpu")
    return None


# ------------------------------------------------------------------ tables
BANDS_CSV = PUBLISHED_DIR / "gpu_bands.csv"


def bands_table(src: Sources | None = None) -> pd.DataFrame:
    """One row per (model, input) of the bands with its grade and source, Top-k's selection
    from a current torch.topk (the default) and, as a named variant, as the published runs
    logged it (results/reference/published/gpu_bands.csv)."""
    src = Sources.committed() if src is None else src
    rows = []
    for model in models(src):
        bands = model_bands(model, src)
        if bands is None:
            continue
        named = [(k, bands[k]) for k in VARIED]
        logged = model_bands(model, src, TOPK_LOGGED)
        if logged is not None:
            named.append((f"topk, {TOPK_LOGGED} torch", logged["topk"]))
        for name, band in named:
            rows.append({"model": model, "d": model_d(model, src), "input": name,
                         "low": band.low, "high": band.high,
                         "unit": "count/k" if name == "counts" else "s", "grade": band.grade,
                         "source": band.source})
    return pd.DataFrame(rows)


def counts_markdown(table: pd.DataFrame | None = None) -> str:
    """The measured-counts table as docs/scaling.md shows it."""
    table = read_counts() if table is None else table
    lines = ["| model | method | rho | measured | runs | steps | count/k 5th | median | 95th |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.model} | {r.method} | {r.density:g} | {r.basis} | {r.n_runs} | "
                     f"{r.n_steps} | {r.count_p5:.3g} | {r.count_median:.3g} | "
                     f"{r.count_p95:.3g} |")
    return "\n".join(lines)


def bands_markdown(table: pd.DataFrame) -> str:
    """The bands as docs/scaling.md shows them (times in ms)."""
    lines = ["| model | input | low | high | grade | from |", "|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        scale, unit = (1.0, "") if r.unit == "count/k" else (1e3, " ms")
        short = str(r.source).split(" (")[0]
        lines.append(f"| {r.model} | {r.input} | {r.low * scale:.3g}{unit} | "
                     f"{r.high * scale:.3g}{unit} | {r.grade} | {short} |")
    return "\n".join(lines)


def write(out_dir: str | Path = PUBLISHED_DIR) -> list[Path]:
    """gpu_bands.csv and gpu_traffic.csv of the committed sources into out_dir."""
    from topkscope.io import write_bytes_atomic

    out_dir = Path(out_dir)
    return [write_bytes_atomic(out_dir / BANDS_CSV.name,
                               bands_table().to_csv(index=False).encode()),
            write_bytes_atomic(out_dir / traffic.TRAFFIC_CSV.name,
                               traffic.table(input_gpus()).to_csv(index=False).encode())]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PUBLISHED_DIR,
                        help="folder for gpu_bands.csv and gpu_traffic.csv")
    args = parser.parse_args(argv)
    for path in write(args.out):
        print(f"wrote {path}")
    print(bands_markdown(pd.read_csv(Path(args.out) / BANDS_CSV.name)))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
