"""Multiplicative LSTM (mLSTM), Krause thesis eqs. (3.5)-(3.9).

    m_t = (W_mx x_t) ⊙ (W_mh h_{t-1})                    (3.5)
    ĥ_t = W_hx x_t + W_hm m_t                            (3.6)
    i_t, o_t, f_t = σ(W_*x x_t + W_*m m_t)               (3.7)-(3.9)
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ tanh(ĥ_t)                (2.21)
    h_t = tanh(c_t) ⊙ o_t                                (2.22)

Departures: the gates carry biases (the thesis omits them from the equations),
and the capped input gate min(i, 1 - f) of Melis §4.6 is available as an option
(off by default, as in Krause). The products W_mx x and W_*x x are hoisted out
of the time loop; the recurrence itself runs as a per-step autograd loop.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.models.chrono import chrono_forget_bias_
from paperlib.models.lstm import LSTMState, default_uniform_, gated_update


def mlstm_step(
    mx: Tensor,
    gx: Tensor,
    h: Tensor,
    c: Tensor,
    weight_mh: Tensor,
    weight_m: Tensor,
    capped_input_gate: bool,
) -> LSTMState:
    """One mLSTM update, Krause eqs. (3.5)-(3.9); returns (h, c).

    ``mx`` [B, n] = W_mx x and ``gx`` [B, 4n] = W_*x x + b (gate order i, f, j, o
    with j = ĥ) are the input contributions; ``h`` is the (masked) h_{t-1}.
    """
    m = mx * F.linear(h, weight_mh)  # (3.5)
    gates = gx + F.linear(m, weight_m)  # (3.6)-(3.9), [B, 4n]
    return gated_update(gates, c, capped_input_gate)


class MLSTMLayer(nn.Module):
    """One mLSTM layer over a time-major sequence (interface of :class:`~paperlib.models.layers.LSTMLayer`).

    The state mask M^state is applied to h_{t-1} before W_mh, the only place
    h_{t-1} enters the recurrence.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        capped_input_gate: bool = False,
        chrono_t_max: float | None = None,
    ):
        super().__init__()
        n = hidden_size
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.capped_input_gate = capped_input_gate
        self.weight_mx = nn.Parameter(torch.empty(n, input_size))
        self.weight_mh = nn.Parameter(torch.empty(n, n))
        self.weight_x = nn.Parameter(torch.empty(4 * n, input_size))
        self.bias = nn.Parameter(torch.empty(4 * n))
        self.weight_m = nn.Parameter(torch.empty(4 * n, n))
        for p in self.parameters():
            default_uniform_(p, n)
        if chrono_t_max is not None:
            chrono_forget_bias_(self.bias.data[n : 2 * n], chrono_t_max)

    def init_state(self, batch_size: int) -> LSTMState:
        like = self.weight_mh
        return like.new_zeros(batch_size, self.hidden_size), like.new_zeros(batch_size, self.hidden_size)

    def forget_bias(self) -> Tensor:
        n = self.hidden_size
        return self.bias[n : 2 * n]

    def forward(self, x: Tensor, state: LSTMState, state_mask: Tensor | None = None) -> tuple[Tensor, LSTMState]:
        h, c = state
        mx_all = F.linear(x, self.weight_mx)  # [T, B, n]
        gx_all = F.linear(x, self.weight_x, self.bias)  # [T, B, 4n]
        outputs = []
        for mx, gx in zip(mx_all, gx_all):
            h_prev = h if state_mask is None else h * state_mask
            h, c = mlstm_step(mx, gx, h_prev, c, self.weight_mh, self.weight_m, self.capped_input_gate)
            outputs.append(h)
        return torch.stack(outputs), (h, c)

    def extra_repr(self) -> str:
        return f"capped_input_gate={self.capped_input_gate}"
