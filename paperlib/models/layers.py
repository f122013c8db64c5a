"""LSTM and RLSTM layers (optionally with a Mogrifier) over time-major sequences.

Every layer has ``forward(x [T, B, m], state, state_mask [B, n] | None) ->
(outputs [T, B, n], new state)`` and ``init_state(batch_size)``; the state of
both is (h, c) with tensors [B, n]. The state mask M^state,l of eq. (4.1) is
applied to h_prev before it enters the Mogrifier and the gates.

Execution paths (all compute the same function):

* ``torch.nn.LSTM`` for a plain LSTM without capped gate, state dropout or Mogrifier;
* the fused recurrences of :mod:`~paperlib.models.lstm`, :mod:`~paperlib.models.rlstm`
  and :mod:`~paperlib.models.mogrifier` (hand-written backward) otherwise.

A Mogrifier with zero rounds is the identity and takes exactly the path of its cell.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from paperlib.models.chrono import chrono_forget_bias_
from paperlib.models.lstm import LSTMState, default_uniform_, lstm_recurrence, lstm_step
from paperlib.models.mogrifier import Mogrifier, MogrifierSpec, mogrifier_recurrence
from paperlib.models.rlstm import rlstm_recurrence, rlstm_step


class LSTMLayer(nn.Module):
    """One LSTM layer, Melis thesis eq. (2.1), optionally capped (§4.6) and mogrified (eq. 2.2).

    Parameters live in an ``nn.LSTM`` (its two bias vectors are summed), so the
    ``torch.nn.LSTM`` fast path and the fused paths share them.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        capped_input_gate: bool = True,
        mogrifier: Mogrifier | None = None,
        chrono_t_max: float | None = None,
    ):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.capped_input_gate = capped_input_gate
        self.rnn = nn.LSTM(input_size, hidden_size)
        self.mogrifier = mogrifier
        if chrono_t_max is not None:
            n = hidden_size
            chrono_forget_bias_(self.rnn.bias_ih_l0.data[n : 2 * n], chrono_t_max)
            self.rnn.bias_hh_l0.data[n : 2 * n].zero_()

    def init_state(self, batch_size: int) -> LSTMState:
        like = self.rnn.weight_hh_l0
        return like.new_zeros(batch_size, self.hidden_size), like.new_zeros(batch_size, self.hidden_size)

    def forget_bias(self) -> Tensor:
        """Effective b^f (sum of nn.LSTM's two bias vectors)."""
        n = self.hidden_size
        return (self.rnn.bias_ih_l0 + self.rnn.bias_hh_l0)[n : 2 * n]

    def forward(self, x: Tensor, state: LSTMState, state_mask: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        h0, c0 = state
        weight_ih, weight_hh = self.rnn.weight_ih_l0, self.rnn.weight_hh_l0
        mogrified = self.mogrifier is not None and self.mogrifier.rounds > 0
        if not mogrified and not self.capped_input_gate and state_mask is None:
            out, (h, c) = self.rnn(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
            return out, (h[0], c[0])
        bias = self.rnn.bias_ih_l0 + self.rnn.bias_hh_l0
        if mogrified:
            spec = MogrifierSpec("lstm", self.capped_input_gate, self.mogrifier.rounds,
                                 self.mogrifier.rank > 0, self.mogrifier.zigzag)
            weights = [weight_ih, weight_hh, bias, *self.mogrifier.round_weights()]
            out, c = mogrifier_recurrence(x, h0, c0, state_mask, spec, weights)
        else:
            steps, batch, _ = x.shape
            gx = torch.addmm(bias, x.reshape(steps * batch, -1), weight_ih.t()).view(steps, batch, -1)  # [T, B, 4n]
            out, c = lstm_recurrence(gx, weight_hh, h0, c0, state_mask, self.capped_input_gate)
        return out, (out[-1], c)

    def extra_repr(self) -> str:
        return f"capped_input_gate={self.capped_input_gate}"


class RLSTMLayer(nn.Module):
    """One RLSTM layer (Melis thesis §4.1), optionally mogrified (eq. 2.2).

    All weights and biases start from the LSTM default U(-1/sqrt(n), 1/sqrt(n)).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        mogrifier: Mogrifier | None = None,
        chrono_t_max: float | None = None,
    ):
        super().__init__()
        n = hidden_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(2 * n, input_size))  # (W^ix; W^jx)
        self.bias_ij = nn.Parameter(torch.empty(2 * n))
        self.weight_hh = nn.Parameter(torch.empty(3 * n, n))  # (W^ih; W^jh; W^fh)
        self.weight_fu = nn.Parameter(torch.empty(n, n))
        self.bias_f = nn.Parameter(torch.empty(n))
        self.weight_oc = nn.Parameter(torch.empty(n, n))
        self.bias_o = nn.Parameter(torch.empty(n))
        for p in self.parameters():
            default_uniform_(p, n)
        if chrono_t_max is not None:
            chrono_forget_bias_(self.bias_f.data, chrono_t_max)
        self.mogrifier = mogrifier

    def init_state(self, batch_size: int) -> LSTMState:
        like = self.weight_hh
        return like.new_zeros(batch_size, self.hidden_size), like.new_zeros(batch_size, self.hidden_size)

    def forget_bias(self) -> Tensor:
        return self.bias_f

    def cell_weights(self) -> list[Tensor]:
        """(W_ih, b_ij, W_hh, W_fu, b_f, W_oc, b_o) in the order the fused recurrences expect."""
        return [self.weight_ih, self.bias_ij, self.weight_hh, self.weight_fu, self.bias_f, self.weight_oc, self.bias_o]

    def forward(self, x: Tensor, state: LSTMState, state_mask: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        h0, c0 = state
        if self.mogrifier is not None and self.mogrifier.rounds > 0:
            spec = MogrifierSpec("rlstm", True, self.mogrifier.rounds, self.mogrifier.rank > 0, self.mogrifier.zigzag)
            weights = [*self.cell_weights(), *self.mogrifier.round_weights()]
            out, c = mogrifier_recurrence(x, h0, c0, state_mask, spec, weights)
        else:
            steps, batch, _ = x.shape
            gx = torch.addmm(self.bias_ij, x.reshape(steps * batch, -1), self.weight_ih.t()).view(steps, batch, -1)
            out, c = rlstm_recurrence(
                gx, self.weight_hh, self.weight_fu, self.bias_f, self.weight_oc, self.bias_o, h0, c0, state_mask
            )
        return out, (out[-1], c)


def stepwise_recurrence(layer: nn.Module, x: Tensor, state: LSTMState, state_mask: Tensor | None = None
                        ) -> tuple[Tensor, LSTMState]:
    """Per-step autograd form of an LSTM/RLSTM layer's recurrence, ``x`` [T, B, m] -> ([T, B, n], (h, c)).

    Masks h_prev, mogrifies (eq. 2.2), then applies the cell (eq. 2.1 or Melis §4.1) one step at a time:
    the same function as the layer's fused recurrence, written plainly. It is the reference the fused
    backward passes are tested against, and the form ``torch.func`` transforms can trace.
    """
    h, c = state
    outputs = []
    for x_t in x:
        h_prev = h if state_mask is None else h * state_mask
        if layer.mogrifier is not None and layer.mogrifier.rounds > 0:
            h_prev, x_t = layer.mogrifier(h_prev, x_t)
        if isinstance(layer, LSTMLayer):
            rnn = layer.rnn
            bias = rnn.bias_ih_l0 + rnn.bias_hh_l0
            h, c = lstm_step(x_t, h_prev, c, rnn.weight_ih_l0, rnn.weight_hh_l0, bias, layer.capped_input_gate)
        else:
            h, c = rlstm_step(x_t, h_prev, c, *layer.cell_weights(), state_mask)
        outputs.append(h)
    out = torch.stack(outputs)  # [T, B, n]
    return out, (out[-1], c)
