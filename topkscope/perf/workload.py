"""One worker's training step of each paper model: its per-worker batch, a synthetic step, and
the step's floating-point operations (forward and backward counted apart).

    model_size(name)           trainable parameters d of a topkscope model
    WORKLOADS[name]            (per-worker batch, input shape per sample or "tokens", source)
    synthetic_step(name, model, batch)   a closure: forward, cross-entropy, backward
    flop_counts(name, batch)   Flops(forward, backward) of one step, counted on the meta device
    backward_fraction(name)    backward / (forward + backward): the share of a step's compute
                               that wait-free back-propagation can overlap with communication

The batch sizes are the paper's per-worker setting (the authors' published configuration where
the paper's table is not in this repository). FLOPs are counted by torch's FlopCounterMode
(matrix products and convolutions, 2 per multiply-add) while the model runs on the "meta"
device: shapes only, no arithmetic, so even ResNet-50 is counted in a fraction of a second.
Element-wise work (activations, normalisation, the optimizer) is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

BPTT = 35  # tokens per sequence of the LSTM language model (experiments/lstm-ptb.yaml)
# model: (per-worker batch, input shape per sample or "tokens", where the batch comes from)
WORKLOADS: dict[str, tuple[int, tuple[int, ...] | str, str]] = {
    "fnn3": (128, (784,), "paper setting (experiments/fnn3-mnist.yaml)"),
    "resnet20": (32, (3, 32, 32), "paper setting (experiments/resnet20-cifar10.yaml)"),
    "vgg16": (128, (3, 32, 32), "paper setting (experiments/vgg16-cifar10.yaml)"),
    "resnet50": (32, (3, 224, 224), "authors' code, exp_configs/resnet50.conf"),
    "lstm-ptb": (20, "tokens", "paper setting (experiments/lstm-ptb.yaml), bptt 35"),
    "alexnet": (128, (3, 224, 224), "authors' code, exp_configs/alexnet.conf"),
}
# Kaplan et al., "Scaling Laws for Neural Language Models" (arXiv 2001.08361), section 2.1: a
# forward pass costs about 2N FLOPs per token and training about 6N, so the backward pass is
# two thirds of a step. Used for a model known only by its parameter count.
DEFAULT_BACKWARD_FRACTION = 2.0 / 3.0
DEFAULT_BACKWARD_SOURCE = "2/3 (Kaplan et al. arXiv 2001.08361: backward = 2 x forward FLOPs)"


@cache
def model_size(name: str) -> int:
    """Trainable parameters d of a topkscope model (built once, on the meta device)."""
    import torch

    from topkscope import models

    with torch.device("meta"):
        return models.count_parameters(models.create(name))


def _workload(name: str) -> tuple[int, tuple[int, ...] | str, str]:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"no workload for model {name!r}; known: {', '.join(WORKLOADS)}") \
            from None


def _classes(name: str) -> int:
    return 10 if name in ("fnn3", "resnet20", "vgg16") else 1000


def synthetic_inputs(name: str, model, batch: int, device: str = "cpu", generator=None):
    """(x, y) of one batch of synthetic data of the dataset's shape on `device`."""
    import torch

    shape = _workload(name)[1]
    if shape == "tokens":
        vocab = model.vocab_size
        return (torch.randint(vocab, (BPTT, batch), generator=generator, device=device),
                torch.randint(vocab, (BPTT, batch), generator=generator, device=device))
    return (torch.randn((batch, *shape), generator=generator, device=device),
            torch.randint(_classes(name), (batch,), generator=generator, device=device))


def loss_of(name: str, model, x, y):
    """The training loss of one batch: cross-entropy of the model's output (its logits)."""
    import torch.nn.functional as F

    if _workload(name)[1] == "tokens":
        logits, _ = model(x)
        return F.cross_entropy(logits.reshape(-1, model.vocab_size), y.reshape(-1))
    return F.cross_entropy(model(x), y)


def synthetic_step(name: str, model, batch: int):
    """A closure running one forward + backward at this batch on fixed synthetic data (CPU)."""
    import torch

    x, y = synthetic_inputs(name, model, batch, generator=torch.Generator().manual_seed(0))

    def step() -> None:
        loss_of(name, model, x, y).backward()

    return step


@dataclass(frozen=True)
class Flops:
    """Floating-point operations of one training step (forward, backward)."""

    forward: float
    backward: float

    @property
    def total(self) -> float:
        return self.forward + self.backward

    @property
    def backward_fraction(self) -> float:
        return self.backward / self.total if self.total > 0 else 0.0


@cache
def flop_counts(name: str, batch: int | None = None) -> Flops:
    """Forward and backward FLOPs of one step of `name` at `batch` (default: its paper batch),
    counted by torch.utils.flop_counter on the meta device (no arithmetic is done)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from topkscope import models

    batch = _workload(name)[0] if batch is None else int(batch)
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    with torch.device("meta"):
        model = models.create(name)
    model.train()
    x, y = synthetic_inputs(name, model, batch, device="meta")
    with FlopCounterMode(display=False) as forward:
        loss = loss_of(name, model, x, y)
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    return Flops(float(forward.get_total_flops()), float(backward.get_total_flops()))


def backward_fraction(name: str | None) -> tuple[float, str]:
    """(backward share of a step's FLOPs, where it comes from) of a paper model; the cited
    default for a model without a workload (e.g. one given only by its parameter count)."""
    if name not in WORKLOADS:
        return DEFAULT_BACKWARD_FRACTION, DEFAULT_BACKWARD_SOURCE
    flops = flop_counts(name)
    return flops.backward_fraction, (f"{flops.backward_fraction:.3f} (FLOPs counted by "
                                     "topkscope.perf.workload: backward / forward + backward)")
