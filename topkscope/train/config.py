"""Experiment configuration: a YAML file, validated, with named profiles.

A config file is a mapping of the keys in `SCHEMA` plus an optional
`profiles: {quick: {...}, full: {...}}` block whose entries override top-level keys
(mappings such as `model_args` and `recorder` merge key by key; everything else replaces).
Resolution order: file < profile < command-line overrides. Every key and value is checked;
a problem raises ValueError naming the key, the bad value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from topkscope import validate as checks
from topkscope.bounds import K_RULES
from topkscope.hooks.recorder import SETTINGS as RECORDER_SETTINGS
from topkscope.hooks.recorder import check_settings as check_recorder_settings
from topkscope.hooks.settings import check_quantize
from topkscope.sparsify import available
from topkscope.validate import Check

LAUNCHERS = ("sim", "torchrun")
SELECTIONS = ("global", "layerwise")
DEVICES = ("auto", "cpu", "cuda")
# Where grad_clip acts. aggregate (published): on the averaged sparse update s, after the
# exchange and before the optimizer, as hclhkbu/GaussianK-SGD@3da1fb3 dist_trainer.py does
# (optimizer.synchronize() then clip_grad_norm_ over all parameters); the residuals keep the
# unclipped u. worker (named deviation): each worker's raw g, before error feedback.
CLIP_PLACES = ("aggregate", "worker")
# renamed config keys: old key -> (new key, old value -> new value), read with a note on stderr
RENAMED_KEYS = {"grad_clip_scope": ("clip_at", {"local": "worker", "aggregate": "aggregate"})}
OPTIMIZERS = ("sgd", "adamw")          # applied to the aggregated update (train/optimizer.py)
LR_SCHEDULES = ("milestones", "cosine")  # after the linear warm-up (train/schedules.py)
RECORDER_OWN_KEYS = ("attach",)  # recorder: keys the run itself handles (attach: rec.attach(model))
# profiles merge these key by key
MERGED_KEYS = ("model_args", "sparsifier_args", "recorder", "outer", "quantize")
LIST_KEYS = {"density": "density_schedule"}  # a single-number key -> its list-valued sibling
# Named density warm-ups (one density per epoch, then `density`):
#   paper: the Gaussian-k authors' code for every run of their paper (1/64, then 0.004)
#   dgc:   Deep Gradient Compression's exponential warm-up (kept in their code as a comment)
#   none:  no warm-up
DENSITY_SCHEDULES = {
    "paper": (0.015625, 0.004),
    "dgc": (0.25, 0.0625, 0.015625, 0.004),
    "none": (),
}


# ---------------------------------------------------------------- reading YAML
class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, plus numbers in exponent notation without a '.' or an exponent
    sign (1e-2, 1e8, 2.5e3), which YAML 1.1 reads as strings. An integer mantissa with a
    non-negative exponent is an int (steps: 1e5 is 100000); everything else is a float."""


_EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def _exponent_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text_ = loader.construct_scalar(node).replace("_", "")
    mantissa, _, exponent = text_.lower().partition("e")
    if mantissa.lstrip("+-").isdigit() and int(exponent) >= 0:
        return int(mantissa) * 10 ** int(exponent)
    return float(text_)


_Loader.add_implicit_resolver("tag:topkscope:exponent", _EXPONENT, list("-+0123456789."))
_Loader.add_constructor("tag:topkscope:exponent", _exponent_number)


