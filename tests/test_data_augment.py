"""Random crop + flip: the vectorised batch version against a per-image loop."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from topkscope.data.images import random_crop_flip


def reference(x, pad_value, padding, seed):
    generator = torch.Generator().manual_seed(seed)
    b, c, h, w = x.shape
    offsets = torch.randint(0, 2 * padding + 1, (2, b), generator=generator)
    flips = torch.rand(b, generator=generator) < 0.5
    out = torch.empty_like(x)
    for i in range(b):
        canvas = torch.empty(c, h + 2 * padding, w + 2 * padding, dtype=x.dtype)
        canvas[:] = pad_value.view(c, 1, 1)
        canvas[:, padding : padding + h, padding : padding + w] = x[i]
        dy, dx = int(offsets[0, i]), int(offsets[1, i])
        crop = canvas[:, dy : dy + h, dx : dx + w]
        out[i] = crop.flip(-1) if flips[i] else crop
    return out


@pytest.mark.parametrize("padding", [0, 1, 4])
def test_matches_per_image_loop(padding):
    x = torch.randn(16, 3, 8, 10, dtype=torch.float64)
    pad_value = torch.tensor([-1.5, 0.25, 2.0], dtype=torch.float64)
    got = random_crop_flip(x, pad_value.view(1, 3, 1, 1), padding, torch.Generator().manual_seed(7))
    torch.testing.assert_close(got, reference(x, pad_value, padding, 7), rtol=0, atol=0)


def test_zero_padding_and_content_preserved():
    x = torch.rand(64, 1, 6, 6) + 1.0  # strictly positive, so padding shows up as zeros
    out = random_crop_flip(x, 0.0, 2, torch.Generator().manual_seed(1))
    assert out.shape == x.shape
    assert (out == 0).any()  # some crops include the border
    # every crop holds only original values or the pad value
    assert torch.isin(out, torch.cat([x.flatten(), torch.zeros(1)])).all()
    assert not torch.equal(out, F.pad(x, (0, 0)))


def test_rejects_bad_shape():
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        random_crop_flip(torch.zeros(3, 4, 4))
