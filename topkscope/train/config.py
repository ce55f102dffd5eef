"""Experiment configuration: a YAML file, validated, with named profiles.

A config file is a mapping of the keys in `SCHEMA` plus an optional
`profiles: {quick: {...}, full: {...}}` block whose entries override top-level keys
(mappings such as `model_args` and `recorder` merge key by key; everything else replaces).
Resolution order: file < profile < command-line overrides. Every key and value is checked;
a problem raises ValueError naming the key, the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

Check = Callable[[str, Any], Any]

LAUNCHERS = ("sim", "torchrun")
SELECTIONS = ("global", "layerwise")
DEVICES = ("auto", "cpu", "cuda")
CLIP_SCOPES = ("local", "aggregate")
RECORDER_OWN_KEYS = ("attach",)  # recorder: keys the run itself handles (attach: rec.attach(model))
RECORDER_SET_BY_RUN = ("self", "out_dir", "rank", "manifest")
MERGED_KEYS = ("model_args", "sparsifier_args", "recorder")  # profiles merge these key by key
K_RULES = ("round", "floor")  # round: ours; floor: the Gaussian-k authors' max(int(rho d), 1)
# Named density warm-ups (one density per epoch, then `density`):
#   paper: the Gaussian-k authors' code for every run of their paper (1/64, then 0.004)
#   dgc:   Deep Gradient Compression's exponential warm-up (kept in their code as a comment)
#   none:  no warm-up
DENSITY_SCHEDULES = {
    "paper": (0.015625, 0.004),
    "dgc": (0.25, 0.0625, 0.015625, 0.004),
    "none": (),
}


# ---------------------------------------------------------------- value checks
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(lo: int | None = None, hi: int | None = None) -> Check:
    def check(key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{key} = {v!r} must be an integer{_range(lo, hi, '[', ']')}")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise ValueError(f"{key} = {v!r} is outside the allowed range{_range(lo, hi, '[', ']')}")
        return v

    return check


def number(lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           hi_open: bool = False) -> Check:
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"

    def check(key: str, v: Any) -> float:
        if not _is_number(v):
            raise ValueError(f"{key} = {v!r} must be a finite number{_range(lo, hi, left, right)}")
        bad_lo = lo is not None and (v <= lo if lo_open else v < lo)
        bad_hi = hi is not None and (v >= hi if hi_open else v > hi)
        if bad_lo or bad_hi:
            raise ValueError(f"{key} = {v!r} is outside the allowed range{_range(lo, hi, left, right)}")
        return float(v)

    return check


def choice(*allowed: str) -> Check:
    def check(key: str, v: Any) -> str:
        if v not in allowed:
            raise ValueError(f"{key} = {v!r} is not allowed; choose one of: {', '.join(allowed)}")
        return v

    return check


def boolean(key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{key} = {v!r} must be true or false")
    return v


def text(key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{key} = {v!r} must be a non-empty string")
    return v


def mapping(key: str, v: Any) -> dict:
    if v is None:
        return {}
    if not isinstance(v, Mapping) or not all(isinstance(k, str) for k in v):
        raise ValueError(f"{key} = {v!r} must be a mapping with string keys")
    return dict(v)


def optional(inner: Check) -> Check:
    def check(key: str, v: Any) -> Any:
        return None if v is None else inner(key, v)

    return check


def list_of(inner: Check, increasing: bool = False) -> Check:
    def check(key: str, v: Any) -> list:
        if v is None:
            return []
        if not isinstance(v, (list, tuple)):
            raise ValueError(f"{key} = {v!r} must be a list")
        out = [inner(f"{key}[{i}]", x) for i, x in enumerate(v)]
        if increasing and any(b <= a for a, b in zip(out, out[1:])):
            raise ValueError(f"{key} = {v!r} must be strictly increasing")
        return out

    return check


def density_schedule(key: str, v: Any) -> str | list:
    """A schedule name (DENSITY_SCHEDULES) or an explicit list of per-epoch densities."""
    if isinstance(v, str):
        if v not in DENSITY_SCHEDULES:
            raise ValueError(f"{key} = {v!r} is not a named schedule; choose one of: "
                             f"{', '.join(DENSITY_SCHEDULES)}, or give a list of densities")
        return v
    return list_of(number(0, 1, lo_open=True))(key, v)


def recorder_keys() -> tuple[str, ...]:
    """Keys a `recorder:` block may hold: hooks.Recorder's keyword arguments, plus attach."""
    import inspect

    from topkscope.hooks import Recorder

    params = inspect.signature(Recorder.__init__).parameters
    return tuple(k for k in params if k not in RECORDER_SET_BY_RUN) + RECORDER_OWN_KEYS


def recorder_block(key: str, v: Any) -> dict | None:
    """The `recorder:` block is passed to hooks.Recorder, which checks the values."""
    if v is None:
        return None
    block = mapping(key, v)
    allowed = recorder_keys()
    for name in block:
        if name not in allowed:
            raise ValueError(f"unknown key {key}.{name!r}; allowed: {', '.join(allowed)}")
    if not isinstance(block.get("attach", False), bool):
        raise ValueError(f"{key}.attach = {block['attach']!r} must be true or false")
    return block