def read_yaml(text_: str) -> Any:
    """YAML text -> Python values, reading 1e-2 and 1e8 as numbers (see _Loader)."""
    return yaml.load(text_, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


# ---------------------------------------------------------------- value checks
def rule(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Check:
    """A schema entry: check(key, value, *args, **kwargs), check from topkscope.validate."""
    return lambda key, v: check(key, v, *args, **kwargs)


def optional(inner: Check) -> Check:
    return lambda key, v: None if v is None else inner(key, v)


def single(inner: Check) -> Check:
    """inner, but a list given for a key in LIST_KEYS names the list-valued key to use."""
    def check(key: str, v: Any) -> Any:
        if isinstance(v, (list, tuple)) and key in LIST_KEYS:
            raise ValueError(f"{key} = {v!r} must be a single number; for one value per epoch "
                             f"set {LIST_KEYS[key]}: {list(v)!r} ({key} applies once that list runs out)")
        return inner(key, v)

    return check


def density_schedule(key: str, v: Any) -> str | list:
    """A schedule name (DENSITY_SCHEDULES) or an explicit list of per-epoch densities."""
    if isinstance(v, str):
        if v not in DENSITY_SCHEDULES:
            raise ValueError(f"{key} = {v!r} is not a named schedule; choose one of: "
                             f"{', '.join(DENSITY_SCHEDULES)}, or give a list of densities")
        return v
    return checks.list_of(key, v, rule(checks.number, 0, 1, lo_open=True))


def betas(key: str, v: Any) -> list[float]:
    """AdamW's (beta1, beta2): two numbers in [0, 1)."""
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise ValueError(f"{key} = {v!r} must be a list of two numbers [beta1, beta2] in [0, 1)")
    return checks.list_of(key, v, rule(checks.number, 0, 1, hi_open=True))


def recorder_block(key: str, v: Any) -> dict | None:
    """The `recorder:` block: hooks.Recorder's settings (checked here, without building a
    Recorder) plus attach. Returned as written; the run passes it to the Recorder."""
    if v is None:
        return None
    block = checks.mapping(key, v)
    checks.known_keys("key", block, RECORDER_SETTINGS + RECORDER_OWN_KEYS, where=f" in {key}")
    checks.boolean(f"{key}.attach", block.get("attach", False))
    check_recorder_settings({k: x for k, x in block.items() if k not in RECORDER_OWN_KEYS},
                            prefix=f"{key}.")
    return block


# The `outer:` block (outer-loop training, train/outer.py): H inner steps of the config's
# optimizer on every worker, then one exchange of the pseudo-gradients and an outer step.
# Outer step rules, each with its published defaults (lr, momentum) and their source:
#   nesterov: DiLoCo's outer Nesterov momentum SGD (Douillard et al., arXiv 2311.08105:
#             outer lr 0.7, momentum 0.9)
#   average:  SparseLoCo's plain averaged step, theta <- theta - lr * mean of what was sent
#             (Sarfi et al., arXiv 2508.15706: the error-feedback accumulator is the momentum)
OUTER_STEPS = {"nesterov": {"lr": 0.7, "momentum": 0.9}, "average": {"lr": 1.0, "momentum": 0.0}}
OUTER_KEYS = ("inner_steps", "step", "lr", "momentum", "error_decay")


def outer_block(key: str, v: Any) -> dict | None:
    """The `outer:` block with every key filled: inner_steps H (required), step (nesterov or
    average; default nesterov), lr and momentum (the rule's published defaults), error_decay
    (beta of the error-feedback accumulator e <- beta e + Delta; default 1, plain error
    feedback)."""
    if v is None:
        return None
    block = checks.mapping(key, v)
    checks.known_keys("key", block, OUTER_KEYS, where=f" in {key}")
    if block.get("inner_steps") is None:
        raise ValueError(f"{key}.inner_steps is required: the number H of inner steps "
                         f"between two exchanges, an integer >= 1")
    step = checks.choice(f"{key}.step", block.get("step", "nesterov"), OUTER_STEPS)
    defaults = OUTER_STEPS[step]
    out = {"inner_steps": checks.integer(f"{key}.inner_steps", block["inner_steps"], 1),
           "step": step,
           "lr": checks.number(f"{key}.lr", block.get("lr", defaults["lr"]), 0, lo_open=True),
           "momentum": checks.number(f"{key}.momentum", block.get("momentum",
                                     defaults["momentum"]), 0, 1, hi_open=True),
           "error_decay": checks.number(f"{key}.error_decay", block.get("error_decay", 1.0),
                                        0, 1)}
    if step == "average" and out["momentum"] != 0:
        raise ValueError(f"{key}.momentum = {out['momentum']!r} does not apply to "
                         f"{key}.step = 'average' (no outer momentum); use step: nesterov")
    if step == "nesterov" and out["momentum"] == 0:
        raise ValueError(f"{key}.momentum = 0 with {key}.step = 'nesterov'; allowed: "
                         f"momentum in (0, 1), or step: average")
    return out


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
    optimizer: str = "sgd"               # sgd (momentum SGD) or adamw, after aggregation
    momentum: float = 0.0                # sgd only
    nesterov: bool = False               # sgd only
    betas: list = dataclasses.field(default_factory=lambda: [0.9, 0.999])  # adamw only
    eps: float = 1e-8                    # adamw only
    weight_decay: float = 0.0            # sgd: L2 added to the update; adamw: decoupled
    no_decay_1d: bool = False            # no weight decay on 1-D tensors (biases, norms)
    lr_warmup_epochs: float = 0.0        # linear ramp to lr over these epochs
    lr_warmup_steps: int = 0             # ... or over these steps (one of the two)
    lr_warmup_start: float = 0.0         # ramp starts at lr * this factor
    lr_schedule: str = "milestones"      # after the warm-up: milestones or cosine
    lr_milestones: list = dataclasses.field(default_factory=list)  # epochs
    lr_gamma: float = 0.1
    lr_final_factor: float = 0.0         # cosine: lr * this at the last step
    grad_clip: float | None = None       # max L2 norm of the gradient
    clip_at: str = "aggregate"           # aggregate: the averaged sparse update (published);
                                         # worker: each worker's g before error feedback
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
    quantize: dict | None = None         # b-bit values sent: {bits, range} (sparsify.quantize)
    outer: dict | None = None            # outer-loop training: see outer_block

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> ExperimentConfig:
        return validate({**self.to_dict(), **changes})


SCHEMA: dict[str, Check] = {
    "experiment": checks.text,
    "description": lambda k, v: "" if v in (None, "") else checks.text(k, v),
    "model": checks.text,
    "model_args": checks.mapping,
    "dataset": checks.text,
    "allow_substitute": checks.boolean,
    "train_subset": optional(rule(checks.integer, 1)),
    "eval_subset": optional(rule(checks.integer, 1)),
    "augment": checks.boolean,
    "workers": rule(checks.integer, 1),
    "launcher": rule(checks.choice, LAUNCHERS),
    "device": rule(checks.choice, DEVICES),
    "threads": optional(rule(checks.integer, 1)),
    "batch_size": rule(checks.integer, 1),
    "eval_batch_size": rule(checks.integer, 1),
    "epochs": optional(rule(checks.number, 0, lo_open=True)),
    "steps": optional(rule(checks.integer, 1)),
    "lr": rule(checks.number, 0, lo_open=True),
    "optimizer": rule(checks.choice, OPTIMIZERS),
    "momentum": rule(checks.number, 0, 1, hi_open=True),
    "nesterov": checks.boolean,
    "betas": betas,
    "eps": rule(checks.number, 0, lo_open=True),
    "weight_decay": rule(checks.number, 0),
    "no_decay_1d": checks.boolean,
    "lr_warmup_epochs": rule(checks.number, 0),
    "lr_warmup_steps": rule(checks.integer, 0),
    "lr_warmup_start": rule(checks.number, 0, 1),
    "lr_schedule": rule(checks.choice, LR_SCHEDULES),
    "lr_milestones": rule(checks.list_of, rule(checks.number, 0, lo_open=True),
                          increasing=True),
    "lr_gamma": rule(checks.number, 0, 1, lo_open=True),
    "lr_final_factor": rule(checks.number, 0, 1),
    "grad_clip": optional(rule(checks.number, 0, lo_open=True)),
    "clip_at": rule(checks.choice, CLIP_PLACES),
    # the registry read at each check, so a sparsifier registered after this import counts
    "sparsifier": lambda key, v: checks.choice(key, v, available()),
    "sparsifier_args": checks.mapping,
    "density": single(rule(checks.number, 0, 1, lo_open=True)),
    "density_schedule": density_schedule,
    "k_rule": rule(checks.choice, K_RULES),
    "selection": rule(checks.choice, SELECTIONS),
    "error_feedback": checks.boolean,
    "lr_in_residual": checks.boolean,
    "seed": rule(checks.integer, 0, 2**32 - 1),
    "bptt": optional(rule(checks.integer, 1)),
    "eval_every_steps": optional(rule(checks.integer, 1)),
    "eval_max_batches": optional(rule(checks.integer, 1)),
    "checkpoint_every_steps": optional(rule(checks.integer, 1)),
    "keep_checkpoints": rule(checks.integer, 1),
    "flush_every_steps": rule(checks.integer, 1),
    "recorder": recorder_block,
    "quantize": check_quantize,
    "outer": outer_block,
}
REQUIRED = ("experiment", "model", "dataset", "batch_size", "lr", "density")
TOP_ONLY = ("profiles",)


def _check_keys(raw: Mapping, where: str) -> None:
    checks.known_keys("config key", raw, sorted(SCHEMA), where=where)


def renamed(raw: Mapping[str, Any], where: str = "", note: bool = True) -> dict[str, Any]:
    """raw with every old key of RENAMED_KEYS spelled the new way (one note on stderr each
    when `note`); an old value outside the mapping, or both spellings given, is an error."""
    out = dict(raw)
    for old, (new, values) in RENAMED_KEYS.items():
        if old not in out:
            continue
        value = out.pop(old)
        if value not in values:
            raise ValueError(f"config key {old!r}{where} = {value!r} is not one of "
                             f"{', '.join(map(repr, values))} (it is deprecated: use {new!r}, "
                             f"one of {', '.join(map(repr, dict.fromkeys(values.values())))})")
        if new in out:
            raise ValueError(f"config keys {old!r} and {new!r}{where} are both set; "
                             f"allowed: {new!r} only ({old!r} is its deprecated spelling)")
        out[new] = values[value]
        if note:
            print(f"note: config key {old}{where} is deprecated; use {new}: {out[new]}",
                  file=sys.stderr)
    return out


def validate(raw: Mapping[str, Any]) -> ExperimentConfig:
    """Check every key and value of a flat (profile-resolved) config; return the config."""
    raw = renamed(raw)
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
    check_options(cfg)
    from topkscope.sparsify import get_sparsifier

    try:
        get_sparsifier(cfg.sparsifier, **cfg.sparsifier_args)
    except ValueError as exc:
        raise ValueError(f"sparsifier_args: {exc}") from None
    return cfg


# keys that belong to one choice of another key: set with another choice they are errors
OPTION_KEYS = {
    "optimizer": {"sgd": ("momentum", "nesterov"), "adamw": ("betas", "eps")},
    "lr_schedule": {"milestones": ("lr_milestones", "lr_gamma"), "cosine": ("lr_final_factor",)},
}


def _default(key: str) -> Any:
    spec = ExperimentConfig.__dataclass_fields__[key]
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default


def with_defaults(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A config as saved by a run (manifest `config`), plus the default of every key added
    since (a run written before `optimizer` existed trained with its default, sgd)."""
    # clip_at: a run saved before it clipped where grad_clip_scope said, else on each worker
    saved = renamed({"grad_clip_scope": "local", **saved} if "clip_at" not in saved else saved,
                    note=False)
    fields = ExperimentConfig.__dataclass_fields__.values()
    added = {f.name: _default(f.name) for f in fields if f.name not in saved and (
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING)}
    return {**added, **saved}


def check_options(cfg: ExperimentConfig) -> None:
    """A key of another optimizer or lr_schedule than the chosen one, set to anything but its
    default, is an error naming the keys that apply (rather than silently ignored)."""
    for choice_key, by_choice in OPTION_KEYS.items():
        chosen = getattr(cfg, choice_key)
        for choice, keys in by_choice.items():
            for key in keys:
                if choice != chosen and getattr(cfg, key) != _default(key):
                    raise ValueError(f"{key} = {getattr(cfg, key)!r} does not apply to "
                                     f"{choice_key} = {chosen!r}; allowed with it: "
                                     f"{', '.join(by_choice[chosen])}")
    if cfg.optimizer == "adamw" and cfg.lr_in_residual:
        raise ValueError("lr_in_residual = true needs optimizer = 'sgd' (AdamW normalises the "
                         "update, so lr cannot move into u); set lr_in_residual: false")
    if cfg.outer is not None:
        check_outer(cfg)
    if cfg.lr_warmup_epochs and cfg.lr_warmup_steps:
        raise ValueError(f"lr_warmup_epochs = {cfg.lr_warmup_epochs} and lr_warmup_steps = "
                         f"{cfg.lr_warmup_steps} are both set; allowed: one of them")


def check_outer(cfg: ExperimentConfig) -> None:
    """What an outer-loop config may not combine (one-line errors naming the keys)."""
    if cfg.lr_in_residual:
        raise ValueError("lr_in_residual = true does not apply to outer-loop training (the "
                         "inner optimizer takes each worker's own gradient); set it to false")
    if cfg.outer["error_decay"] != 1.0 and not cfg.error_feedback:
        raise ValueError(f"outer.error_decay = {cfg.outer['error_decay']!r} needs "
                         f"error_feedback = true (it decays the error-feedback accumulator)")


def density_schedule_values(cfg: ExperimentConfig) -> list[float]:
    """The per-epoch densities cfg.density_schedule stands for (a name resolved)."""
    if isinstance(cfg.density_schedule, str):
        return list(DENSITY_SCHEDULES[cfg.density_schedule])
    return list(cfg.density_schedule)


def deviations(cfg: ExperimentConfig) -> list[str]:
    """Named departures from the published rules: those of cfg's sparsifier (sparsifier_args)
    and clipping each worker's g (clip_at=worker) instead of the aggregate."""
    from topkscope.sparsify import deviations_of

    found = list(deviations_of(cfg.sparsifier, cfg.sparsifier_args))
    if cfg.grad_clip is not None and cfg.clip_at != "aggregate":
        found.append(f"clip_at={cfg.clip_at}")
    return found


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
    if cfg.outer is not None:
        tags.append(f"outer{cfg.outer['inner_steps']}{cfg.outer['step']}")
    if cfg.quantize is not None:
        tags.append(f"q{cfg.quantize['bits']}bit")
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
    body = renamed({k: v for k, v in raw.items() if k not in TOP_ONLY})
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
        block = renamed(block, f" in profiles.{profile}")
        _check_keys(block, f" in profiles.{profile}")
        body = merge(body, block)
    if name is not None:
        body.setdefault("experiment", name)
    overrides = dict(overrides or {})
    dotted = {k: overrides.pop(k) for k in list(overrides) if "." in k}
    body = merge(body, renamed(overrides))
    for key, value in dotted.items():
        body = assign(body, key, value)
    return validate(body)


def assign(body: Mapping[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """body with `value` set at a dotted key (`recorder.schedule.every`), its siblings kept;
    the mappings on the way are copied, and a step into a value that is not a mapping (a
    schedule given as a number) replaces it with a new mapping."""
    head, _, rest = dotted.partition(".")
    if not head or (rest and not all(rest.split("."))):
        raise ValueError(f"--set key {dotted!r} has an empty part; write KEY or KEY.SUBKEY...")
    out = dict(body)
    if not rest:
        out[head] = value
        return out
    inner = out.get(head)
    out[head] = assign(inner if isinstance(inner, Mapping) else {}, rest, value)
    return out


def load_config(path: str | Path, profile: str | None = None,
                overrides: Mapping[str, Any] | None = None) -> tuple[ExperimentConfig, str | None]:
    """Read and resolve a YAML experiment file. Returns (config, profile actually used)."""
    path = Path(path)
    try:
        raw = read_yaml(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"config file {str(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"config file {str(path)!r} is not valid YAML: {first}") from None
    if raw is None:
        raise ValueError(f"config file {str(path)!r} is empty")
    return resolve(raw, profile, overrides, name=path.stem), default_profile(raw, profile)


def parse_assignment(text_: str) -> tuple[str, Any]:
    """'key=value' from the command line; the value is read as YAML (numbers, lists, ...).
    A dotted key (`recorder.schedule.every=10`) sets one key of a nested mapping and keeps
    the others (`assign`)."""
    key, sep, value = text_.partition("=")
    if not sep or not key:
        raise ValueError(f"--set {text_!r} must look like KEY=VALUE")
    try:
        parsed = read_yaml(value) if value else None
    except yaml.YAMLError:
        parsed = value
    return key.strip(), parsed


@dataclasses.dataclass
class RunOptions:
    """How to run an experiment config (not what it computes): where results go, the run id,
    resume or not, the profile applied, the data root, the progress bar."""

    out_root: Path = Path("results")
    run_id: str | None = None
    resume: bool = False
    profile: str | None = None
    data_root: str | None = None
    progress: bool = True
    # the `topkscope` arguments that start this run (run CONFIG ...) without --run-id and
    # --resume: the resume command a stopped run names is built from them
    command: list[str] | None = None
