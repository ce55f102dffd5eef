"""The worker side of TopK-SGD (Shi et al., arXiv 1911.08772, Alg. 1), for one worker:

    u = beta e + g             error-compensated gradient (g may already include lr);
                               beta = error_decay, 1 for plain error feedback (SparseLoCo's
                               accumulator on pseudo-gradients decays it, beta < 1)
    I = C(u, k)                k = max(1, round(rho * d)) (k_rule="floor": the authors'
                               max(int(rho * d), 1)): global over the whole d-vector,
                               or per parameter tensor (layer-wise, k_i from d_i)
    q = Q(u[I])                b-bit quantization per parameter tensor (sparsify.quantize),
                               when a quantizer is given; else q = u[I]
    e = u with u[I] = u[I] - q residual kept for the next step (error feedback); 0 at I
                               without quantization
    send (q, I)

Without error feedback the residual is dropped (e = 0). An empty I (a rule that selects
nothing) sends nothing and keeps all of u in e. `wire_format()` says how the message is
encoded for counting its bytes (comm.sparse.WireFormat).

`held`: parameter tensors whose values must not be sent this step, because what is sent for
them would be dropped (DistributedDataParallel leaves a parameter that no rank used this step
untouched: what the exchange hands it is thrown away). Their part of u is not selected from
and stays in e whole, so the sent values and the residual still add up to u for everything
the step applies; k is then taken from the d of the tensors that are not held (global), or
those tensors are skipped (layer-wise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from topkscope import validate
from topkscope.comm.layout import Layout
from topkscope.comm.sparse import SparseUpdate, WireFormat, index_dtype
from topkscope.feedback import ErrorFeedback
from topkscope.sparsify import Sparsifier, k_from_density
from topkscope.sparsify.quantize import Quantizer

RESIDUAL_KEY = "__global__"  # one flat residual per worker, in layout order


def contraction_of(u: torch.Tensor, sent: torch.Tensor) -> float:
    """||u - C(u)||^2 / ||u||^2 for an operator that sends u's own values at some indices
    (C(u) = u on them, 0 elsewhere): 1 - ||sent||^2 / ||u||^2, both sums in float64; NaN
    when u = 0."""
    total = float(torch.linalg.vector_norm(u, dtype=torch.float64)) ** 2
    if total == 0.0:
        return math.nan
    kept = float(torch.linalg.vector_norm(sent, dtype=torch.float64)) ** 2
    return max(0.0, 1.0 - kept / total)


@dataclass
class Compressed:
    update: SparseUpdate
    u: torch.Tensor | None   # kept only when asked (for the Recorder)
    e: torch.Tensor | None
    # the step's contraction ||u - C(u)||^2 / ||u||^2 (float64 sums; NaN when u = 0): the
    # delta_C of the method's own training that the convergence bounds are written in; with
    # a quantizer C(u) holds the quantized values, so the quantization error is in it
    contraction: float = math.nan
    # the same for the selection alone (u's own values at I): equal without a quantizer
    contraction_selection: float = math.nan


class WorkerCompressor:
    """One per worker: its error-feedback memory and the sparsifier it selects with."""

    def __init__(self, sparsifier: Sparsifier, layout: Layout, selection: str = "global",
                 error_feedback: bool = True, k_rule: str = "round", error_decay: float = 1.0,
                 quantizer: Quantizer | None = None) -> None:
        if selection not in ("global", "layerwise"):
            raise ValueError(f"selection = {selection!r} is not allowed; choose global or layerwise")
        k_from_density(1.0, 1, k_rule)  # ValueError naming the allowed rules
        self.k_rule = k_rule
        self.sparsifier = sparsifier
        self.layout = layout
        self.selection = selection
        self.error_feedback = error_feedback
        self.error_decay = float(validate.number("error_decay", error_decay, 0, 1))
        self.quantizer = quantizer
        self.feedback = ErrorFeedback()
        self._active_cache: dict = {}  # (held, device) -> flat indices not held

    @property
    def is_dense(self) -> bool:
        return self.sparsifier.sends_everything

    def target_k(self, density: float, held: tuple[int, ...] = ()) -> int:
        """Total target count over the model at this density (held: tensors not sent)."""
        numels = [n for i, n in enumerate(self.layout.numels) if i not in held]
        if not numels:
            return 0
        if self.selection == "global":
            return k_from_density(density, sum(numels), self.k_rule)
        return sum(k_from_density(density, n, self.k_rule) for n in numels)

    def _active(self, held: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """The flat indices of the tensors not held, in layout order (kept per held set)."""
        key = (held, device)
        if key not in self._active_cache:
            spans = [torch.arange(off, off + n, device=device) for i, (off, n) in
                     enumerate(zip(self.layout.offsets, self.layout.numels)) if i not in held]
            self._active_cache = {key: torch.cat(spans) if spans else
                                  torch.empty(0, dtype=torch.int64, device=device)}
        return self._active_cache[key]

    def _select(self, u: torch.Tensor, density: float, held: tuple[int, ...] = ()
                ) -> torch.Tensor:
        if self.selection == "global":
            if not held:
                return self.sparsifier.select(u, k_from_density(density, u.numel(),
                                                                self.k_rule))
            active = self._active(held, u.device)
            if active.numel() == 0:
                return active
            sub = u[active]
            return active[self.sparsifier.select(sub, k_from_density(density, sub.numel(),
                                                                     self.k_rule))]
        parts = [torch.empty(0, dtype=torch.int64, device=u.device)]
        for i, (off, n) in enumerate(zip(self.layout.offsets, self.layout.numels)):
            if i in held:
                continue
            idx = self.sparsifier.select(u[off : off + n], k_from_density(density, n, self.k_rule))
            parts.append(idx + off)
        return torch.cat(parts)

    def wire_format(self, element_bits: int = 32) -> WireFormat:
        """How this worker's message is encoded: b bits per value with a quantizer (else
        element_bits), chunk-local index bits for a chunk-wise sparsifier (else the int32 or
        int64 of comm.sparse.index_dtype), a quantizer's table per parameter tensor."""
        local_bits = getattr(self.sparsifier, "local_index_bits", None)
        widest = self.layout.d if self.selection == "global" else max(self.layout.numels)
        index_bits = local_bits(widest) if local_bits is not None else \
            8 * index_dtype(self.layout.d).itemsize
        if self.quantizer is None:
            return WireFormat(element_bits, index_bits)
        return WireFormat(self.quantizer.bits, index_bits,
                          self.quantizer.table_bytes(len(self.layout.numels)))

    def compress(self, g: torch.Tensor, density: float, keep: bool = False,
                 held: tuple[int, ...] = ()) -> Compressed:
        """Select from u = beta e + g and keep the residual. keep=True also returns u and e.
        held: layout positions of tensors not sent this step (their u stays in e)."""
        if g.dim() != 1 or g.numel() != self.layout.d:
            raise ValueError(f"gradient must be a flat vector of d = {self.layout.d}, "
                             f"got shape {tuple(g.shape)}")
        residual = self.feedback.residual(RESIDUAL_KEY) if self.error_feedback else None
        if residual is not None:
            if self.error_decay != 1.0:
                residual.mul_(self.error_decay)
            u = residual.add_(g)  # e + g in the residual's own storage: no d-sized allocation
        else:
            u = g.clone() if self.error_feedback else g  # g itself is never written to
        idx = self._select(u, density, held)
        values = u[idx]
        selection = contraction_of(u, values)
        if self.quantizer is None:
            update = SparseUpdate(values, idx.to(index_dtype(u.numel())))
            u_kept = u.clone() if keep else None
            if self.error_feedback:
                e = self.feedback.update(RESIDUAL_KEY, u, idx, inplace=True)
            else:
                e = torch.zeros_like(u) if keep else None
            return Compressed(update, u_kept, e if keep else None, selection, selection)
        sent = self.quantizer.quantize(values, self.layout.tensor_of(idx),
                                       len(self.layout.numels)).values
        update = SparseUpdate(sent, idx.to(index_dtype(u.numel())))
        total = float(torch.linalg.vector_norm(u, dtype=torch.float64)) ** 2
        u_kept = u.clone() if keep else None
        if self.error_feedback:
            e = self.feedback.update(RESIDUAL_KEY, u, idx, inplace=True, sent=sent)
        else:  # the error is measured, then dropped
            e = u.clone()
            e[idx] = values - sent
        left = float(torch.linalg.vector_norm(e, dtype=torch.float64)) ** 2
        contraction = left / total if total > 0 else math.nan
        return Compressed(update, u_kept, e if keep else None, contraction, selection)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.feedback.state_dict()

    def load_state_dict(self, state: dict[str, torch.Tensor], device: torch.device | str) -> None:
        res = state.get(RESIDUAL_KEY)
        if res is not None and res.numel() != self.layout.d:
            raise ValueError(f"error-feedback residual has {res.numel()} elements, "
                             f"the model has d = {self.layout.d}")
        self.feedback.load_state_dict(state, device=device)
