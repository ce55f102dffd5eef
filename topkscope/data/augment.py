"""Standard CIFAR augmentation on a batch: random crop of the padded image, random h-flip.

For each image b: pad by p on every side with the value of a black pixel, take the
H x W window at offset (dy_b, dx_b) with dy_b, dx_b uniform in {0..2p}, then mirror it
left-right with probability 1/2. Vectorised: two gathers (rows, then columns) and one
masked fill per batch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
