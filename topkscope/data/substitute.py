"""A declared stand-in: MNIST shaped like CIFAR-10 for runs that allow substitution.

Each 28x28 digit is zero-padded by 2 pixels to 32x32 and its one channel repeated three
times, so CIFAR-10 models run unchanged. The dataset keeps name "cifar10" (its role) and
`.substitute = "mnist"` (what it really is), which runs write into their manifest.
"""

from __future__ import annotations

import torch.nn.functional as F

from topkscope.data.image_dataset import ImageDataset


def mnist_as_cifar10(mnist: ImageDataset) -> ImageDataset:
    """MNIST (N,1,28,28) -> a 'cifar10' dataset of input shape (3,32,32), substitute='mnist'."""
    padded = F.pad(mnist.images, (2, 2, 2, 2), value=0)  # black border, uint8
    return ImageDataset(
        "cifar10",
        mnist.split,
        padded,
        mnist.labels,
        mnist.mean,
        mnist.std,
        mnist.num_classes,
        substitute="mnist",
        repeat_channels=3,
    )
