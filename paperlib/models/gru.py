"""GRU layer (the word-generation baseline of Schmidt & Hofmann), a thin wrapper of ``torch.nn.GRU``.

Variational state dropout is not supported: in a GRU h_prev is both the
recurrent input and the carried state, and the seeds do not say where a mask
would go, so :func:`paperlib.models.build_lm` rejects ``state_dropout`` for it.
"""

from __future__ import annotations

from torch import Tensor, nn


class GRULayer(nn.Module):
    """One GRU layer over a time-major sequence; the state is h [B, n]."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.rnn = nn.GRU(input_size, hidden_size)

    def init_state(self, batch_size: int) -> Tensor:
        return self.rnn.weight_hh_l0.new_zeros(batch_size, self.hidden_size)

    def forward(self, x: Tensor, state: Tensor, state_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        if state_mask is not None:
            raise ValueError("GRULayer does not support state dropout; use state_dropout=0")
        out, h = self.rnn(x, state.unsqueeze(0))
        return out, h[0]
