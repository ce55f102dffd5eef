"""The paper's models, by name: `create(name, **overrides)`, `available()`.

Every model has `task` ("classification" | "language_model") and `name`. Classifiers take
(B, C, H, W) float; language models take (T, B) int64: LSTMs return (logits, hidden) and carry
the hidden state between windows (`init_hidden`), the GPT returns logits and carries nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from torch import nn

from topkscope.models.alexnet import alexnet
from topkscope.models.fnn import fnn3
from topkscope.models.gpt import gpt_mini, gpt_ptb
from topkscope.models.lstm import detach_hidden, lstm_ptb, lstm_ptb_small
from topkscope.models.resnet_cifar import resnet20, resnet56
from topkscope.models.resnet_imagenet import resnet50
from topkscope.models.vgg import vgg16

# name -> factory; fixed at import, never mutated.
_FACTORIES: dict[str, Callable[..., nn.Module]] = {
    "fnn3": fnn3,
    "resnet20": resnet20,
    "resnet56": resnet56,
    "vgg16": vgg16,
    "lstm-ptb": lstm_ptb,
    "lstm-ptb-small": lstm_ptb_small,
    "resnet50": resnet50,
    "alexnet": alexnet,
    "gpt-ptb": gpt_ptb,
    "gpt-mini": gpt_mini,
}
# the dataset each model is trained on in the paper (the scaling claims name it)
DATASET = {
    "fnn3": "mnist", "resnet20": "cifar10", "resnet56": "cifar10", "vgg16": "cifar10",
    "lstm-ptb": "ptb", "lstm-ptb-small": "ptb", "resnet50": "imagenet", "alexnet": "imagenet",
    "gpt-ptb": "ptb", "gpt-mini": "ptb",
}


def available() -> list[str]:
    """Model names accepted by create, sorted."""
    return sorted(_FACTORIES)


def overrides_of(name: str) -> dict[str, object]:
    """The keyword overrides a model accepts, with their defaults."""
    factory = _factory(name)
    return {p.name: p.default for p in inspect.signature(factory).parameters.values()}


def _factory(name: str) -> Callable[..., nn.Module]:
    try:
        return _FACTORIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available())}") from None


def create(name: str, **overrides) -> nn.Module:
    """A freshly initialised model by name; overrides replace its defaults (e.g. num_classes)."""
    factory = _factory(name)
    allowed = overrides_of(name)
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown override(s) {', '.join(unknown)} for model {name!r}; "
            f"allowed: {', '.join(f'{k}={v!r}' for k, v in allowed.items())}"
        )
    model = factory(**overrides)
    model.name = name
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars (what the gradient vector of TopK-SGD holds)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["DATASET", "available", "count_parameters", "create", "detach_hidden", "overrides_of"]
