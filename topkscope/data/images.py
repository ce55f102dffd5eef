"""Image datasets in memory: normalised batches, CIFAR augmentation, the declared MNIST stand-in.

An in-memory labelled image dataset with cheap, normalised mini-batches.

Images are kept as uint8 (N, C, H, W); the first `batch` call (or `to(device)`) builds
one normalised float32 copy  x = (pixel / 255 - mean_c) / std_c  so that a batch is a
single index into it. A substitute dataset (e.g. MNIST standing in for CIFAR-10) keeps
its real channels and repeats them at batch time.

Standard CIFAR augmentation on a batch: random crop of the padded image, random h-flip.

For each image b: pad by p on every side with the value of a black pixel, take the
H x W window at offset (dy_b, dx_b) with dy_b, dx_b uniform in {0..2p}, then mirror it
left-right with probability 1/2. Vectorised: two gathers (rows, then columns) and one
masked fill per batch.

A declared stand-in: MNIST shaped like CIFAR-10 for runs that allow substitution.

Each 28x28 digit is zero-padded by 2 pixels to 32x32 and its one channel repeated three
times, so CIFAR-10 models run unchanged. The dataset keeps name "cifar10" (its role) and
`.substitute = "mnist"` (what it really is), which runs write into their manifest.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

_INDEX_DTYPES = (torch.int64, torch.int32)


class ImageDataset:
    """Labelled images: `.images` uint8 (N,C,H,W), `.labels` int64 (N,), `.batch(idx)`."""

    def __init__(
        self,
        name: str,
        split: str,
        images: torch.Tensor,
        labels: torch.Tensor,
        mean: Sequence[float],
        std: Sequence[float],
        num_classes: int,
        substitute: str | None = None,
        repeat_channels: int = 1,
    ) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(
                f"images must be uint8 (N,C,H,W), got {images.dtype} {tuple(images.shape)}"
            )
        if labels.shape != (images.shape[0],):
            raise ValueError(f"labels shape {tuple(labels.shape)} != ({images.shape[0]},)")
        if len(mean) != images.shape[1] or len(std) != images.shape[1]:
            raise ValueError(f"need one mean/std per stored channel ({images.shape[1]})")
        self.name = name
        self.split = split
        self.substitute = substitute
        self.num_classes = num_classes
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self._stored = images  # (N, C0, H, W); C = C0 * repeat_channels
        self._repeat = repeat_channels
        self.labels = labels.to(torch.int64)
        self._normalised: torch.Tensor | None = None
        self._labels_on_device = self.labels

    @property
    def images(self) -> torch.Tensor:
        """uint8 (N, C, H, W); a single repeated channel is a stride-0 view, not a copy."""
        if self._repeat == 1:
            return self._stored
        n, c0, h, w = self._stored.shape
        if c0 == 1:
            return self._stored.expand(n, self._repeat, h, w)
        return self._stored.repeat(1, self._repeat, 1, 1)

    @property
    def input_shape(self) -> tuple[int, int, int]:
        _, c0, h, w = self._stored.shape
        return (c0 * self._repeat, h, w)

    @property
    def device(self) -> torch.device:
        return self._labels_on_device.device

    def __len__(self) -> int:
        return self._stored.shape[0]

    def __repr__(self) -> str:
        sub = f", substitute={self.substitute!r}" if self.substitute else ""
        shape = self.input_shape
        return f"ImageDataset({self.name!r}, {self.split!r}, n={len(self)}, shape={shape}{sub})"

    def stats_tensors(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (1, len(self.mean), 1, 1)
        mean = torch.tensor(self.mean, dtype=torch.float32, device=device).view(shape)
        std = torch.tensor(self.std, dtype=torch.float32, device=device).view(shape)
        return mean, std

    def normalised(self) -> torch.Tensor:
        """The whole split as float32 (N, C0, H, W), normalised; built once, then cached."""
        if self._normalised is None:
            device = self._labels_on_device.device
            mean, std = self.stats_tensors(device)
            x = self._stored.to(device).to(torch.float32).div_(255.0)
            self._normalised = x.sub_(mean).div_(std)
        return self._normalised

    def to(self, device: str | torch.device) -> ImageDataset:
        """Keep the normalised copy and labels on device (so batches are built there)."""
        device = torch.device(device)
        if self._normalised is not None and self._normalised.device != device:
            self._normalised = self._normalised.to(device)
        self._labels_on_device = self.labels.to(device)
        return self

    def batch(
        self,
        idx: torch.Tensor,
        augment: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(x float32 (B,C,H,W) normalised, y int64 (B,)) for the examples idx.

        augment=True applies the standard CIFAR augmentation (random 32x32 crop of the
        4-pixel zero-padded image, horizontal flip with probability 1/2) drawn from generator.
        """
        if not isinstance(idx, torch.Tensor) or idx.dim() != 1 or idx.dtype not in _INDEX_DTYPES:
            raise ValueError("idx must be a 1-D int64 tensor of example indices")
        n = len(self)
        on_cpu = idx.device.type == "cpu"  # a range check on a GPU index would force a sync
        if on_cpu and idx.numel():
            low, high = int(idx.min()), int(idx.max())
            if low < 0 or high >= n:
                raise ValueError(f"idx out of range: min {low}, max {high}; allowed [0, {n - 1}]")
        data = self.normalised()
        idx = idx.to(data.device)
        x = data.index_select(0, idx)
        if augment:
            mean, std = self.stats_tensors(x.device)
            x = random_crop_flip(x, pad_value=-mean / std, padding=4, generator=generator)
        if self._repeat > 1:
            x = x.repeat(1, self._repeat, 1, 1)
        return x, self._labels_on_device.index_select(0, idx)


def random_crop_flip(
    x: torch.Tensor,
    pad_value: torch.Tensor | float = 0.0,
    padding: int = 4,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Augmented copy of x (B, C, H, W); pad_value is a scalar or a (1, C, 1, 1) tensor."""
    if x.dim() != 4:
        raise ValueError(f"x must be (B, C, H, W), got shape {tuple(x.shape)}")
    if padding < 0:
        raise ValueError(f"padding = {padding} must be >= 0")
    b, c, h, w = x.shape
    # Random draws on the CPU generator, so results do not depend on the device.
    offsets = torch.randint(0, 2 * padding + 1, (2, b), generator=generator)
    flips = torch.rand(b, generator=generator) < 0.5
    padded = F.pad(x, (padding,) * 4, value=0.0)
    dev = x.device
    rows = offsets[0].to(dev)[:, None] + torch.arange(h, device=dev)  # (B, H)
    cols = offsets[1].to(dev)[:, None] + torch.arange(w, device=dev)  # (B, W)
    cols = torch.where(flips.to(dev)[:, None], cols.flip(1), cols)
    out = padded.gather(2, rows[:, None, :, None].expand(b, c, h, w + 2 * padding))
    out = out.gather(3, cols[:, None, None, :].expand(b, c, h, w))
    if isinstance(pad_value, (int, float)) and pad_value == 0:
        return out
    # Pixels that came from the border take the pad value (exactly, per channel).
    outside_rows = (rows < padding) | (rows >= padding + h)
    outside_cols = (cols < padding) | (cols >= padding + w)
    border = outside_rows[:, None, :, None] | outside_cols[:, None, None, :]
    pad_value = torch.as_tensor(pad_value, dtype=x.dtype, device=dev)
    return torch.where(border, pad_value, out)


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