def _range(lo, hi, left: str, right: str) -> str:
    if lo is None and hi is None:
        return ""
    return f" {left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"


# ---------------------------------------------------------------- the schema
@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """One resolved experiment. Field docs: docs/training.md (experiment configs)."""

    experiment: str
    model: str
    dataset: str
    batch_size: int                      # per worker
    lr: float
    density: float                       # rho = k/d once the density warm-up is over
    description: str = ""
    model_args: dict = dataclasses.field(default_factory=dict)
    allow_substitute: bool = False       # e.g. MNIST standing in for CIFAR-10, declared
    train_subset: int | None = None      # first N training samples (tokens for LMs)
    eval_subset: int | None = None       # first N evaluation samples (tokens for LMs)
    augment: bool = False                # random crop + flip (image datasets)
    workers: int = 1
    launcher: str = "sim"
    device: str = "auto"
    threads: int | None = None           # torch.set_num_threads per process
    epochs: float | None = None
    steps: int | None = None             # total optimizer steps; wins over epochs
    eval_batch_size: int = 1000
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    no_decay_1d: bool = False            # no weight decay on 1-D tensors (biases, norms)
    lr_warmup_epochs: float = 0.0        # linear ramp to lr over these epochs
    lr_warmup_start: float = 0.0         # ramp starts at lr * this factor
    lr_milestones: list = dataclasses.field(default_factory=list)  # epochs
    lr_gamma: float = 0.1
    grad_clip: float | None = None       # max L2 norm of the gradient
    grad_clip_scope: str = "local"       # local: each worker's g; aggregate: the averaged update
    sparsifier: str = "topk"
    sparsifier_args: dict = dataclasses.field(default_factory=dict)
    # one density per epoch before `density`: a list, or a name in DENSITY_SCHEDULES
    density_schedule: list | str = dataclasses.field(default_factory=list)
    k_rule: str = "round"                # k from rho: round (ours) or floor (the authors')
    selection: str = "global"
    error_feedback: bool = True          # keep the residual e (false: drop what was not sent)
    lr_in_residual: bool = False         # u = e + lr*g instead of u = e + g
    seed: int = 0
    bptt: int | None = None              # language models: sequence length per step
    eval_every_steps: int | None = None  # None: at the end of every epoch
    eval_max_batches: int | None = None
    checkpoint_every_steps: int | None = None  # None: at the end of every epoch
    keep_checkpoints: int = 2
    flush_every_steps: int = 50
    recorder: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> ExperimentConfig:
        return validate({**self.to_dict(), **changes})


SCHEMA: dict[str, Check] = {
    "experiment": text,
    "description": lambda k, v: "" if v in (None, "") else text(k, v),
    "model": text,
    "model_args": mapping,
    "dataset": text,
    "allow_substitute": boolean,
    "train_subset": optional(integer(1)),
    "eval_subset": optional(integer(1)),
    "augment": boolean,
    "workers": integer(1),
    "launcher": choice(*LAUNCHERS),
    "device": choice(*DEVICES),
    "threads": optional(integer(1)),
    "batch_size": integer(1),
    "eval_batch_size": integer(1),
    "epochs": optional(number(0, None, lo_open=True)),
    "steps": optional(integer(1)),
    "lr": number(0, None, lo_open=True),
    "momentum": number(0, 1, hi_open=True),
    "nesterov": boolean,
    "weight_decay": number(0),
    "no_decay_1d": boolean,
    "lr_warmup_epochs": number(0),
    "lr_warmup_start": number(0, 1),
    "lr_milestones": list_of(number(0, None, lo_open=True), increasing=True),
    "lr_gamma": number(0, 1, lo_open=True),
    "grad_clip": optional(number(0, None, lo_open=True)),
    "grad_clip_scope": choice(*CLIP_SCOPES),
    "sparsifier": text,
    "sparsifier_args": mapping,
    "density": number(0, 1, lo_open=True),
    "density_schedule": density_schedule,
    "k_rule": choice(*K_RULES),
    "selection": choice(*SELECTIONS),
    "error_feedback": boolean,
    "lr_in_residual": boolean,
    "seed": integer(0, 2**32 - 1),
    "bptt": optional(integer(1)),
    "eval_every_steps": optional(integer(1)),
    "eval_max_batches": optional(integer(1)),
    "checkpoint_every_steps": optional(integer(1)),
    "keep_checkpoints": integer(1),
    "flush_every_steps": integer(1),
    "recorder": recorder_block,
}
REQUIRED = ("experiment", "model", "dataset", "batch_size", "lr", "density")
TOP_ONLY = ("profiles",)


def _check_keys(raw: Mapping, where: str) -> None:
    for key in raw:
        if key not in SCHEMA:
            allowed = ", ".join(sorted(SCHEMA))
            raise ValueError(f"unknown config key {key!r}{where}; allowed keys: {allowed}")


