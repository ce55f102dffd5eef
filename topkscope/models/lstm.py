"""Word-level LSTM language model (Zaremba et al. 2014 style), as used for PTB in the paper.

embedding(V, H) -> dropout -> LSTM(H, H, layers, dropout between layers) -> dropout ->
Linear(H, V). Input and output embeddings are not tied. The paper's configuration: 2 layers
of 1,500, V = 10,000, dropout 0.65 (keep probability 0.35): 66,034,000 parameters
  = V*H (embedding) + layers*4*(2*H*H + 2*H) (LSTM) + H*V + V (decoder).
"""

from __future__ import annotations

import torch
from torch import nn

Hidden = tuple[torch.Tensor, torch.Tensor]


class LSTMLanguageModel(nn.Module):
    task = "language_model"

    def __init__(
        self,
        vocab_size: int = 10_000,
        hidden_size: int = 1500,
        num_layers: int = 2,
        dropout: float = 0.65,
        init_range: float = 0.1,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout = {dropout} outside the allowed range [0, 1)")
        for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size),
                            ("num_layers", num_layers)):
            if value < 1:
                raise ValueError(f"{name} = {value} must be >= 1")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, hidden_size)
        self.rnn = nn.LSTM(hidden_size, hidden_size, num_layers,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        nn.init.uniform_(self.encoder.weight, -init_range, init_range)
        nn.init.uniform_(self.decoder.weight, -init_range, init_range)
        nn.init.zeros_(self.decoder.bias)

    def init_hidden(self, batch_size: int) -> Hidden:
        """Zero (h, c), each (layers, batch_size, hidden), on the model's device and dtype."""
        weight = self.decoder.weight
        shape = (self.num_layers, batch_size, self.hidden_size)
        return weight.new_zeros(shape), weight.new_zeros(shape)

    def forward(self, x: torch.Tensor, hidden: Hidden | None = None) -> tuple[torch.Tensor, Hidden]:
        """x (T, B) int64 -> (logits (T, B, V), (h, c))."""
        if hidden is None:
            hidden = self.init_hidden(x.shape[1])
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


def detach_hidden(hidden: Hidden) -> Hidden:
    """Cut the graph between bptt windows (truncated back-propagation through time)."""
    return hidden[0].detach(), hidden[1].detach()


def lstm_ptb(vocab_size: int = 10_000, hidden_size: int = 1500, num_layers: int = 2,
             dropout: float = 0.65, init_range: float = 0.1) -> LSTMLanguageModel:
    """The paper's PTB model: 2 x 1,500, dropout 0.65 (about 66M parameters)."""
    return LSTMLanguageModel(vocab_size, hidden_size, num_layers, dropout, init_range)


def lstm_ptb_small(vocab_size: int = 10_000, hidden_size: int = 200, num_layers: int = 2,
                   dropout: float = 0.2, init_range: float = 0.1) -> LSTMLanguageModel:
    """A CPU-sized PTB model: 2 x 200, dropout 0.2 (4,653,200 parameters)."""
    return LSTMLanguageModel(vocab_size, hidden_size, num_layers, dropout, init_range)
