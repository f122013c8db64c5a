"""LSTM cell, Melis thesis eq. (2.1), with the optional capped input gate min(i, 1 - f) of §4.6.

:func:`lstm_step` is the autograd reference of one update. :class:`LSTMRecurrence`
runs the whole time loop with a hand-written backward pass: the input projection
x W^x is one big matmul outside the loop, each step is one matmul plus in-place
gate math into preallocated buffers, and the weight gradient is a single matmul
over all time steps after the backward loop. The per-step kernels
:func:`lstm_cell_forward_` / :func:`lstm_cell_backward_` are shared with the fused
Mogrifier recurrence.

Gate layout is (i, f, j, o) along the last axis, as in ``torch.nn.LSTM`` (which calls j "g").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from paperlib.device import float32_recurrence

LSTMState = tuple[Tensor, Tensor]


def lstm_step(
    x: Tensor,
    h: Tensor,
    c: Tensor,
    weight_ih: Tensor,
    weight_hh: Tensor,
    bias: Tensor,
    capped_input_gate: bool,
) -> LSTMState:
    """One LSTM update, Melis thesis eq. (2.1); returns (h, c).

    With ``capped_input_gate`` the cell update uses min(i, 1 - f) in place of i
    (§4.6), which keeps |c| <= 1 whenever |c_prev| <= 1. ``h`` is the (possibly
    dropped-out and mogrified) previous output, ``x`` [B, m], ``h``/``c`` [B, n].
    """
    gates = F.linear(x, weight_ih, bias) + F.linear(h, weight_hh)  # [B, 4n]
    return gated_update(gates, c, capped_input_gate)


def gated_update(gates: Tensor, c: Tensor, capped_input_gate: bool) -> LSTMState:
    """The LSTM cell and output update from pre-activations [B, 4n] (order i, f, j, o), eq. (2.1)."""
    i, f, j, o = gates.chunk(4, dim=1)
    i, f, j, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(j), torch.sigmoid(o)
    if capped_input_gate:
        i = torch.minimum(i, 1.0 - f)
    c = f * c + i * j
    return o * torch.tanh(c), c


def lstm_cell_forward_(g: Tensor, c_prev: Tensor, c: Tensor, tanh_c: Tensor, h: Tensor, capped: bool) -> None:
    """Eq. (2.1) from pre-activations: ``g`` [B, 4n] is activated in place; writes ``c``, tanh(c) and ``h``."""
    n = c.shape[1]
    g[:, : 2 * n].sigmoid_()
    g[:, 2 * n : 3 * n].tanh_()
    g[:, 3 * n :].sigmoid_()
    i, f, j, o = g[:, :n], g[:, n : 2 * n], g[:, 2 * n : 3 * n], g[:, 3 * n :]
    if capped:
        i = torch.minimum(i, 1.0 - f)
    torch.mul(f, c_prev, out=c)
    c.addcmul_(i, j)
    torch.tanh(c, out=tanh_c)
    torch.mul(o, tanh_c, out=h)


def lstm_cell_backward_(
    g: Tensor, c_prev: Tensor, tanh_c: Tensor, dh: Tensor, dc: Tensor, dg: Tensor, capped: bool
) -> Tensor:
    """Backward of :func:`lstm_cell_forward_`: writes d(pre-activations) into ``dg``; returns dL/dc_prev.

    ``g`` holds the activations (i, f, j, o); ``dh``/``dc`` are dL/dh and dL/dc of this step.
    """
    n = c_prev.shape[1]
    i, f, j, o = g[:, :n], g[:, n : 2 * n], g[:, 2 * n : 3 * n], g[:, 3 * n :]
    d_o = dh * tanh_c * (o - o * o)
    dc = dc + dh * o * (1.0 - tanh_c * tanh_c)
    d_update = dc * j  # gradient w.r.t. the (possibly capped) input gate
    df = dc * c_prev
    if capped:
        one_minus_f = 1.0 - f
        i_eff = torch.minimum(i, one_minus_f)
        di = d_update * (i <= one_minus_f)  # the min routes the gradient to i or to 1 - f
        df = df - (d_update - di)
    else:
        i_eff, di = i, d_update
    torch.cat([di * (i - i * i), df * (f - f * f), dc * i_eff * (1.0 - j * j), d_o], dim=1, out=dg)
    return dc * f


class LSTMRecurrence(torch.autograd.Function):
    """Time loop of eq. (2.1) given precomputed input contributions, with manual BPTT.

    Inputs: ``gx`` [T, B, 4n] = x W^x + b for all steps, ``weight_hh`` [4n, n],
    ``h0``/``c0`` [B, n], ``state_mask`` [B, n] or None (the variational
    M^state applied to h_prev at every step), ``capped`` (bool).
    Outputs: all outputs h_1..h_T [T, B, n] and the last cell state c_T [B, n].
    """

    @staticmethod
    def forward(ctx, gx, weight_hh, h0, c0, state_mask, capped):  # type: ignore[override]
        steps, batch, width = gx.shape
        n = width // 4
        gates = gx.new_empty(steps, batch, width)  # activations (i, f, j, o)
        hs = gx.new_empty(steps + 1, batch, n)  # h_0 .. h_T
        cs = gx.new_empty(steps + 1, batch, n)  # c_0 .. c_T
        tanh_cs = gx.new_empty(steps, batch, n)
        hs[0] = h0
        cs[0] = c0
        w_t = weight_hh.t().contiguous()  # [n, 4n]: a non-transposed GEMM is markedly faster for small B
        masked = gx.new_empty(batch, n) if state_mask is not None else None
        for t in range(steps):
            h_prev = hs[t] if state_mask is None else torch.mul(hs[t], state_mask, out=masked)
            torch.addmm(gx[t], h_prev, w_t, out=gates[t])
            lstm_cell_forward_(gates[t], cs[t], cs[t + 1], tanh_cs[t], hs[t + 1], capped)
        ctx.capped = capped
        ctx.save_for_backward(gates, hs, cs, tanh_cs, weight_hh, state_mask)
        return hs[1:], cs[steps]

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_c_last):  # type: ignore[override]
        gates, hs, cs, tanh_cs, weight_hh, state_mask = ctx.saved_tensors
        steps, batch, width = gates.shape
        n = width // 4
        d_gates = torch.empty_like(gates)  # gradients w.r.t. pre-activations
        dh = d_out.new_zeros(batch, n)
        dc = d_c_last
        for t in reversed(range(steps)):
            dc = lstm_cell_backward_(gates[t], cs[t], tanh_cs[t], d_out[t] + dh, dc, d_gates[t], ctx.capped)
            dh = d_gates[t] @ weight_hh  # [B, n], gradient w.r.t. the masked h_prev
            if state_mask is not None:
                dh = dh * state_mask
        d_weight = None
        if ctx.needs_input_grad[1]:
            h_prev = hs[:-1] if state_mask is None else hs[:-1] * state_mask  # [T, B, n]
            d_weight = d_gates.reshape(-1, width).t() @ h_prev.reshape(-1, n)
        return d_gates, d_weight, dh, dc, None, None


def lstm_recurrence(
    gx: Tensor, weight_hh: Tensor, h0: Tensor, c0: Tensor, state_mask: Tensor | None, capped: bool
) -> tuple[Tensor, Tensor]:
    """Functional entry point of :class:`LSTMRecurrence`; returns (h_1..h_T [T, B, n], c_T)."""
    return float32_recurrence(LSTMRecurrence.apply, gx, weight_hh, h0, c0, state_mask, capped)


def default_uniform_(tensor: Tensor, hidden_size: int) -> Tensor:
    """PyTorch's recurrent-layer default init U(-1/sqrt(n), 1/sqrt(n))."""
    bound = 1.0 / math.sqrt(hidden_size)
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)
