"""FNN-3: the paper's fully connected MNIST network, 784-200-200-10 with ReLU.

Parameters: 784*200 + 200 + 200*200 + 200 + 200*10 + 10 = 199,210.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class FNN(nn.Module):
    """Flatten, then Linear+ReLU for each hidden width, then a Linear classifier."""

    task = "classification"

    def __init__(self, in_features: int, hidden: Sequence[int], num_classes: int) -> None:
        super().__init__()
        widths = [in_features, *hidden]
        layers: list[nn.Module] = [nn.Flatten()]
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU(inplace=True)]
        layers.append(nn.Linear(widths[-1], num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def fnn3(in_features: int = 784, hidden: Sequence[int] = (200, 200), num_classes: int = 10) -> FNN:
    """FNN-3 (two hidden layers of 200)."""
    return FNN(in_features, tuple(hidden), num_classes)
