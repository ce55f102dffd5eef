"""CIFAR ResNets (He et al. 2016, section 4.2): depth 6n+2, three stages of n basic blocks.

Stages have 16, 32, 64 channels (times width/16) on 32x32, 16x16, 8x8 maps; a block is
conv3x3-BN-ReLU-conv3x3-BN plus the shortcut, then ReLU. Option-A shortcuts: when the
shape changes, the identity is subsampled by 2 and zero-padded in channels (no parameters).
ResNet-20: 269,722 parameters; ResNet-56: 853,018 (10 classes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ZeroPadShortcut(nn.Module):
    """Option A: x[:, :, ::s, ::s] with (out - in) zero channels split evenly on both sides."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        extra = out_channels - in_channels
        self.pad = (extra // 2, extra - extra // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, *self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        if stride != 1 or in_channels != out_channels:
            self.shortcut: nn.Module = ZeroPadShortcut(in_channels, out_channels, stride)
        else:
            self.shortcut = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    task = "classification"

    def __init__(self, depth: int, num_classes: int = 10, in_channels: int = 3, width: int = 16):
        super().__init__()
        if depth < 8 or (depth - 2) % 6:
            raise ValueError(f"depth = {depth} must be 6n+2 with n >= 1 (20, 32, 44, 56, 110, ...)")
        if width < 2:
            raise ValueError(f"width = {width} must be >= 2")
        n = (depth - 2) // 6
        widths = (width, 2 * width, 4 * width)
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        blocks: list[nn.Module] = []
        channels = width
        for stage, out_channels in enumerate(widths):
            for i in range(n):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(BasicBlock(channels, out_channels, stride))
                channels = out_channels
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(channels, num_classes)
        for module in self.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(module.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.blocks(F.relu(self.bn1(self.conv1(x))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.fc(out)


def resnet20(num_classes: int = 10, in_channels: int = 3, width: int = 16) -> CifarResNet:
    return CifarResNet(20, num_classes, in_channels, width)


def resnet56(num_classes: int = 10, in_channels: int = 3, width: int = 16) -> CifarResNet:
    return CifarResNet(56, num_classes, in_channels, width)
