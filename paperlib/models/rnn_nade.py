"""The RNN-NADE (Boulanger-Lewandowski et al. 2012) with LSTM layers: the LSTM-NADE of Krause thesis §2.6.2, §4.8.

A song is a sequence of binary frames x_1..x_T (piano rolls [T, 88]). A recurrent network reads the frames
before t and sets the biases of a NADE (:mod:`paperlib.models.nade`) that models frame t:

    b_t^h = b_h + W_bh^h h_t        (2.64)
    b_t^y = b_y + W_bh^y h_t        (2.65)

so P(x_{1:T}) = Π_t P_NADE(x_t; b_t^h, b_t^y), each frame's NADE still conditioning note n on notes 1..n-1
of its own frame. §4.8's network: a linear embedding of the frame, 2 stacked layers of 650 LSTM units
(eq. 2.1, :class:`~paperlib.models.layers.LSTMLayer`) and a NADE of 400 units, 7.2M parameters in all
(:func:`thesis_lstm_nade` builds it: 7,215,688 with the LSTM's two bias vectors). Dropout as §4.8 states:
"in the style of Zaremba et al. (2014)" on the LSTM's non-recurrent connections (the embedded input, between
layers and the top layer's output, a fresh mask per time step), and on the NADE's hidden units per frame.

Readings and departures, stated: h_t must summarise x_{1:t-1} only (Figure 2.8), so the LSTM's input at step
t is the previous frame x_{t-1}, with x_0 an all-silent frame, and h_t is its output at step t; every frame
of a song, the first included, is scored. The embedding has no bias (the LSTM gates have their own); W_bh^h
and W_bh^y are linear maps whose biases are b_h and b_y. The state carried between windows of one song is
the LSTM state and the last frame read, so evaluating a song in segments (dynamic evaluation, Krause §4.8)
computes the same function as one pass.

Log-likelihood convention: nats per frame, the sum over the 88 notes of a frame, averaged over frames.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from paperlib.models.layers import LSTMLayer
from paperlib.models.masks import bernoulli_mask
from paperlib.models.nade import NADE, check_frames, nade_log_prob

RNNNADEState = tuple[list[tuple[Tensor, Tensor]], Tensor]  # (per-layer LSTM (h, c) [B, H], last frame [B, N])


class LSTMNADE(nn.Module):
    """RNN-NADE of eqs. (2.64)-(2.65) over stacked LSTM layers (§4.8's LSTM-NADE).

    ``forward(frames [B, T, N], state=None) -> (log P(x_t | x_<t) [B, T] in nats, state)``.
    In training mode dropout masks are sampled; in eval mode no dropout is applied.
    """

    def __init__(
        self,
        notes: int = 88,
        embedding_size: int = 650,
        hidden_size: int = 650,
        num_layers: int = 2,
        nade_size: int = 400,
        dropout: float = 0.0,
        nade_dropout: float = 0.0,
        activation: str = "relu",
    ):
        super().__init__()
        for name, value in (("notes", notes), ("embedding_size", embedding_size), ("hidden_size", hidden_size),
                            ("num_layers", num_layers), ("nade_size", nade_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.notes, self.hidden_size, self.dropout = notes, hidden_size, dropout
        self.embedding = nn.Linear(notes, embedding_size, bias=False)
        self.layers = nn.ModuleList(
            LSTMLayer(embedding_size if i == 0 else hidden_size, hidden_size, capped_input_gate=False)
            for i in range(num_layers)
        )
        self.nade = NADE(notes, nade_size, activation, nade_dropout)
        self.to_hidden_bias = nn.Linear(hidden_size, nade_size, bias=False)  # W_bh^h (2.64)
        self.to_output_bias = nn.Linear(hidden_size, notes, bias=False)  # W_bh^y (2.65)

    def init_state(self, batch_size: int) -> RNNNADEState:
        silent = self.embedding.weight.new_zeros(batch_size, self.notes)  # x_0
        return [layer.init_state(batch_size) for layer in self.layers], silent

    def _drop(self, x: Tensor) -> Tensor:
        """Zaremba-style dropout on a non-recurrent connection, a fresh mask per time step; x [T, B, H]."""
        if not self.training:
            return x
        mask = bernoulli_mask(x, tuple(x.shape), self.dropout)
        return x if mask is None else x * mask

    def biases(self, frames: Tensor, state: RNNNADEState | None = None) -> tuple[Tensor, Tensor, RNNNADEState]:
        """(b_t^h [B, T, H_nade], b_t^y [B, T, N], state): eqs. (2.64)-(2.65) from the frames before each t."""
        check_frames(frames, self.notes)
        if frames.dim() != 3:
            raise ValueError(f"frames must be [B, T, {self.notes}], got shape {tuple(frames.shape)}")
        batch, steps, _ = frames.shape
        layer_states, last = self.init_state(batch) if state is None else state
        previous = torch.cat([last.unsqueeze(1), frames[:, :-1]], 1)  # [B, T, N]: x_{t-1}
        x = self._drop(self.embedding(previous).transpose(0, 1))  # [T, B, E], time-major
        new_states = []
        for layer, layer_state in zip(self.layers, layer_states):
            x, layer_state = layer(x, layer_state)  # [T, B, H]
            x = self._drop(x)
            new_states.append(layer_state)
        h = x.transpose(0, 1)  # [B, T, H]: h_t
        bias_hidden = self.nade.bias_hidden + self.to_hidden_bias(h)  # (2.64)
        bias_out = self.nade.bias_out + self.to_output_bias(h)  # (2.65)
        return bias_hidden, bias_out, (new_states, frames[:, -1])

    def forward(self, frames: Tensor, state: RNNNADEState | None = None) -> tuple[Tensor, RNNNADEState]:
        bias_hidden, bias_out, state = self.biases(frames, state)
        return nade_log_prob(frames, self.nade.logits(frames, bias_hidden, bias_out)), state


def thesis_lstm_nade(dropout: float = 0.0, nade_dropout: float = 0.0, **overrides: Any) -> LSTMNADE:
    """§4.8's network: embedding, 2 × 650 LSTM units, a NADE of 400 units over 88 notes (7.2M parameters)."""
    settings = dict(notes=88, embedding_size=650, hidden_size=650, num_layers=2, nade_size=400)
    return LSTMNADE(**{**settings, **overrides}, dropout=dropout, nade_dropout=nade_dropout)


def frame_mean_log_likelihood(log_probs: Tensor, lengths: Tensor | None = None) -> Tensor:
    """Nats per frame: the frames' log-likelihoods (each a sum over notes) averaged over the frames of all songs.

    ``log_probs`` [B, T]; ``lengths`` [B] counts the real frames of each padded song (None: all are real).
    """
    if lengths is None:
        return log_probs.mean()
    if lengths.shape != log_probs.shape[:1] or bool((lengths < 1).any()) or bool((lengths > log_probs.shape[1]).any()):
        raise ValueError(f"lengths must be [B] with 1 <= length <= {log_probs.shape[1]}, got {lengths.tolist()}")
    real = torch.arange(log_probs.shape[1], device=log_probs.device) < lengths.unsqueeze(1)  # [B, T]
    return (log_probs * real).sum() / real.sum()
