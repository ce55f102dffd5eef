"""The gradient recorder: statistics of g, u = g + e_prev and e at scheduled steps, per rank.

    rec = Recorder(run_dir, schedule=1, hist_schedule={"every": 100}, snapshot_schedule=[800],
                   densities=[0.001, 0.01], sparsifiers=["gaussiank"], rank=0)
    rec.attach(model)                      # optional: names layers, captures raw g per parameter
    ...
    if rec.wants(step):
        rec.record(step, rank, u=u, e=e, g=g, layout=[(name, offset, numel), ...], selected=idx)
    rec.close()                            # or `with Recorder(...) as rec:`

The recorder is split by concern: its settings and their checks (`hooks.settings`), its run
folder from opening to closing (`hooks.lifecycle`: `mode` None/"append"/"overwrite" for a folder
that already holds results, the manifest it owns, the finalizer that closes a recorder the
program forgot), the parts and snapshots it writes (`hooks.parts`), and here the per-call
statistics. Closing with zero rows written warns, and so does a recorder told `total_steps`
whose schedules cannot fire before that step.

The passes over the vectors run on their own device (float64 where it matters: CPU vectors in
cache-sized chunks with buffers reused across records); only per-layer tables come to the host.
Results are written as rank-local parquet parts under run_dir/stats and run_dir/hist, plus
snapshots/*.npy. Rows are buffered as numpy columns for `flush_every` recorded steps, then
written (atomically) and dropped, so memory does not grow with the number of steps. The
recorder never writes into what it is given; its own sparsifiers run under a forked random
state, so training selects the same.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from topkscope import kernel, validate
from topkscope.hooks.histogram import histogram_rows
from topkscope.hooks.lifecycle import (
    RecorderOutput,
    check_output_dir,
    discard_folder,
    own_manifest,
    prepare_folder,
)
from topkscope.hooks.parts import (
    PartWriter,
    coord_columns,
    hist_columns,
    row_statistics,
    stats_columns,
    write_snapshot,
)
from topkscope.hooks.power_sums import (
    ChunkedSums,
    PowerSums,
    power_sums,
    residual_selection,
    residual_sums,
    row_moments,
)
from topkscope.hooks.rows import RowPlan, coordinate_sample, plan_rows, segments_of
from topkscope.hooks.schedules import Schedule
from topkscope.hooks.settings import SETTINGS, check_settings, recordable
from topkscope.hooks.topk_sums import (
    RowStates,
    RowTops,
    quantized_topk_rows,
    selection_rows,
    topk_ratio_rows,
)
from topkscope.manifest import Manifest
from topkscope.schema import (
    KINDS,
    column_prefix,
    coords_schema,
    hist_schema,
    run_identity,
    sparsifier_columns,
    stats_schema,
)
from topkscope.sparsify.quantize import quantizer_from
from topkscope.sparsify.source import SparsifierSource

__all__ = ["SETTINGS", "Recorder", "check_settings"]


def _manifest_on_disk(out_dir: Path) -> dict | None:
    """The manifest another process wrote into out_dir (rank 0's), if it is there yet."""
    try:
        return Manifest.load(out_dir)
    except ValueError:
        return None

_BLOCK_BYTES = 1 << 29  # device float64 work space above which kinds go one at a time
HILL_LEVEL = 0.95  # the level of the hill_alpha_low / _high interval
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _vector(x: Any, what: str, d: int | None = None) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 1:
        raise ValueError(f"{what} must be a flat 1-D vector, got shape {tuple(x.shape)}")
    if x.dtype not in _FLOATS:
        raise ValueError(f"{what} must be a float tensor, got {x.dtype}")
    if d is not None and x.numel() != d:
        raise ValueError(f"{what} has {x.numel()} elements but u has {d}")
    if x.numel() == 0:
        raise ValueError(f"{what} is empty")
    return x.detach()


class Recorder:
    """Records per-(step, rank, layer, kind, density) statistics; see the module docstring.

    schedule: when to record the cheap statistics (moments, top-k contraction, bounds).
    hist_schedule / snapshot_schedule: histograms / raw float32 snapshots of snapshot_kinds,
    written by the ranks in snapshot_ranks (None: every rank; [0]: one worker's u, a quarter
    of the disk of four when the ranks' u of one step would be judged as one block anyway).
    sparsifier_schedule: when to run the approximate sparsifiers on u (default: schedule).
    sparsifier_per_layer: run them on every layer's row too (default), or only on the
    whole-model row (False: the layers' selector columns stay null; the claims and the figures
    read the whole-model row alone, and a model of many layers pays most for the per-layer
    selections).
    Schedules take any form `parse_schedule` accepts (int n = every n steps, list = at
    those steps, {"every": n}, {"steps": [...]}, "log:5", a callable, None = never).
    densities: the rho values in (0, 1] at which k = max(1, round(rho * n)) is evaluated.
    sparsifiers: registry names of approximate sparsifiers to evaluate (S_count/ratio/recall).
    rank: this process's rank (names the part files). manifest: the run's Manifest (the
    training loop owns its status); with None, rank 0 creates one and completes it on close.
    kinds: which of g, u, e to record. topk_kinds: which of them get the exact top-k
    contraction (a selection per row; the others' topk_ratio is NaN). per_layer: also one
    row per layer.
    min_free_bytes: the output folder must have this much free space at construction.
    seed: randomised sparsifiers (randk, dgc) evaluated here draw from (seed, rank, step).
    coordinates: how many coordinates of the whole-model vector to follow over time: a fixed
    sample drawn with `seed` (the same on every rank, `rows.coordinate_sample`) whose values of
    every recorded kind go to coords/ at each stats step (0: none), for the per-coordinate
    tails over time (analysis.tails.per_coordinate).
    mode: what to do when out_dir already holds results: None refuses (ValueError),
    "append" adds a segment, "overwrite" moves the old files aside (see hooks.lifecycle).
    total_steps: the run's length, if known; a recorder whose schedules cannot fire at any
    step in [0, total_steps) warns when built.
    run_fields: what the run is, for its manifest (rank 0), as `topkscope run` records it:
    e.g. model="fnn3", sparsifier="topk", density=0.001, dataset="mnist" (the claims and the
    report name a run by its model and sparsifier).
    """

    def __init__(
        self,
        out_dir: str | Path,
        schedule: Any = 1,
        hist_schedule: Any = None,
        snapshot_schedule: Any = None,
        densities: Sequence[float] = (0.001,),
        sparsifiers: Sequence[str] = (),
        rank: int = 0,
        manifest: Manifest | None = None,
        flush_every: int = 50,
        *,
        sparsifier_schedule: Any = None,
        sparsifier_per_layer: bool = True,
        kinds: Sequence[str] = KINDS,
        topk_kinds: Sequence[str] = ("u",),
        per_layer: bool = True,
        hist_bins: int = 64,
        hist_range: float = 6.0,
        snapshot_kinds: Sequence[str] = ("u",),
        snapshot_ranks: Sequence[int] | None = None,
        min_free_bytes: int = 1 << 26,
        seed: int = 0,
        mode: str | None = None,
        total_steps: int | None = None,
        run_fields: dict[str, Any] | None = None,
        quantize: dict | None = None,
        coordinates: int = 256,
    ) -> None:
        checked = check_settings(dict(
            schedule=schedule, hist_schedule=hist_schedule, snapshot_schedule=snapshot_schedule,
            sparsifier_schedule=sparsifier_schedule, sparsifier_per_layer=sparsifier_per_layer,
            densities=densities, sparsifiers=sparsifiers, flush_every=flush_every, kinds=kinds,
            topk_kinds=topk_kinds, per_layer=per_layer,
            hist_bins=hist_bins, hist_range=hist_range, snapshot_kinds=snapshot_kinds,
            snapshot_ranks=snapshot_ranks, min_free_bytes=min_free_bytes, seed=seed,
            quantize=quantize, coordinates=coordinates))
        self.coordinates = checked["coordinates"]
        self.quantize = checked["quantize"]
        self._quantizer = quantizer_from(self.quantize)
        self.schedule: Schedule = checked["schedule"]
        self.hist_schedule: Schedule = checked["hist_schedule"]
        self.snapshot_schedule: Schedule = checked["snapshot_schedule"]
        self.sparsifier_schedule: Schedule = checked["sparsifier_schedule"] or self.schedule
        self.sparsifier_per_layer: bool = checked["sparsifier_per_layer"]
        self.densities = checked["densities"]
        names = checked["sparsifiers"]
        self.rank = validate.integer("rank", rank, 0)
        self.seed = checked["seed"]
        # randomised estimators draw from (seed, rank, step) alone, like training does, so a
        # simulated and a torchrun run record the same numbers
        self._sources = {name: SparsifierSource(name, {}, self.seed, self.rank) for name in names}
        self._states: dict[tuple[str, int], RowStates] = {}  # stateful selectors, per rank
        self.flush_every = checked["flush_every"]
        self.kinds = checked["kinds"]
        self.snapshot_kinds = checked["snapshot_kinds"]
        self.snapshot_ranks = checked["snapshot_ranks"]
        self.topk_kinds = checked["topk_kinds"]
        self.per_layer = checked["per_layer"]
        self.hist_bins = checked["hist_bins"]
        self.hist_range = checked["hist_range"]
        self.total_steps = None if total_steps is None else \
            validate.integer("total_steps", total_steps, 1)

        # a manifest this recorder creates (not an earlier run's): discard_unused() may remove it
        self._created = not (Path(out_dir) / "manifest.json").exists()
        self.out_dir = check_output_dir(out_dir, self.rank, min_free_bytes)
        self._owns_manifest = manifest is None and self.rank == 0
        replaced = prepare_folder(self.out_dir, self.rank, mode, manifest is not None)
        prefixes = [column_prefix(n) for n in names]
        self._sel_columns = list(sparsifier_columns(prefixes))
        every = [column_prefix(n) for n in dict.fromkeys([*recordable(), *names])]
        identity = run_identity(self.out_dir, manifest.data if manifest is not None
                                else _manifest_on_disk(self.out_dir))
        self._stats = PartWriter(self.out_dir / "stats", self.rank, stats_schema(every),
                                 identity, absent=[c for c in sparsifier_columns(every)
                                                   if c not in self._sel_columns])
        self._hist = PartWriter(self.out_dir / "hist", self.rank, hist_schema(), identity)
        self._coords = PartWriter(self.out_dir / "coords", self.rank, coords_schema(),
                                  identity) if self.coordinates else None
        self._snapshots = self.out_dir / "snapshots"
        self._snapshots.mkdir(exist_ok=True)

        self._plans: dict[tuple, RowPlan] = {}
        self._workspace = ChunkedSums()  # float64 buffers reused by every record
        self._raw_grads: dict[str, torch.Tensor] = {}
        self._attached_layout: list[tuple[str, int, int]] | None = None
        self._model_noted = False  # _note_model: the manifest names what was seen
        self._handles: list[Any] = []

        if self._owns_manifest:
            self.manifest = own_manifest(self.out_dir, mode, replaced)
        else:
            self.manifest = manifest
        self._out = RecorderOutput(self._stats, self._hist, self.manifest, self._owns_manifest,
                                   self._settings(), self.out_dir, self.rank, self.total_steps,
                                   self._coords)
        self._finalizer = weakref.finalize(self, self._out.close_unclosed)
        if self.manifest is not None:
            self.manifest.update(recorder=self.describe(), **dict(run_fields or {}))
        self._warn_if_never(self.total_steps)

    def _warn_if_never(self, total_steps: int | None) -> None:
        """Warn (when the run's length is known) about a recorder that would record nothing,
        and about steps a schedule lists that the run never reaches."""
        if total_steps is None:
            return
        named = {"schedule": self.schedule, "hist_schedule": self.hist_schedule,
                 "snapshot_schedule": self.snapshot_schedule}
        if self._sources:
            named["sparsifier_schedule"] = self.sparsifier_schedule
        answers = [s.fires_within(total_steps) for s in named.values()]
        if not any(answers) and None not in answers:
            warnings.warn(f"recorder of {str(self.out_dir)!r}: no schedule fires at any step in "
                          f"[0, total_steps = {total_steps}) (schedule {self.schedule!r}, hist "
                          f"{self.hist_schedule!r}, snapshots {self.snapshot_schedule!r}); it "
                          f"will record nothing", stacklevel=3)
            return
        for name, schedule in named.items():
            late = schedule.listed_from(total_steps)
            if late:
                warnings.warn(f"recorder of {str(self.out_dir)!r}: {name} lists step(s) "
                              f"{late} at or past the end of the run (total_steps = "
                              f"{total_steps}: the last step is {total_steps - 1}); they will "
                              f"not be recorded", stacklevel=3)

    # ------------------------------------------------------------------ configuration
    def describe(self) -> dict[str, Any]:
        """The recorder's settings and progress, as stored in manifest.json under `recorder`."""
        return self._out.describe()

    def _settings(self) -> dict[str, Any]:
        return {
            "schedule": repr(self.schedule),
            "hist_schedule": repr(self.hist_schedule),
            "snapshot_schedule": repr(self.snapshot_schedule),
            "sparsifier_schedule": repr(self.sparsifier_schedule),
            "sparsifier_per_layer": self.sparsifier_per_layer,
            "densities": list(self.densities),
            "sparsifiers": list(self._sources),
            "kinds": list(self.kinds),
            "topk_kinds": list(self.topk_kinds),
            "per_layer": self.per_layer,
            "hist_bins": self.hist_bins,
            "hist_range": self.hist_range,
            "snapshot_kinds": list(self.snapshot_kinds),
            "snapshot_ranks": None if self.snapshot_ranks is None else list(self.snapshot_ranks),
            "flush_every": self.flush_every,
            "total_steps": self.total_steps,
            "quantize": self.quantize,
            "coordinates": self.coordinates,
        }

    # ------------------------------------------------------------------ hooks
    def attach(self, model: nn.Module) -> Recorder:
        """Name layers after model's trainable parameters and capture each raw gradient g.

        A forward pre-hook on model marks the start of an iteration (forgetting the last g);
        a post-accumulate-grad hook per parameter keeps a copy of its gradient, so that
        record() without g= uses the raw g of the latest backward, and without layout= uses
        the parameters in order. Returns self; `detach()` removes the hooks.
        """
        if not isinstance(model, nn.Module):
            raise ValueError(f"attach needs a torch.nn.Module, got {type(model).__name__}")
        self.detach()
        layout, offset = [], 0
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            layout.append((name, offset, p.numel()))
            offset += p.numel()
            if "g" in self.kinds or "g" in self.snapshot_kinds:
                self._handles.append(
                    p.register_post_accumulate_grad_hook(functools.partial(self._on_grad, name))
                )
        if not layout:
            raise ValueError("the model has no trainable parameters to record")
        self._attached_layout = layout
        self._note_model(model_class=type(model).__name__, num_parameters=offset)
        self._handles.append(model.register_forward_pre_hook(self._on_forward))
        return self

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._raw_grads = {}

    def _on_forward(self, module: nn.Module, args: Any) -> None:
        if module.training and torch.is_grad_enabled():
            self._raw_grads.clear()

    def _on_grad(self, name: str, param: torch.Tensor) -> None:
        if param.grad is not None:
            self._raw_grads[name] = param.grad.detach().clone()

    def _captured_g(self, layout: Sequence, d: int) -> torch.Tensor | None:
        grads = self._raw_grads
        if not grads or any(name not in grads or grads[name].numel() != n
                            for name, _, n in layout):
            return None
        if sum(n for _, _, n in layout) != d:
            return None
        ordered = sorted(layout, key=lambda item: item[1])
        return torch.cat([grads[name].reshape(-1) for name, _, _ in ordered])

    # ------------------------------------------------------------------ recording
    def wants(self, step: int) -> bool:
        """Is anything scheduled at this step? (cheap: a few predicate calls)"""
        self._saw(step)
        return bool(
            self.schedule(step)
            or self.hist_schedule(step)
            or self.snapshot_schedule(step)
            or (self._sources and self.sparsifier_schedule(step))
        )

    def record(self, step: int, rank: int, *, u: torch.Tensor, e: torch.Tensor | None = None,
               g: torch.Tensor | None = None, layout: Sequence | None = None,
               selected: torch.Tensor | None = None) -> None:
        """Record what is scheduled at `step` for worker `rank`.

        u, e, g: flat whole-model vectors in layout order (u = g + e_prev, e = u - s).
        With e=None and selected given, e is u with u[selected] = 0. With g=None the raw
        gradient captured by attach() is used when it matches the layout.
        """
        if self._out.closed:
            raise ValueError("the recorder is closed; create a new one to record more")
        step = validate.integer("step", step, 0)
        rank = validate.integer("rank", rank, 0)
        self._saw(step)
        do_stats = self.schedule(step)
        do_sel = bool(self._sources) and self.sparsifier_schedule(step)
        do_hist = self.hist_schedule(step)
        do_snap = self.snapshot_schedule(step) and (
            self.snapshot_ranks is None or rank in self.snapshot_ranks)
        if not (do_stats or do_sel or do_hist or do_snap):
            return
        buffered = self._out.buffered_steps
        if step not in buffered and len(buffered) >= self.flush_every:
            self.flush()
        self._out.buffered_steps.add(step)

        with torch.no_grad():
            u = _vector(u, "u")
            d = u.numel()
            if not self._model_noted:
                self._note_model(num_parameters=d)
                self._model_noted = True
            if layout is None:
                if self._attached_layout is None:
                    raise ValueError("record needs layout=[(name, offset, numel), ...] "
                                     "(or attach(model) first)")
                layout = self._attached_layout
            plan = self._plan(layout, d)
            if selected is not None:
                if not isinstance(selected, torch.Tensor) or selected.dim() != 1 or (
                    selected.is_floating_point() or selected.is_complex()
                ):
                    raise ValueError("selected must be a 1-D integer tensor of indices into u")
                selected = selected.detach().to(u.device, torch.int64)
                if selected.numel():
                    lo, hi = torch.stack(torch.aminmax(selected)).tolist()  # one sync
                    if lo < 0 or hi >= d:
                        raise ValueError(f"selected has indices outside the allowed range "
                                         f"[0, d = {d}): min {lo}, max {hi}")
            vectors = self._vectors(u, e, g, selected, layout)
            if do_stats or do_sel or do_hist:
                self._record_stats(step, rank, vectors, plan, selected, e is not None,
                                   do_stats or do_sel, do_sel, do_hist)
            if do_snap:
                for kind in self.snapshot_kinds:
                    if kind in vectors:
                        write_snapshot(self._snapshots, step, rank, vectors[kind], kind)
                        self._out.snapshots_written += 1

    def _note_model(self, **seen: Any) -> None:
        """What the recorder saw of the model — its class and trainable parameter count at
        attach(), else the length of u at the first record — into a manifest that does not say
        it yet (a loop of one's own without run_fields), so the run is named after it
        (manifest.model_of) rather than "unnamed"."""
        if self.manifest is None:
            return
        missing = {k: v for k, v in seen.items() if self.manifest.data.get(k) is None}
        if missing:
            self.manifest.update(**missing)

    def _saw(self, step: int) -> None:
        last = self._out.last_step_seen
        if isinstance(step, (int, np.integer)) and (last is None or step > last):
            self._out.last_step_seen = int(step)

    def _plan(self, layout: Sequence, d: int) -> RowPlan:
        try:
            key = (d, tuple(layout))
            hash(key)
        except TypeError:  # entries given as lists
            key = (d, tuple(tuple(item) if isinstance(item, list) else item for item in layout))
            try:
                hash(key)
            except TypeError:
                key = None
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = plan_rows(segments_of(layout, d), self.densities, self.per_layer)
            if len(self._plans) > 8:  # a few layouts at most (e.g. per-bucket callers)
                self._plans.clear()
            if key is not None:
                self._plans[key] = plan
        return plan

    def _vectors(self, u: torch.Tensor, e: torch.Tensor | None, g: torch.Tensor | None,
                 selected: torch.Tensor | None, layout: Sequence) -> dict[str, torch.Tensor]:
        d = u.numel()
        out = {"u": u}
        if "e" in self.kinds or "e" in self.snapshot_kinds:
            if e is not None:
                out["e"] = _vector(e, "e", d).to(u.device)
            elif selected is not None:
                out["e"] = u.index_fill(0, selected, 0)
        if "g" in self.kinds or "g" in self.snapshot_kinds:
            if g is None:
                g = self._captured_g(layout, d)
            if g is not None:
                out["g"] = _vector(g, "g", d).to(u.device)
        return out

    def _record_stats(self, step: int, rank: int, vectors: dict[str, torch.Tensor],
                      plan: RowPlan, selected: torch.Tensor | None, e_given: bool,
                      do_stats: bool, do_sel: bool, do_hist: bool) -> None:
        kinds = [k for k in self.kinds if k in vectors]
        if not kinds:
            return
        dtype = torch.float64 if any(v.dtype == torch.float64 for v in vectors.values()) \
            else torch.float32
        vec = {k: vectors[k].to(dtype) for k in kinds}
        sums = self._power_sums(vec, kinds, plan, selected, e_given)
        mom = row_moments(PowerSums.cat([sums[k] for k in kinds]), plan,
                          [vec[k] for k in kinds])
        if do_stats:
            per_density, sel_cols = self._contraction(vec, kinds, plan, mom, do_sel, step, rank)
            quantized = self._quantized(vec, kinds, plan, mom)
            if quantized is not None:
                per_density["topk_quantized_ratio"] = quantized
            rows = row_statistics([vec[k] for k in kinds], plan)
            self._stats.add(stats_columns(step, rank, kinds, plan, mom, per_density, sel_cols,
                                          self._sel_columns, rows))
            if self._coords is not None:
                self._record_coordinates(step, rank, vectors, kinds, plan)
        if do_hist:
            found = histogram_rows([vec[k] for k in kinds], mom, plan, self.hist_bins,
                                   self.hist_range)
            if found:
                self._hist.add(hist_columns(step, rank, kinds, plan, self.hist_bins, found))

    def _record_coordinates(self, step: int, rank: int, vectors: dict[str, torch.Tensor],
                            kinds: list[str], plan: RowPlan) -> None:
        """The sampled coordinates' values of every recorded kind (as given, no cast)."""
        sample = plan._device_cache.get(("coordinates", self.coordinates, self.seed))
        if sample is None:
            picked, layers = coordinate_sample(plan.segments, self.coordinates, self.seed)
            index = torch.from_numpy(picked).to(vectors["u"].device)
            sample = plan._device_cache[("coordinates", self.coordinates, self.seed)] = \
                (picked, layers, index)
        picked, layers, index = sample
        if index.device.type == "cpu":
            values = np.stack([kernel.as_float_array(vectors[k])[picked] for k in kinds])
        else:
            values = kernel.to_numpy(torch.stack([vectors[k].index_select(0, index)
                                                  for k in kinds]))
        self._coords.add(coord_columns(step, rank, kinds, picked, layers, values,
                                       cache=plan._device_cache))

    def _power_sums(self, vec: dict[str, torch.Tensor], kinds: list[str], plan: RowPlan,
                    selected: torch.Tensor | None, e_given: bool) -> dict[str, PowerSums]:
        """Per-kind power sums: one float64 pass per kind that needs one; e is derived from
        u when it is u's residual (no pass of its own)."""
        lengths = plan.segments.lengths
        residual_sel = None
        if "u" in vec:
            residual_sel = residual_selection(vec["u"], vec.get("e"), selected, e_given)
        direct = [k for k in kinds if not (k == "e" and residual_sel is not None)]
        sums: dict[str, PowerSums] = {}
        per_block = max(1, _BLOCK_BYTES // (32 * plan.segments.d))  # device path: 4 f64 rows
        for b in range(0, len(direct), per_block):
            block = direct[b : b + per_block]
            ps = power_sums([vec[k] for k in block], None, lengths, workspace=self._workspace)
            for i, k in enumerate(block):
                sums[k] = ps.pick(i)
        if residual_sel is not None:
            if sums["u"].nonfinite.any():  # NaN/Inf in u: measure e on its own
                sums["e"] = power_sums([vec["e"]], None, lengths, workspace=self._workspace)
            else:
                sums["e"] = residual_sums(sums["u"], vec["u"], residual_sel, vec["e"],
                                          plan.segments.starts, lengths)
        return sums

    def _contraction(self, vec: dict[str, torch.Tensor], kinds: list[str], plan: RowPlan,
                     mom, do_sel: bool, step: int, rank: int,
                     ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray] | None]:
        """({topk_ratio and the Hill columns: (K, R, D), NaN for kinds not ranked}, the
        sparsifier columns)."""
        shape = (len(kinds), plan.rows, len(plan.densities))
        ratio, alpha = np.full(shape, np.nan), np.full(shape, np.nan)
        out = {"topk_ratio": ratio, "hill_alpha": alpha}
        ranked = [k for k in kinds if k in self.topk_kinds or (do_sel and k == "u")]
        if ranked:
            at = [kinds.index(k) for k in ranked]
            absx = torch.stack([vec[k].abs() for k in ranked]) if len(ranked) > 1 \
                else vec[ranked[0]].abs()[None]
            sumsq = mom.sumsq.numpy()[at]
            tops = RowTops(absx, mom.max_abs.numpy()[at], plan, sumsq=sumsq)
            ratio[at] = topk_ratio_rows(tops.top_sums(), sumsq, plan).numpy()
            alpha[at] = tops.hill()
        out["hill_alpha_low"], out["hill_alpha_high"] = kernel.hill_interval(
            alpha, plan.k[None], HILL_LEVEL)
        if not (ranked and do_sel and "u" in ranked):
            return out, None
        iu = ranked.index("u")
        kth = tops.kth()
        sparsifiers = {name: self._row_states(name, src, rank) if src.stateful
                       else src.at(step, rank) for name, src in self._sources.items()}
        cols = selection_rows(vec["u"], plan, mom.sumsq[kinds.index("u")], kth[iu],
                              tops.count_above(kth)[iu], sparsifiers, ratio[kinds.index("u")],
                              per_layer=self.sparsifier_per_layer, quantizer=self._quantizer)
        return out, cols

    def _quantized(self, vec: dict[str, torch.Tensor], kinds: list[str], plan: RowPlan,
                   mom) -> np.ndarray | None:
        """(K, R, D) topk_quantized_ratio for the ranked kinds (None without `quantize`)."""
        if self._quantizer is None:
            return None
        out = np.full((len(kinds), plan.rows, len(plan.densities)), np.nan)
        for i, kind in enumerate(kinds):
            if kind in self.topk_kinds:
                out[i] = quantized_topk_rows(vec[kind], plan, mom.sumsq[i], self._quantizer)
        return out

    def _row_states(self, name: str, source: SparsifierSource, rank: int) -> RowStates:
        """A stateful selector's instances for worker rank: one state per (row, density),
        following the recorded u of that row (see topk_sums.RowStates)."""
        key = (name, rank)
        if key not in self._states:
            self._states[key] = RowStates(source.fresh)
        return self._states[key]

    # ------------------------------------------------------------------ output
    def flush(self) -> None:
        """Write the buffered rows as new parts and note progress in the manifest."""
        self._out.flush()

    @property
    def closed(self) -> bool:
        return self._out.closed

    def close(self, closed_by: str | None = None) -> None:
        """Flush, remove hooks; a manifest this recorder created is marked complete.
        Warns when nothing at all was recorded. closed_by: noted in the manifest (who closed
        it, when not the program itself)."""
        if self._out.closed:
            return
        self._finalizer.detach()
        self.detach()
        self._out.close(closed_by=closed_by)

    def fail(self, error: BaseException | str, closed_by: str | None = None) -> None:
        """Flush what is buffered; a manifest this recorder created is marked failed."""
        self._finalizer.detach()
        self.detach()
        self._out.close(error, closed_by=closed_by)

    def discard_unused(self, error: BaseException | str) -> bool:
        """A run that failed while it was being set up (e.g. a DDP hook given an unknown
        sparsifier). When this recorder has recorded nothing, remove what it wrote: its empty
        folders, and on rank 0 the manifest it created and the folder once empty, so
        that the corrected rerun is not refused; returns True. A recorder that recorded rows,
        or that appends to an earlier run, fails as fail(error) does; returns False."""
        out = self._out
        if out.closed or out.rows_written or out.snapshots_written or out.buffered_steps or \
                (out.owns_manifest and not self._created):
            self.fail(error)
            return False
        self._finalizer.detach()
        self.detach()
        discard_folder(self.out_dir, with_manifest=out.owns_manifest)
        out.closed, out.owns_manifest = True, False  # nothing more is written
        return True

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
        else:
            self.fail(exc)
