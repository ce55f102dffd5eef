"""Display names of models, datasets and sparsifiers (what figures, tables and the README
print), and the way back from a display name to the spelling manifests hold.

    MODEL_NAMES["fnn3"] == "FNN-3";  spelling("model", "FNN-3") == "fnn3"
    spelling("sparsifier", "top-k") == "topk"   (case and spaces do not matter)

A name that is not a display name is returned as given (a manifest's own spelling, or a
model of a user's own script).
"""

from __future__ import annotations

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
    "chunk-topk": "Chunk-wise Top-k",
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

_DISPLAY = {"model": MODEL_NAMES, "dataset": DATASET_NAMES, "sparsifier": SPARSIFIER_NAMES}


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def spelling(field: str, value: Any) -> Any:
    """The manifest spelling of `value` for `field` (model, dataset, sparsifier) when it is
    a display name or a manifest spelling in another case; otherwise value as given."""
    names = _DISPLAY.get(field)
    if not names or not isinstance(value, str):
        return value
    if value in names:
        return value
    folded = _folded(value)
    for key, shown in names.items():
        if folded in (_folded(key), _folded(shown)):
            return key
    return value
