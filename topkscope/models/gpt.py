"""GPT-style decoder-only language model (Radford et al. 2018, 2019; the GPT-2 / nanoGPT layout).

token embedding + learned position embedding -> dropout -> L pre-LayerNorm blocks
    x <- x + proj(causal multi-head self-attention(LN(x)))
    x <- x + fc2(GELU(fc1(LN(x))))              (hidden width 4C)
-> final LayerNorm -> logits = x @ token_embedding^T   (input and output embeddings tied, no bias)

Parameters (V vocabulary, C width, L layers, T context), counted once for the tied matrix:

    V*C + T*C + L*(12 C^2 + 13 C) + 2C
    per block: LayerNorm 2C, qkv 3C^2 + 3C, attention output C^2 + C, LayerNorm 2C,
               fc1 4C^2 + 4C, fc2 4C^2 + C

Initialisation as GPT-2: weights N(0, 0.02), the two residual projections of each block
N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm (1, 0).

Input (T, B) int64, time first like the LSTM's, and logits (T, B, V). The model is stateless:
each window of T <= context tokens is seen alone (no state carried between windows).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    """Multi-head attention in which position t attends to positions <= t."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.dropout = dropout
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) -> (B, T, C)."""
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, dropout)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


class GPT(nn.Module):
    task = "language_model"

    def __init__(self, vocab_size: int = 10_000, layers: int = 6, heads: int = 6,
                 width: int = 384, context: int = 256, dropout: float = 0.2) -> None:
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("layers", layers), ("heads", heads),
                            ("width", width), ("context", context)):
            if value < 1:
                raise ValueError(f"{name} = {value} must be >= 1")
        if width % heads:
            raise ValueError(f"width = {width} must be a multiple of heads = {heads}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout = {dropout} outside the allowed range [0, 1)")
        self.vocab_size, self.context = vocab_size, context
        self.token = nn.Embedding(vocab_size, width)
        self.position = nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        self.head.weight = self.token.weight  # tied: one V x C matrix, counted once
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:
                residual = name.endswith(("attn.proj.weight", "fc2.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if residual else 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (T, B) int64 -> logits (T, B, V)."""
        t = x.shape[0]
        if t > self.context:
            raise ValueError(f"a window of {t} tokens exceeds the context = {self.context}")
        idx = x.t()  # (B, T)
        h = self.drop(self.token(idx) + self.position(torch.arange(t, device=x.device)))
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h)).transpose(0, 1)


def gpt_ptb(vocab_size: int = 10_000, layers: int = 6, heads: int = 6, width: int = 384,
            context: int = 256, dropout: float = 0.2) -> GPT:
    """nanoGPT's "baby GPT" (6 layers, 6 heads, width 384, context 256, dropout 0.2) on the
    PTB vocabulary: 14,585,856 parameters at V = 10,000."""
    return GPT(vocab_size, layers, heads, width, context, dropout)


def gpt_mini(vocab_size: int = 10_000, layers: int = 2, heads: int = 2, width: int = 64,
             context: int = 64, dropout: float = 0.1) -> GPT:
    """A CPU-sized GPT: 2 layers, 2 heads, width 64, context 64 (744,192 parameters at V = 10,000)."""
    return GPT(vocab_size, layers, heads, width, context, dropout)
