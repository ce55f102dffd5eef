"""A training condition as typed fields, and its two renderings: the `condition` key of the
claims table (a generated column for CSV readers: nothing parses it) and the words people read
("ρ = 0.001 after the paper's warm-up (1/64 → 0.004)").

    cond = run_condition(manifest)              # what a run trained under
    cond.key()      # 'warmup=paper; rho=0.001'
    describe(cond)  # 'ρ = 0.001 after the paper's warm-up (1/64 → 0.004)'

A claims row carries its condition as the columns of CONDITION_COLUMNS (ClaimRow's fields of
the same names); `from_record` rebuilds the Condition from such a row, so every renderer (the
README, findings, LaTeX, the report, figure titles) says a condition the same way.

Fields: the experiment and its world size; the run's target density (`training_density`) and,
for a row of the recorder, the density it evaluated Top-k at (`recorder_density`); the density
warm-up by name and its per-epoch densities; the phase of training a row's units come from
(`phase`: "" for the target density or the whole run, "warm-up" with the density trained then,
"unknown" when a run's steps cannot be placed, "pooled" for a summary over conditions); the k
rule; the outer loop (DiLoCo-style: step rule, inner steps H, learning rate, momentum, the
error-feedback decay) and the bits of its values; named deviations from a published rule; the
reference method a comparison is against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any

# the key's words for a unit trained during a density warm-up (analysis.units adds it)
DURING_WARMUP = "during warm-up at rho="
ALL_CONDITIONS = "all conditions (target density)"  # the key of a pooled summary row
WARMUP_UNKNOWN = "warm-up phase unknown"
# phases of a row's units: "" the target density (or the whole run), "warm-up" a density
# warm-up, "first-exchanges" / "later-exchanges" an outer loop's first EARLY_EXCHANGES
# exchanges and the rest (the error-feedback accumulator is empty at exchange 1 and holds one
# exchange's residual at exchange 2: the pseudo-gradient changes shape there), "unknown"
# steps a run's manifest cannot place, "pooled" a summary over conditions
PHASES = ("", "warm-up", "first-exchanges", "later-exchanges", "unknown", "pooled")
EARLY_EXCHANGES = 2
PHASE_KEYS = {"first-exchanges": f"exchanges 1-{EARLY_EXCHANGES}",
              "later-exchanges": f"exchanges {EARLY_EXCHANGES + 1} on"}


@dataclass(frozen=True)
class Condition:
    """One condition (module docstring). Frozen and hashable: units group by it."""

    experiment: str = ""
    world_size: int | None = None
    training_density: float | None = None
    recorder_density: float | None = None
    warmup: str = "none"
    warmup_schedule: tuple[float, ...] = ()
    phase: str = ""
    phase_density: float | None = None
    k_rule: str = "round"
    outer_step: str = ""
    outer_inner_steps: int | None = None
    outer_lr: float | None = None
    outer_momentum: float | None = None
    outer_error_decay: float | None = None
    quantize_bits: int | None = None
    deviations: tuple[str, ...] = ()
    reference: str = ""

    def __lt__(self, other: Condition) -> bool:
        """Ordered by key (then by every field), so tables list conditions as their keys
        sort."""
        return (self.key(), repr(self)) < (other.key(), repr(other))

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"phase = {self.phase!r}; allowed: {', '.join(map(repr, PHASES))}")

    # ------------------------------------------------------------------ the key
    def training_key(self) -> str:
        """The run's training condition as condition_of wrote it: 'warmup=paper',
        'warmup=none; outer=average(H=15, lr=1, beta=0.95); quantize=2bit'."""
        parts = [f"warmup={self.warmup_name()}"]
        if self.k_rule != "round":
            parts.append(f"k_rule={self.k_rule}")
        if self.outer_step:
            parts.append(f"outer={self.outer_key()}")
        if self.quantize_bits is not None:
            parts.append(f"quantize={self.quantize_bits}bit")
        return "; ".join([*parts, *self.deviations])

    def key(self) -> str:
        """The claims table's `condition` column: the training condition, the target density
        and the phase ('warmup=paper; rho=0.001; during warm-up at rho=0.015625'); a pooled
        summary's ALL_CONDITIONS."""
        if self.phase == "pooled":
            return ALL_CONDITIONS
        text = self.training_key()
        if self.training_density is not None:
            text += f"; rho={self.training_density:g}"
        if self.phase == "warm-up":
            text += f"; {DURING_WARMUP}{_g(self.phase_density)}"
        elif self.phase == "unknown":
            text += f"; {WARMUP_UNKNOWN}"
        elif self.phase in PHASE_KEYS:
            text += f"; {PHASE_KEYS[self.phase]}"
        if self.recorder_density is not None:
            text += f"; recorded at rho={self.recorder_density:g}"
        return text

    def warmup_name(self) -> str:
        if self.warmup == "custom":
            return "custom[" + ",".join(f"{v:g}" for v in self.warmup_schedule) + "]"
        return self.warmup

    def outer_key(self) -> str:
        """'nesterov(H=15, lr=0.7, mu=0.9, beta=1)': a setting not recorded is left out."""
        shown = (("H", self.outer_inner_steps, "{}"), ("lr", self.outer_lr, "{:g}"),
                 ("mu", self.outer_momentum if self.outer_step == "nesterov" else None, "{:g}"),
                 ("beta", self.outer_error_decay, "{:g}"))
        parts = [f"{short}={form.format(v)}" for short, v, form in shown if v is not None]
        return f"{self.outer_step}({', '.join(parts)})"

    @property
    def target(self) -> Condition:
        """The condition of the target-density phase this one belongs to (phase cleared)."""
        return replace(self, phase="", phase_density=None)

    @property
    def main_phase(self) -> bool:
        """A phase an answer is given for first: the target density (or the whole run), an
        outer loop's exchanges after the first ones."""
        return self.phase in ("", "later-exchanges")

    @property
    def during_warmup(self) -> bool:
        return self.phase == "warm-up"

    @property
    def is_outer(self) -> bool:
        return bool(self.outer_step)

    def record(self) -> dict[str, Any]:
        """The claims row's condition columns (CONDITION_COLUMNS) of this condition: tuples as
        comma-separated text, missing numbers as NaN."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
            elif value is None:
                value = math.nan
            out[f.name] = value
        return out


CONDITION_COLUMNS = tuple(f.name for f in fields(Condition))
NUMERIC_CONDITION_COLUMNS = ("world_size", "training_density", "recorder_density",
                             "phase_density", "outer_inner_steps", "outer_lr", "outer_momentum",
                             "outer_error_decay", "quantize_bits")


def _g(value) -> str:
    return "?" if value is None else f"{float(value):g}"


def _number(value, kind=float):
    """value as kind, None for a missing, NaN or non-numeric one."""
    if value is None or isinstance(value, bool):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(x):
        return None
    return int(x) if kind is int else x


def run_condition(manifest: dict, **overrides: Any) -> Condition:
    """What a run trained under, from its manifest (the schedule, k rule, outer block and
    quantization may sit at the top level or in `config`); overrides set fields (a unit's
    phase, the recorder's density)."""
    config = manifest.get("config") or {}

    def get(key):
        value = manifest.get(key)
        return config.get(key) if value is None else value

    sched = get("density_schedule")
    if isinstance(sched, str):
        warmup = sched
        values = manifest.get("density_schedule_values") or ()
    elif sched:
        warmup, values = "custom", sched
    else:
        warmup, values = "none", ()
    outer = get("outer") or {}
    quantize = get("quantize") or {}
    density = manifest.get("density")
    values = dict(
        experiment=str(manifest.get("experiment") or ""),
        world_size=_number(manifest.get("world_size"), int),
        training_density=_number(density) if not isinstance(density, (list, tuple)) else None,
        warmup=str(warmup),
        warmup_schedule=tuple(float(v) for v in values if _number(v) is not None),
        k_rule=str(manifest.get("k_rule") or "round"),
        outer_step=str(outer.get("step")) if outer else "",
        outer_inner_steps=_number(outer.get("inner_steps"), int) if outer else None,
        outer_lr=_number(outer.get("lr")) if outer else None,
        outer_momentum=_number(outer.get("momentum")) if outer else None,
        outer_error_decay=_number(outer.get("error_decay")) if outer else None,
        quantize_bits=_number(quantize.get("bits"), int) if quantize else None,
        deviations=tuple(str(d) for d in (manifest.get("deviations") or ())),
    )
    values.update(overrides)
    return Condition(**values)


def from_record(record: Any) -> Condition:
    """The Condition of a claims row (a dict, a pandas row or a namedtuple with the
    CONDITION_COLUMNS; a missing column takes the field's default)."""
    get = record.get if hasattr(record, "get") else lambda k, d=None: getattr(record, k, d)
    values = {}
    for f in fields(Condition):
        value = get(f.name, None)
        if f.name in NUMERIC_CONDITION_COLUMNS:
            kind = int if f.name in ("world_size", "outer_inner_steps", "quantize_bits") else float
            values[f.name] = _number(value, kind)
        elif f.name == "warmup_schedule":
            text = value if isinstance(value, str) else ""
            values[f.name] = tuple(float(v) for v in text.split(",") if v.strip())
        elif f.name == "deviations":
            text = value if isinstance(value, str) else ""
            values[f.name] = tuple(v for v in text.split(",") if v)
        else:
            text = value if isinstance(value, str) else ""
            values[f.name] = text or Condition.__dataclass_fields__[f.name].default
    return Condition(**values)


# ------------------------------------------------------------------ for people
def density_text(rho) -> str:
    """A density as people write it: '1/64' for 1/2^n (n >= 2), else '0.001', '0.000226'."""
    x = _number(rho)
    if x is None:
        return "?"
    if 0 < x < 1:
        inverse = 1.0 / x
        if abs(inverse - round(inverse)) < 1e-9 and round(inverse) >= 4 and (
                int(round(inverse)) & (int(round(inverse)) - 1)) == 0:
            return f"1/{int(round(inverse))}"
    return f"{x:g}"


WARMUP_NAMES = {"paper": "the paper's warm-up"}


def warmup_text(cond: Condition) -> str:
    """'the paper's warm-up (1/64 → 0.004)', 'a warm-up (1/4 → 1/16 → 1/64)', 'no warm-up'."""
    if cond.warmup == "none":
        return "no warm-up"
    steps = " → ".join(density_text(v) for v in cond.warmup_schedule)
    name = WARMUP_NAMES.get(cond.warmup, "a warm-up" if cond.warmup == "custom"
                            else f"the {cond.warmup} warm-up")
    return f"{name} ({steps})" if steps else name


def outer_parts(cond: Condition) -> list[str]:
    """['H = 15', 'averaged step lr 1', 'error decay 0.95', '2-bit values']."""
    step = {"average": "averaged step", "nesterov": "Nesterov step"}.get(cond.outer_step,
                                                                        f"{cond.outer_step} step")
    parts = [f"H = {cond.outer_inner_steps}" if cond.outer_inner_steps is not None else "",
             step + (f" lr {cond.outer_lr:g}" if cond.outer_lr is not None else "")
             + (f" μ {cond.outer_momentum:g}" if cond.outer_momentum is not None
                and cond.outer_step == "nesterov" else ""),
             f"error decay {cond.outer_error_decay:g}" if cond.outer_error_decay is not None
             else ""]
    if cond.quantize_bits is not None:
        parts.append(f"{cond.quantize_bits}-bit values")
    return [p for p in parts if p]


def outer_text(cond: Condition) -> str:
    """'outer loop: H = 15, averaged step lr 1, error decay 0.95, 2-bit values'."""
    return "outer loop: " + ", ".join(outer_parts(cond))


def describe_parts(cond: Condition, *, density: bool = True, warmup: bool = True,
                   experiment: bool = False) -> list[tuple[str, str]]:
    """The condition in words as (kind, text) parts, kind one of experiment, density,
    warmup, phase, recorder, k_rule, outer (one part per outer setting), quantize, deviation,
    workers: describe joins them; an answer compares them part by part."""
    if cond.phase == "pooled":
        return [("phase", "all target-density conditions pooled")]
    parts = []
    if experiment and cond.experiment:
        parts.append(("experiment", cond.experiment))
    if density and cond.training_density is not None:
        parts.append(("density", f"ρ = {density_text(cond.training_density)}"))
    if warmup and cond.warmup != "none" and not (cond.is_outer and density
                                                and cond.training_density is not None):
        parts.append(("warmup", warmup_text(cond)))
    if cond.phase == "warm-up":
        parts.append(("phase", f"during the warm-up, at ρ = {density_text(cond.phase_density)}"))
    elif cond.phase == "unknown":
        parts.append(("phase", "warm-up phase unknown"))
    elif cond.phase == "first-exchanges":
        parts.append(("phase", f"first {EARLY_EXCHANGES} exchanges"))
    elif cond.phase == "later-exchanges":
        parts.append(("phase", f"after the first {EARLY_EXCHANGES} exchanges"))
    if cond.recorder_density is not None and cond.recorder_density != cond.training_density:
        parts.append(("recorder", f"Top-k evaluated at ρ = {density_text(cond.recorder_density)}"))
    if cond.k_rule != "round":
        parts.append(("k_rule", f"k rounded by {cond.k_rule}"))
    if cond.is_outer:
        parts += [("outer", p) for p in outer_parts(cond)]
    elif cond.quantize_bits is not None:
        parts.append(("quantize", f"{cond.quantize_bits}-bit values"))
    parts += [("deviation", d) for d in cond.deviations]
    if cond.world_size is not None and experiment:
        parts.append(("workers", f"P = {cond.world_size}"))
    return parts


def describe(cond: Condition, *, density: bool = True, warmup: bool = True,
             experiment: bool = False) -> str:
    """The condition in words, every setting kept and no config syntax:
    'ρ = 0.001 after the paper's warm-up (1/64 → 0.004)'; 'during the warm-up, at ρ = 1/64';
    'ρ = 1/64, outer loop: H = 15, averaged step lr 1, error decay 0.95, 2-bit values';
    a pooled summary 'all target-density conditions pooled'. density / warmup False leave
    those parts out (a table whose columns say them); experiment True names it first."""
    texts, outer, at, last = [], [], None, ""
    for kind, text in describe_parts(cond, density=density, warmup=warmup,
                                     experiment=experiment):
        if kind == "warmup" and last == "density":
            texts[-1] += f" after {text}"
        elif kind == "outer":
            if at is None:
                at = len(texts)
                texts.append("")
            outer.append(text)
        else:
            texts.append(text)
        last = kind
    if at is not None:
        texts[at] = "outer loop: " + ", ".join(outer)
    return ", ".join(texts)


__all__ = ["ALL_CONDITIONS", "CONDITION_COLUMNS", "Condition", "DURING_WARMUP",
           "NUMERIC_CONDITION_COLUMNS", "WARMUP_UNKNOWN", "density_text", "describe",
           "describe_parts",
           "from_record", "run_condition", "warmup_text"]