def validate(raw: Mapping[str, Any]) -> ExperimentConfig:
    """Check every key and value of a flat (profile-resolved) config; return the config."""
    _check_keys(raw, "")
    for key in REQUIRED:
        if raw.get(key) is None:
            raise ValueError(f"config key {key!r} is required")
    values = {key: SCHEMA[key](key, v) for key, v in raw.items()}
    if values.get("epochs") is None and values.get("steps") is None:
        raise ValueError("set epochs or steps (or both: steps wins)")
    cfg = ExperimentConfig(**values)
    if cfg.nesterov and cfg.momentum == 0:
        raise ValueError("nesterov = true needs momentum in (0, 1), got momentum = 0")
    from topkscope.sparsify import available

    if cfg.sparsifier not in available():
        raise ValueError(
            f"sparsifier = {cfg.sparsifier!r} is unknown; available: {', '.join(available())}"
        )
    from topkscope.sparsify import get_sparsifier

    try:
        get_sparsifier(cfg.sparsifier, **cfg.sparsifier_args)
    except ValueError as exc:
        raise ValueError(f"sparsifier_args: {exc}") from None
    for name in (cfg.recorder or {}).get("sparsifiers") or []:
        if name not in available():
            raise ValueError(f"recorder.sparsifiers has unknown sparsifier {name!r}; "
                             f"available: {', '.join(available())}")
    return cfg


def density_schedule_values(cfg: ExperimentConfig) -> list[float]:
    """The per-epoch densities cfg.density_schedule stands for (a name resolved)."""
    if isinstance(cfg.density_schedule, str):
        return list(DENSITY_SCHEDULES[cfg.density_schedule])
    return list(cfg.density_schedule)


def deviations(cfg: ExperimentConfig) -> list[str]:
    """Named departures from the published rule of cfg's sparsifier (sparsifier_args)."""
    from topkscope.sparsify import deviations_of

    return list(deviations_of(cfg.sparsifier, cfg.sparsifier_args))


def run_tags(cfg: ExperimentConfig) -> list[str]:
    """Short labels for the run folder name: the density warm-up, a non-default k rule and
    every deviation, so runs that differ in them never share a name pattern."""
    tags = []
    if isinstance(cfg.density_schedule, str):
        if cfg.density_schedule != "none":
            tags.append(f"ds-{cfg.density_schedule}")
    elif cfg.density_schedule:
        tags.append("ds-custom")
    if cfg.k_rule != "round":
        tags.append(f"k{cfg.k_rule}")
    tags += [dev.replace("=", "-").replace("_", "") for dev in deviations(cfg)]
    return tags


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """base updated by override; MERGED_KEYS mappings merge one level deep."""
    out = dict(base)
    for key, v in override.items():
        if key in MERGED_KEYS and isinstance(out.get(key), Mapping) and isinstance(v, Mapping):
            out[key] = {**out[key], **v}
        else:
            out[key] = v
    return out


def default_profile(raw: Any, profile: str | None) -> str | None:
    """The profile to apply: the one asked for, else `quick` when the file defines it."""
    if profile is not None:
        return profile
    profiles = raw.get("profiles") if isinstance(raw, Mapping) else None
    return "quick" if isinstance(profiles, Mapping) and "quick" in profiles else None


def resolve(raw: Mapping[str, Any], profile: str | None = None,
            overrides: Mapping[str, Any] | None = None, name: str | None = None) -> ExperimentConfig:
    """A raw YAML mapping -> validated config: file < profiles[profile] < overrides.

    profile=None uses `quick` when the file defines it. name is the default `experiment`.
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"a config must be a mapping of keys to values, got {type(raw).__name__}")
    body = {k: v for k, v in raw.items() if k not in TOP_ONLY}
    _check_keys(body, "")
    profiles = raw.get("profiles") or {}
    if not isinstance(profiles, Mapping):
        raise ValueError(f"profiles = {profiles!r} must be a mapping of name -> overrides")
    profile = default_profile(raw, profile)
    if profile is not None:
        if profile not in profiles:
            names = ", ".join(profiles) or "none defined"
            raise ValueError(f"profile {profile!r} is not defined; profiles: {names}")
        block = profiles[profile] or {}
        if not isinstance(block, Mapping):
            raise ValueError(f"profiles.{profile} must be a mapping of overrides")
        _check_keys(block, f" in profiles.{profile}")
        body = merge(body, block)
    if name is not None:
        body.setdefault("experiment", name)
    body = merge(body, overrides or {})
    return validate(body)


def load_config(path: str | Path, profile: str | None = None,
                overrides: Mapping[str, Any] | None = None) -> tuple[ExperimentConfig, str | None]:
    """Read and resolve a YAML experiment file. Returns (config, profile actually used)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"config file {str(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"config file {str(path)!r} is not valid YAML: {first}") from None
    if raw is None:
        raise ValueError(f"config file {str(path)!r} is empty")
    return resolve(raw, profile, overrides, name=path.stem), default_profile(raw, profile)


def parse_assignment(text_: str) -> tuple[str, Any]:
    """'key=value' from the command line; the value is read as YAML (numbers, lists, ...)."""
    key, sep, value = text_.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {text_!r} must look like KEY=VALUE")
    try:
        parsed = yaml.safe_load(value) if value else None
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed
