"""Would sparsification pay for this run? The step-time model's prediction for one run folder:
one function, `run_prediction`, behind both `topkscope scale --from-run RUN` and the
predicted scaling of `topkscope report RUN`, so the two give the same numbers from the same
inputs, each named in every row (the words are topkscope.claims.pays's).

What a run gives the model (`run_setting`; each value with where it came from):

    d         the manifest's num_parameters; else the recorded layout: the `numel` of the
              stats rows of layer __global__ (a Recorder in a loop of one's own names no size)
    compute   the median time_compute of train.parquet from step 2 on (measured in the run, on
              its device: topkscope.perf.inputs.run_compute); None when the run timed no step
              (a Recorder alone writes no train.parquet): the caller says in one line to give
              the seconds (`--compute-s`), never guesses
    batch     the config's batch_size (None for a run that names none)
    density   the manifest's density; else the last sparse density of train.parquet (a
              density given as a function of the step); else DENSITY, said so
    select    the run's own sparsifier's median time_select over its sparse steps (measured in
              the run) for that method; the others from the selection benchmark of the
              compute's device (topkscope.perf.inputs.selection_table: --selection-csv, else the
              committed one), never a results root's, so the command and the report agree
    outer     for a run whose manifest has an `outer` block (DiLoCo-style training): H, the
              exchange's encoding (b-bit values, chunk-local indices, quantization tables, its
              count) and the exchanges' time_select, read by topkscope.perf.outer.run_inputs

A per-step run is predicted by topkscope.perf.report.scaling_table (the methods of
topkscope.perf.model; counts nominal, as for --params). An outer-loop run is predicted as what
it ran: per inner step (topkscope.perf.outer.step_time),

    dense      DDP: a dense all-reduce every step (the baseline)
    diloco     the dense pseudo-gradient all-reduced every H steps
    <its own>  its encoded message (quantized values, chunk-local indices, tables) all-gathered
               every H steps, its selection time measured in the run

with the same columns (speedup_vs_dense, breakeven_select_vs_dense, crossover_gbit,
inner_steps, bytes_per_exchange), so one answer reads both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from topkscope.perf import model as pm
from topkscope.perf.model import Input
from topkscope.perf.networks import Network, resolve

DENSITY = pm.PAPER_DENSITY  # a run that names no density
OUTER_DENSE = "diloco"      # the dense exchange every H steps of an outer-loop prediction
BASELINES = (*pm.DENSE_METHODS, OUTER_DENSE)  # the methods that send everything


@dataclass(frozen=True)
class RunSetting:
    """What one run folder gives the step-time model (module docstring)."""

    run: Path
    label: str
    d: int
    d_source: str
    compute: Input | None
    batch: int | None
    density: float
    density_source: str
    sparsifier: str | None
    select: Input | None
    outer: object | None  # topkscope.perf.outer.RunInputs of an outer-loop run

    def missing_compute(self) -> str:
        """The one line that says what to pass when the run timed no step."""
        from topkscope.perf.inputs import missing_compute

        return missing_compute(self.run)


def _density(run: Path, manifest: dict) -> tuple[float, str]:
    density = manifest.get("density")
    if isinstance(density, (int, float)) and 0 < density <= 1:
        return float(density), "the run's manifest"
    path = run / "train.parquet"
    if path.is_file():
        trained = pd.read_parquet(path, columns=["density"])["density"]
        sparse = trained[trained < 1].dropna()
        if len(sparse):
            return float(sparse.iloc[-1]), "the last sparse step of its train.parquet"
    return DENSITY, f"{DENSITY:g}, the default: the run names no density"


def _own_select(run: Path, manifest: dict, device) -> Input | None:
    """The median time_select of the run's sparse steps from step 2 (None: none timed)."""
    from topkscope.perf.inputs import WARMUP_STEPS

    path = run / "train.parquet"
    if not path.is_file():
        return None
    train = pd.read_parquet(path, columns=["step", "density", "time_select"])
    t = train[(train["step"] >= WARMUP_STEPS) & (train["density"] < 1)]["time_select"].dropna()
    if t.empty:
        return None
    return Input(float(t.median()), f"measured in {run} (median time_select of {len(t)} "
                                    f"sparse steps, device {manifest.get('device', '?')})",
                 device)


def run_setting(run_dir: str | Path) -> RunSetting:
    """The run's d, compute, batch, density, own selection time and outer-loop inputs (module
    docstring). ValueError naming the run when neither its manifest nor its recorded layout
    gives d."""
    from topkscope.manifest import Manifest
    from topkscope.perf.inputs import _device_kind, run_compute, run_size

    run = Path(run_dir)
    manifest = Manifest.load(run)
    d, compute, batch = run_compute(run, manifest)
    _, d_source = run_size(run, manifest)
    kind = _device_kind({manifest.get("device", "?")})
    density, density_source = _density(run, manifest)
    outer = None
    if manifest.get("outer"):
        from topkscope.perf.outer import run_inputs

        outer = run_inputs(run)
    sparsifier = manifest.get("sparsifier")
    return RunSetting(run, str(manifest.get("model") or "unnamed"), int(d), d_source, compute,
                      batch, density, density_source, sparsifier,
                      _own_select(run, manifest, kind), outer)


def _outer_rows(setting: RunSetting, nets: Sequence[Network], workers: Sequence[int],
                compute: Input) -> list[dict]:
    """Per network and P: DDP, dense DiLoCo and the run's own exchange every H steps."""
    from topkscope.perf.inputs import RUN_INPUTS
    from topkscope.perf.outer import OuterMethod, crossover_gbit, step_time

    got = setting.outer
    H = got.method.inner_steps
    none = Input(0.0, "none (dense sends everything)")
    select = Input(got.select.value, f"measured in {setting.run} (mean time_select of its "
                                     "exchanges, topkscope.perf.outer.run_inputs)",
                   setting.compute.device if setting.compute else None)
    own = got.method
    methods = ((OuterMethod("dense", 1, dense=True), none),
               (OuterMethod(OUTER_DENSE, H, dense=True), none), (own, select))
    encoding = ("dense" if own.dense else
                f"{own.count} values of {own.value_bits} bits, indices of {own.index_bits} "
                f"bits, {own.side_bytes} bytes of tables per worker")
    rows = []
    for net in nets:
        for P in workers:
            at = {m.name: step_time(m, P, setting.d, net, compute, sel) for m, sel in methods}
            dense = at["dense"]
            for m, sel in methods:
                row = at[m.name]
                row.update({
                    "model": setting.label, "density": setting.density, "condition": "",
                    "count_source": (f"the run's exchanges ({encoding}, every {H} steps; "
                                     "topkscope.perf.outer.run_inputs)" if m is own else
                                     "dense (every value)"),
                    "comm_source": (net.alpha_source if net.alpha_source == net.beta_source
                                    else f"alpha {net.alpha_source}; beta {net.beta_source}"),
                    "options": f"outer loop: exchange every {m.inner_steps} step(s)",
                    "speedup_vs_dense": dense["t_step"] / row["t_step"],
                    "breakeven_select_vs_dense": (math.nan if m.dense else pm.breakeven_select(
                        {**row, "method": m.name}, dense)),
                    "crossover_gbit": (math.nan if m.name == "dense" else crossover_gbit(
                        m, methods[0][0], P, setting.d, net, compute, sel, none)),
                    "batch_per_worker": setting.batch, "inputs": RUN_INPUTS,
                    "inputs_warning": "", "selection_basis": "measured"})
                rows.append(row)
    return rows


def run_prediction(run_dir: str | Path, networks: Iterable[Network | str],
                   workers: Sequence[int], *, compute_s: float | None = None,
                   density: float | None = None, batch: int | None = None,
                   methods: Sequence[str] | None = None,
                   select_s: dict[str, float] | None = None,
                   selection_csv: str | Path | None = None,
                   opts: pm.Options | None = None) -> tuple[pd.DataFrame, list[str], RunSetting]:
    """(table, notes, setting): the step-time model for the run at each network and P, from
    the run's own inputs (module docstring); `compute_s` (seconds), `density`, `batch`,
    `select_s` replace the run's. ValueError (one line) when the run timed no step and no
    compute_s is given, or gives no size."""
    from topkscope.perf import inputs as inp
    from topkscope.perf.report import scaling_table

    setting = run_setting(run_dir)
    compute = Input(float(compute_s), "user") if compute_s is not None else setting.compute
    if compute is None:
        raise ValueError(setting.missing_compute())
    nets = [n if isinstance(n, Network) else resolve(n) for n in networks]
    if setting.outer is not None:
        if density is not None:
            raise ValueError(f"a density does not apply to the outer-loop run {str(run_dir)!r}: "
                             "its exchange is the run's own (count and encoding)")
        return pd.DataFrame(_outer_rows(setting, nets, workers, compute)), [], setting
    methods = list(methods or pm.DEFAULT_METHODS)
    if "dense" not in methods:
        methods = ["dense", *methods]
    select = dict(select_s or {})
    if setting.select is not None and setting.sparsifier in methods \
            and setting.sparsifier not in select:
        select[setting.sparsifier] = setting.select
    selection = inp.selection_table(None, selection_csv, inp.selection_device(
        inp.DEFAULT_INPUTS, compute))
    table, notes = scaling_table([setting.label], nets, workers, methods,
                                 density=setting.density if density is None else density,
                                 selection=selection, compute_s=compute,
                                 select_s=select, opts=opts, batch=batch or setting.batch,
                                 d=setting.d)
    return table, notes, setting


def breakeven_vs_baselines(table: pd.DataFrame) -> pd.Series:
    """Per row, the longest selection (seconds) at which its step still beats every baseline
    of its (model, network, P) (topkscope.perf.model.breakeven_select; <= 0: no selection time
    can); NaN for the baselines themselves."""
    out = pd.Series(math.nan, index=table.index, dtype="float64")
    for _, group in table.groupby(["model", "network", "workers"], sort=False):
        base = [r for _, r in group.iterrows() if r["method"] in BASELINES]
        for i, row in group.iterrows():
            if row["method"] not in BASELINES and base:
                out[i] = min(pm.breakeven_select(row, b) for b in base)
    return out
