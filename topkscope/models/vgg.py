"""VGG-16 with batch normalisation for 32x32 inputs (CIFAR-10).

Thirteen conv3x3-BN-ReLU layers with widths 64,64 | 128,128 | 256x3 | 512x3 | 512x3, a 2x2
max-pool after each group (32 -> 1 pixel), then one Linear(512, classes).
Parameters at width_multiplier 1 and 10 classes: 14,728,266.
"""

from __future__ import annotations

import torch
from torch import nn

# Channel widths; "M" is a 2x2 max-pool.
VGG16_LAYOUT: tuple[int | str, ...] = (
    64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M",
)


class VGG(nn.Module):
    task = "classification"

    def __init__(
        self,
        layout: tuple[int | str, ...] = VGG16_LAYOUT,
        num_classes: int = 10,
        in_channels: int = 3,
        width_multiplier: float = 1.0,
    ) -> None:
        super().__init__()
        if not 0 < width_multiplier <= 4:
            raise ValueError(f"width_multiplier = {width_multiplier} outside (0, 4]")
        layers: list[nn.Module] = []
        channels = in_channels
        for item in layout:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
                continue
            out_channels = max(1, round(int(item) * width_multiplier))
            layers += [
                nn.Conv2d(channels, out_channels, 3, padding=1),
                nn.BatchNorm2d(out_channels),
                nn.ReLU(inplace=True),
            ]
            channels = out_channels
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.features(x)
        out = nn.functional.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.classifier(out)


def vgg16(num_classes: int = 10, in_channels: int = 3, width_multiplier: float = 1.0) -> VGG:
    return VGG(VGG16_LAYOUT, num_classes, in_channels, width_multiplier)
