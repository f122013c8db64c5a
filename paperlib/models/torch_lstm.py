"""The reference baseline: an ``nn.LSTM`` language model as in pytorch/examples' word_language_model.

Not a model of the seeds. It is the well-known yardstick our budgets are measured against
(``benchmarks/lm_wallclock.py``): embedding, a stack of ``torch.nn.LSTM`` layers (cuDNN on a GPU),
and a softmax, with ordinary dropout drawn afresh at every time step on the embeddings, between the
layers and before the softmax (Zaremba et al. 2014), not the per-sequence masks of eq. (4.1).
Initialisation as in that example: embedding and softmax weights uniform in ±0.1, softmax bias 0,
``nn.LSTM``'s own initialisation for the recurrence.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

LSTMState = tuple[Tensor, Tensor]  # (h, c), each [num_layers, B, H]


class TorchLSTMLM(nn.Module):
    """``forward(tokens [B, T], state=None) -> (logits [B, T, V], (h, c))`` over ``torch.nn.LSTM``."""

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int, embedding_size: int | None = None,
                 dropout: float = 0.0, tie_embeddings: bool = False):
        super().__init__()
        embedding_size = embedding_size or hidden_size
        if tie_embeddings and embedding_size != hidden_size:
            raise ValueError(f"tied embeddings need embedding_size == hidden_size, got {embedding_size} and "
                             f"{hidden_size}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.vocab_size, self.hidden_size, self.num_layers = vocab_size, hidden_size, num_layers
        self.drop = nn.Dropout(dropout)
        self.embedding = nn.Embedding(vocab_size, embedding_size)
        self.rnn = nn.LSTM(embedding_size, hidden_size, num_layers, batch_first=True,
                           dropout=dropout if num_layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if tie_embeddings:
            self.decoder.weight = self.embedding.weight  # Press & Wolf 2016, Inan et al. 2017
        else:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def init_state(self, batch_size: int) -> LSTMState:
        zeros = self.decoder.weight.new_zeros(self.num_layers, batch_size, self.hidden_size)
        return zeros, zeros.clone()

    def forward(self, tokens: Tensor, state: LSTMState | None = None) -> tuple[Tensor, LSTMState]:
        if state is None:
            state = self.init_state(tokens.size(0))
        embedded = self.drop(self.embedding(tokens))  # [B, T, E]
        output, state = self.rnn(embedded, state)  # [B, T, H]
        return self.decoder(self.drop(output)), state  # [B, T, V]


__all__ = ["LSTMState", "TorchLSTMLM"]
