"""AlexNet for ImageNet, single-tower form (Krizhevsky 2014, "one weird trick"; as in torchvision).

Conv 11x11/4 (64) - maxpool - conv 5x5 (192) - maxpool - conv 3x3 (384, 256, 256) - maxpool,
adaptive average pool to 6x6, then dropout-Linear(9216, 4096)-ReLU-dropout-Linear(4096, 4096)
-ReLU-Linear(4096, classes). Parameters with 1,000 classes: 61,100,840. Inputs of at least 63x63.
"""

from __future__ import annotations

import torch
from torch import nn


class AlexNet(nn.Module):
    task = "classification"

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        )
        self.pool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))


def alexnet(num_classes: int = 1000, in_channels: int = 3, dropout: float = 0.5) -> AlexNet:
    return AlexNet(num_classes, in_channels, dropout)
