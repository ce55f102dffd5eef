"""Figure titles that say what was measured: model, dataset (and any stand-in), workers, density.

    describe_run(manifest)  ->  "ResNet-20 on CIFAR-10 (substituted by MNIST) · 4 workers · topk, ρ = 0.001"
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MODEL_NAMES = {
    "fnn3": "FNN-3",
    "resnet20": "ResNet-20",
    "resnet56": "ResNet-56",
    "vgg16": "VGG-16-BN",
    "lstm-ptb": "LSTM-PTB (2x1500)",
    "lstm-ptb-small": "LSTM-PTB (small)",
    "resnet50": "ResNet-50",
    "alexnet": "AlexNet",
    "gpt-ptb": "GPT (6x384)",
    "gpt-mini": "GPT (mini, 2x64)",
}
DATASET_NAMES = {"mnist": "MNIST", "cifar10": "CIFAR-10", "ptb": "PTB", "imagenet": "ImageNet"}
SPARSIFIER_NAMES = {
    "dense": "Dense",
    "dense-wfbp": "Dense + WFBP",
    "dense-fp16": "Dense fp16",
    "gtopk": "gTop-k",
    "topk": "Top-k",
    "randk": "Rand-k",
    "gaussiank": "Gaussian-k",
    "gaussiank-2019": "Gaussian-k (2019)",
    "dgc": "DGC",
    "dgc-sampled": "DGC (sampled threshold only)",
    "redsync": "RedSync",
    "redsync-2019": "RedSync (2019)",
    "sidco": "SIDCo",
    "sidco-fixed": "SIDCo (fixed stages)",
    "threshold": "Threshold",
    "torch.topk": "torch.topk (baseline)",
}


def model_name(name: str | None, model_args: Mapping[str, Any] | None = None) -> str:
    """Display name of a model, with any non-default constructor arguments (e.g. a narrow width)."""
    label = MODEL_NAMES.get(str(name), str(name))
    if model_args:
        label += " (" + ", ".join(f"{k}={v}" for k, v in sorted(model_args.items())) + ")"
    return label


def dataset_name(name: str | None, substitute: str | None = None,
                 subset: int | None = None) -> str:
    """'CIFAR-10', 'CIFAR-10 (substituted by MNIST)' when another dataset stood in, and the
    size of the training subset when only the first `subset` samples (tokens for PTB) were used."""
    label = DATASET_NAMES.get(str(name), str(name))
    notes = []
    if substitute:
        notes.append(f"substituted by {DATASET_NAMES.get(substitute, substitute)}")
    if subset:
        notes.append(f"first {int(subset):,} {'tokens' if name == 'ptb' else 'samples'}")
    return label + (f" ({', '.join(notes)})" if notes else "")


def sparsifier_name(name: str | None) -> str:
    """Display name of a sparsifier; column prefixes such as 'gaussiank_2019' are accepted too."""
    key = str(name)
    return SPARSIFIER_NAMES.get(key, SPARSIFIER_NAMES.get(key.replace("_", "-"), key))


def format_density(rho: float | None) -> str:
    """ρ = 0.001 (compact, no trailing zeros)."""
    if rho is None:
        return "ρ = ?"
    return f"ρ = {float(rho):.6g}"


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
    parts = [
        f"{model_name(manifest.get('model'), _model_args(manifest))} on "
        f"{dataset_name(manifest.get('dataset'), manifest.get('dataset_substitute'), _subset(manifest))}",
        f"{manifest.get('world_size', '?')} workers",
    ]
    if with_sparsifier:
        parts.append(f"{sparsifier_name(manifest.get('sparsifier'))}, "
                     f"{format_density(manifest.get('density'))}")
    elif manifest.get("density") is not None:
        parts.append(format_density(manifest.get("density")))
    if optimizer_label(manifest):
        parts.append(optimizer_label(manifest))
    profile = manifest.get("profile")
    if profile:
        parts.append(f"{profile} profile")
    return " · ".join(parts)


def figure_title(what: str, manifest: Mapping[str, Any] | None, *, with_sparsifier: bool = True,
                 width: int = 80) -> str:
    """'<what>' on the first line, the run description below it, broken at ' · ' so that no
    line is longer than `width` characters (when the parts allow)."""
    if not manifest:
        return what
    lines = [what, ""]
    for part in describe_run(manifest, with_sparsifier=with_sparsifier).split(" · "):
        if lines[-1] and len(lines[-1]) + 3 + len(part) > width:
            lines.append(part)
        else:
            lines[-1] = f"{lines[-1]} · {part}" if lines[-1] else part
    return "\n".join(lines)
