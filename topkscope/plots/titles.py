"""Figure titles that say what was measured: model, dataset (and any stand-in), workers, density.

    describe_run(manifest)  ->  "ResNet-20 on CIFAR-10 (substituted by MNIST) · 4 workers · topk, ρ = 0.001"

wrap(text, fits) breaks a title's lines where a line would not fit (at ' · ' first, then
' | ', '; ', ', ', and spaces last); plots.style.fit_texts measures "fits" on the figure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

# the display names live in topkscope.names (find_runs reads them back to manifest spellings)
from topkscope.manifest import model_of
from topkscope.names import DATASET_NAMES, MODEL_NAMES

UNNAMED_DATASET = "a dataset its script did not name"
# where a line may break, best first; ';' and ',' stay at the end of the line they close
BREAKS = (" · ", " | ", "; ", ", ", " ")


def model_name(name: str | None, model_args: Mapping[str, Any] | None = None) -> str:
    """Display name of a model, with any non-default constructor arguments (e.g. a narrow width)."""
    label = MODEL_NAMES.get(str(name), str(name))
    if model_args:
        label += " (" + ", ".join(f"{k}={v}" for k, v in sorted(model_args.items())) + ")"
    return label


def dataset_name(name: str | None, substitute: str | None = None,
                 subset: int | None = None) -> str:
    """'CIFAR-10', 'CIFAR-10 (substituted by MNIST)' when another dataset stood in, and the
    size of the training subset when only the first `subset` samples (tokens for PTB) were used;
    "a dataset its script did not name" for none (a user's run whose script gave no
    run_fields dataset: nothing the recorder sees names it)."""
    if name is None or (isinstance(name, float) and name != name):  # a user's run names none
        label = UNNAMED_DATASET
    else:
        label = DATASET_NAMES.get(str(name), str(name))
    notes = []
    if substitute:
        notes.append(f"substituted by {DATASET_NAMES.get(substitute, substitute)}")
    if subset:
        notes.append(f"first {int(subset):,} {'tokens' if name == 'ptb' else 'samples'}")
    return label + (f" ({', '.join(notes)})" if notes else "")


def sparsifier_name(name: str | None) -> str:
    """Display name of a sparsifier (its class's `label`, topkscope.sparsify.label_of);
    column prefixes such as 'gaussiank_2019' are accepted too."""
    from topkscope.sparsify import label_of

    return label_of(name)


def training_label(manifest: Mapping[str, Any]) -> str:
    """How a run trained, for a legend: 'TopK-SGD per step (Top-k, ρ = 0.0002)', or an
    outer-loop run's 'Chunk-wise Top-k, 2-bit, average(H=15, lr=1, beta=0.95)' (dense: 'Dense,
    nesterov(...)', DiLoCo)."""
    from topkscope.condition import describe, run_condition

    config = manifest.get("config") or {}
    outer = manifest.get("outer") or config.get("outer")
    name = sparsifier_name(manifest.get("sparsifier") or config.get("sparsifier"))
    density = manifest.get("density", config.get("density"))
    if not outer:
        return f"per step ({name}, {format_density(density)})"
    feedback = "" if config.get("error_feedback", True) else ", no error feedback"
    cond = run_condition({**manifest, "density": None})
    return f"{name}{feedback}, {describe(cond)}"


def format_density(rho: float | None) -> str:
    """ρ = 0.001 (compact, no trailing zeros)."""
    if rho is None:
        return "ρ = ?"
    return f"ρ = {float(rho):.6g}"


def recorder_panel_title(rho: float, k: int, manifest: Mapping[str, Any] | None,
                         trained: Any = None) -> str:
    """The title of a panel of the recorder's density rho, told apart from training's:
    'ρ = 0.01 (k = 1,992), as trained' when training used rho (`trained`: the densities of
    train.parquet; default the manifest's density), else 'ρ = 0.001 (k = 199), recorder only
    (training: ρ = 0.01)'. Without a manifest (or a density in it): 'ρ = 0.001 (k = 199)'."""
    head = f"{format_density(rho)} (k = {int(k):,})"
    target = (manifest or {}).get("density")
    densities = {float(target)} if isinstance(target, (int, float)) else set()
    if trained is not None:
        densities |= {float(v) for v in trained if v == v}
    if not densities:
        return head
    if any(abs(float(rho) - v) <= 1e-12 * max(1.0, v) for v in densities):
        return f"{head}, as trained"
    shown = format_density(target if isinstance(target, (int, float)) else min(densities))
    return f"{head}, recorder only (training: {shown})"


def _model_args(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    config = manifest.get("config") or {}
    model = config.get("model")
    if isinstance(model, Mapping):
        return model.get("args") or None
    return config.get("model_args") or None


def _subset(manifest: Mapping[str, Any]) -> int | None:
    return (manifest.get("config") or {}).get("train_subset")


def optimizer_label(manifest: Mapping[str, Any]) -> str | None:
    """The optimizer's name when it is not the paper's momentum SGD ('AdamW'), else None."""
    optimizer = manifest.get("optimizer")
    name = optimizer.get("name") if isinstance(optimizer, Mapping) else None
    if name in (None, "sgd"):
        return None
    return {"adamw": "AdamW", "adam": "Adam"}.get(str(name), str(name))


def describe_run(manifest: Mapping[str, Any], *, with_sparsifier: bool = True) -> str:
    """One line naming model, dataset (+ substitution), workers, sparsifier and density of a
    run, and its optimizer when that is not momentum SGD."""
    model = model_of(dict(manifest)) or "a model its script did not name"
    parts = [
        f"{model_name(model, _model_args(manifest))} on "
        f"{dataset_name(manifest.get('dataset'), manifest.get('dataset_substitute'), _subset(manifest))}",
        f"{manifest.get('world_size', '?')} workers",
    ]
    from topkscope.condition import describe, run_condition

    condition = describe(run_condition(manifest)) or format_density(manifest.get("density"))
    if with_sparsifier:
        parts.append(f"{sparsifier_name(manifest.get('sparsifier'))}, {condition}")
    elif manifest.get("density") is not None:
        parts.append(condition)
    if optimizer_label(manifest):
        parts.append(optimizer_label(manifest))
    profile = manifest.get("profile")
    if profile:
        parts.append(f"{profile} profile")
    return " · ".join(parts)


def wrap(text: str, fits: Callable[[str], bool], breaks: tuple[str, ...] = BREAKS) -> str:
    """text with each line that does not `fits` broken into lines that do, where possible:
    greedily packed parts between the first separator of `breaks` the line contains, a part
    still too long broken at the next separators. A single word that does not fit stays
    whole. ' · ' and ' | ' are dropped at a break; ';' and ',' end their line."""
    return "\n".join(piece for line in text.split("\n") for piece in _wrap_line(line, fits, breaks))


def _wrap_line(line: str, fits: Callable[[str], bool], breaks: tuple[str, ...]) -> list[str]:
    if fits(line) or not breaks:
        return [line]
    sep, finer = breaks[0], breaks[1:]
    parts = line.split(sep)
    if len(parts) == 1:
        return _wrap_line(line, fits, finer)
    end = sep.strip() if sep.strip() in (";", ",") else ""
    lines = [parts[0]]
    for part in parts[1:]:
        joined = lines[-1] + sep + part
        if fits(joined + end):
            lines[-1] = joined
        else:
            lines[-1] += end
            lines.append(part)
    return [piece for one in lines for piece in _wrap_line(one, fits, finer)]


def figure_title(what: str, manifest: Mapping[str, Any] | None, *, with_sparsifier: bool = True,
                 width: int = 80) -> str:
    """'<what>' on the first line, the run description below it, broken (wrap) so that no
    line is longer than `width` characters (when the parts allow). plots.style.fit_texts
    breaks it further where the figure is narrower."""
    if not manifest:
        return what
    description = describe_run(manifest, with_sparsifier=with_sparsifier)
    return what + "\n" + wrap(description, lambda line: len(line) <= width, breaks=(" · ",))
