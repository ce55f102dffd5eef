"""ResNet-50 for ImageNet (He et al. 2016), bottleneck blocks with the stride on the 3x3 conv.

Stem conv7x7/2-BN-ReLU-maxpool3x3/2, stages of (3, 4, 6, 3) bottlenecks
(1x1 reduce, 3x3, 1x1 expand x4) with 64, 128, 256, 512 inner widths, projection
shortcuts (1x1 conv + BN) where the shape changes, global average pool, Linear(2048, classes).
Parameters with 1,000 classes: 25,557,032.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


class ImageNetResNet(nn.Module):
    task = "classification"

    def __init__(self, blocks: tuple[int, ...] = (3, 4, 6, 3), num_classes: int = 1000,
                 in_channels: int = 3) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        layers: list[nn.Module] = []
        channels = 64
        for stage, count in enumerate(blocks):
            width = 64 * 2**stage
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(Bottleneck(channels, width, stride))
                channels = width * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def resnet50(num_classes: int = 1000, in_channels: int = 3) -> ImageNetResNet:
    return ImageNetResNet((3, 4, 6, 3), num_classes, in_channels)
