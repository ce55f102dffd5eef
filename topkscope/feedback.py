"""Error-feedback memory for TopK-SGD (one residual per named tensor, per worker).

    u_t = e_{t-1} + g_t          compensate(name, g)
    e_t = u_t - C(u_t)           update(name, u, idx): u with u[idx] set to 0
                                 update(name, u, idx, sent=q): u with u[idx] = u[idx] - q, for
                                 a compressor that sends q in place of u[idx] (quantization)

One instance per worker; nothing lives at class level (the 2019 reference code kept
residuals on class attributes, which leaked state between workers and runs).
"""

from __future__ import annotations

import torch


class ErrorFeedback:
    """Residuals keyed by name. `s + e == u` holds bit-exactly: each position is in one of them."""

    def __init__(self) -> None:
        self._residuals: dict[str, torch.Tensor] = {}

    def compensate(self, name: str, g: torch.Tensor) -> torch.Tensor:
        """u = g + e (e starts at zero). Returns a new tensor; g is not modified."""
        e = self._residuals.get(name)
        if e is None:
            return g.clone()
        if e.shape != g.shape:
            raise ValueError(
                f"residual {name!r} has shape {tuple(e.shape)} "
                f"but the gradient has {tuple(g.shape)}"
            )
        return g + e

    def update(
        self, name: str, u: torch.Tensor, idx: torch.Tensor, inplace: bool = False,
        sent: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Keep e = u with u[idx] = 0 and return it. inplace=True reuses u's storage.

        idx: 1-D integer indices into u (the selection that was sent). sent: the values sent
        at idx when they are not u[idx] (quantized): e[idx] = u[idx] - sent, so sent + e
        equals u up to the rounding of that one subtraction.
        """
        if idx.dim() != 1 or idx.is_floating_point() or idx.dtype == torch.bool:
            raise ValueError(
                f"idx must be 1-D integer indices, "
                f"got dtype {idx.dtype} and shape {tuple(idx.shape)}"
            )
        if u.dim() != 1:
            raise ValueError(f"u must be 1-D, got shape {tuple(u.shape)} (flatten it first)")
        if idx.numel() and not (0 <= int(idx.min()) and int(idx.max()) < u.numel()):
            raise ValueError(
                f"idx holds values in [{int(idx.min())}, {int(idx.max())}] but must lie in "
                f"[0, {u.numel() - 1}] for u of {u.numel()} elements"
            )
        if sent is not None and sent.shape != idx.shape:
            raise ValueError(f"sent has shape {tuple(sent.shape)}; it must hold one value per "
                             f"index ({idx.numel()})")
        e = u if inplace else u.clone()
        if sent is None:
            e[idx] = 0
        else:
            e[idx] = e[idx] - sent.to(e.dtype)
        self._residuals[name] = e
        return e

    def residual(self, name: str) -> torch.Tensor | None:
        """The current residual e for name (None before the first update)."""
        return self._residuals.get(name)

    def names(self) -> list[str]:
        """Names with a residual, in first-update order."""
        return list(self._residuals)

    def reset(self) -> None:
        """Forget every residual (e = 0 again)."""
        self._residuals.clear()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Residuals as a plain dict of CPU tensors (for torch.save with weights_only=True)."""
        return {name: e.detach().cpu().clone() for name, e in self._residuals.items()}

    def load_state_dict(
        self, state: dict[str, torch.Tensor], device: torch.device | str | None = None
    ) -> None:
        """Replace the residuals by copies of `state` (moved to `device` if given).

        Always a copy, even when a tensor already lies on `device` (where `Tensor.to` would
        return the tensor itself): training adds into the residuals in place, and must not
        write into the caller's dict.
        """
        if not isinstance(state, dict) or not all(
            isinstance(v, torch.Tensor) for v in state.values()
        ):
            raise ValueError("error-feedback state must be a dict of name -> tensor")
        self._residuals = {
            name: e.detach().to(device, copy=True) if device is not None else e.detach().clone()
            for name, e in state.items()
        }
