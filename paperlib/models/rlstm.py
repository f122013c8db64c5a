"""Rewired LSTM (RLSTM), Melis thesis §4.1 / Circling Back §2.

Differences from the LSTM of eq. (2.1): the forget gate is computed from the
proposed update i ⊙ j (and h_prev, but not x), the input gate is capped at
1 - f, and the output gate is computed from the new cell state c only:

    i = σ(W^ix x + W^ih h_prev + b^i)
    j = tanh(W^jx x + W^jh h_prev + b^j)
    f = σ(W^fu (i ⊙ j) + W^fh h_prev + b^f)
    c = f ⊙ c_prev + min(i, 1 - f) ⊙ j
    o = σ(W^oc (c ⊙ M^state) + b^o)
    h = o ⊙ tanh(c)

The state dropout mask M^state also enters o (§4.2). :func:`rlstm_step` is the
autograd reference; :class:`RLSTMRecurrence` is the fused time loop with a
hand-written backward (input projection hoisted, weight gradients as one matmul
each after the loop). Activations are stored in the layout (i, j, f, o).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from paperlib.device import float32_recurrence
from paperlib.models.lstm import LSTMState


def rlstm_step(
    x: Tensor,
    h: Tensor,
    c: Tensor,
    weight_ih: Tensor,
    bias_ij: Tensor,
    weight_hh: Tensor,
    weight_fu: Tensor,
    bias_f: Tensor,
    weight_oc: Tensor,
    bias_o: Tensor,
    state_mask: Tensor | None,
) -> LSTMState:
    """One RLSTM update, Melis thesis §4.1 with the §4.2 state mask on c in o; returns (h, c).

    ``weight_ih`` [2n, m] holds (W^ix; W^jx), ``weight_hh`` [3n, n] holds
    (W^ih; W^jh; W^fh). ``h`` is the already masked (and mogrified) h_prev.
    """
    n = c.shape[-1]
    hh = F.linear(h, weight_hh)  # [B, 3n]
    ij = F.linear(x, weight_ih, bias_ij) + hh[:, : 2 * n]
    i, j = torch.sigmoid(ij[:, :n]), torch.tanh(ij[:, n:])
    f = torch.sigmoid(F.linear(i * j, weight_fu, bias_f) + hh[:, 2 * n :])
    c = f * c + torch.minimum(i, 1.0 - f) * j
    c_in = c if state_mask is None else c * state_mask
    o = torch.sigmoid(F.linear(c_in, weight_oc, bias_o))
    return o * torch.tanh(c), c


def rlstm_cell_forward_(
    a: Tensor,
    hh_f: Tensor,
    w_fu_t: Tensor,
    bias_f: Tensor,
    w_oc_t: Tensor,
    bias_o: Tensor,
    c_prev: Tensor,
    c: Tensor,
    tanh_c: Tensor,
    h: Tensor,
    state_mask: Tensor | None,
) -> None:
    """One RLSTM update into buffers.

    On entry ``a[:, :2n]`` holds the i, j pre-activations; on exit ``a`` [B, 4n]
    holds the activations (i, j, f, o). ``hh_f`` [B, n] is W^fh h_prev; ``w_fu_t``
    and ``w_oc_t`` are the transposed (contiguous) W^fu and W^oc.
    """
    n = c.shape[1]
    a[:, :n].sigmoid_()
    a[:, n : 2 * n].tanh_()
    i, j, f, o = a[:, :n], a[:, n : 2 * n], a[:, 2 * n : 3 * n], a[:, 3 * n :]
    torch.addmm(hh_f, i * j, w_fu_t, out=f)
    f.add_(bias_f).sigmoid_()
    torch.mul(f, c_prev, out=c)
    c.addcmul_(torch.minimum(i, 1.0 - f), j)
    torch.addmm(bias_o, c if state_mask is None else c * state_mask, w_oc_t, out=o)
    o.sigmoid_()
    torch.tanh(c, out=tanh_c)
    torch.mul(o, tanh_c, out=h)


def rlstm_cell_backward_(
    a: Tensor,
    c_prev: Tensor,
    tanh_c: Tensor,
    dh: Tensor,
    dc: Tensor,
    da: Tensor,
    weight_fu: Tensor,
    weight_oc: Tensor,
    state_mask: Tensor | None,
) -> Tensor:
    """Backward of :func:`rlstm_cell_forward_`: writes d(pre-activations of i, j, f, o) into ``da``.

    Returns dL/dc_prev. The gradient w.r.t. h_prev is ``da[:, :3n] @ W_hh`` and
    w.r.t. x is ``da[:, :2n] @ W_ih`` (left to the caller).
    """
    n = c_prev.shape[1]
    i, j, f, o = a[:, :n], a[:, n : 2 * n], a[:, 2 * n : 3 * n], a[:, 3 * n :]
    d_o = dh * tanh_c * (o - o * o)
    d_c_in = d_o @ weight_oc  # through o = σ(W^oc (c ⊙ M) + b)
    if state_mask is not None:
        d_c_in = d_c_in * state_mask
    dc = dc + dh * o * (1.0 - tanh_c * tanh_c) + d_c_in
    one_minus_f = 1.0 - f
    d_update = dc * j
    di = d_update * (i <= one_minus_f)  # the min routes the gradient to i or to 1 - f
    df = dc * c_prev - (d_update - di)
    dj = dc * torch.minimum(i, one_minus_f)
    d_f = df * (f - f * f)
    du = d_f @ weight_fu  # through f = σ(W^fu (i ⊙ j) + ...)
    di = di + du * j
    dj = dj + du * i
    torch.cat([di * (i - i * i), dj * (1.0 - j * j), d_f, d_o], dim=1, out=da)
    return dc * f


def rlstm_weight_grads(
    da: Tensor, acts: Tensor, cs: Tensor, state_mask: Tensor | None, needs: tuple[bool, ...]
) -> tuple[Tensor | None, ...]:
    """Gradients of (W^fu, b^f, W^oc, b^o) from all steps at once.

    ``da``/``acts`` [T, B, 4n] in the layout (i, j, f, o), ``cs`` [T+1, B, n] = c_0..c_T.
    """
    n = cs.shape[-1]
    flat = da.reshape(-1, 4 * n)
    d_f, d_o = flat[:, 2 * n : 3 * n], flat[:, 3 * n :]
    d_weight_fu = d_bias_f = d_weight_oc = d_bias_o = None
    if needs[0]:
        d_weight_fu = d_f.t() @ (acts[..., :n] * acts[..., n : 2 * n]).reshape(-1, n)
    if needs[1]:
        d_bias_f = d_f.sum(0)
    if needs[2]:
        c_in = cs[1:] if state_mask is None else cs[1:] * state_mask
        d_weight_oc = d_o.t() @ c_in.reshape(-1, n)
    if needs[3]:
        d_bias_o = d_o.sum(0)
    return d_weight_fu, d_bias_f, d_weight_oc, d_bias_o


class RLSTMRecurrence(torch.autograd.Function):
    """Time loop of the RLSTM given ``gx`` [T, B, 2n] = x (W^ix; W^jx)ᵀ + (b^i; b^j), with manual BPTT.

    Remaining inputs: ``weight_hh`` [3n, n], ``weight_fu`` [n, n], ``bias_f`` [n],
    ``weight_oc`` [n, n], ``bias_o`` [n], ``h0``/``c0`` [B, n], ``state_mask`` [B, n] or None.
    Outputs: h_1..h_T [T, B, n] and c_T [B, n].
    """

    @staticmethod
    def forward(ctx, gx, weight_hh, weight_fu, bias_f, weight_oc, bias_o, h0, c0, state_mask):  # type: ignore[override]
        steps, batch, width = gx.shape
        n = width // 2
        acts = gx.new_empty(steps, batch, 4 * n)  # activations (i, j, f, o)
        hs = gx.new_empty(steps + 1, batch, n)
        cs = gx.new_empty(steps + 1, batch, n)
        tanh_cs = gx.new_empty(steps, batch, n)
        hs[0] = h0
        cs[0] = c0
        # contiguous transposes: a non-transposed GEMM is markedly faster for small batches
        w_hh_t, w_fu_t, w_oc_t = (w.t().contiguous() for w in (weight_hh, weight_fu, weight_oc))
        hh = gx.new_empty(batch, 3 * n)
        masked = gx.new_empty(batch, n) if state_mask is not None else None
        for t in range(steps):
            h_prev = hs[t] if state_mask is None else torch.mul(hs[t], state_mask, out=masked)
            torch.mm(h_prev, w_hh_t, out=hh)
            torch.add(gx[t], hh[:, : 2 * n], out=acts[t, :, : 2 * n])
            rlstm_cell_forward_(
                acts[t], hh[:, 2 * n :], w_fu_t, bias_f, w_oc_t, bias_o,
                cs[t], cs[t + 1], tanh_cs[t], hs[t + 1], state_mask,
            )
        ctx.save_for_backward(acts, hs, cs, tanh_cs, weight_hh, weight_fu, weight_oc, state_mask)
        return hs[1:], cs[steps]

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out, d_c_last):  # type: ignore[override]
        acts, hs, cs, tanh_cs, weight_hh, weight_fu, weight_oc, state_mask = ctx.saved_tensors
        steps, batch, width = acts.shape
        n = width // 4
        d_acts = torch.empty_like(acts)
        dh = d_out.new_zeros(batch, n)
        dc = d_c_last
        for t in reversed(range(steps)):
            dc = rlstm_cell_backward_(
                acts[t], cs[t], tanh_cs[t], d_out[t] + dh, dc, d_acts[t], weight_fu, weight_oc, state_mask
            )
            dh = d_acts[t, :, : 3 * n] @ weight_hh
            if state_mask is not None:
                dh = dh * state_mask
        needs = ctx.needs_input_grad
        d_weight_hh = None
        if needs[1]:
            h_prev = hs[:-1] if state_mask is None else hs[:-1] * state_mask
            d_weight_hh = d_acts[..., : 3 * n].reshape(-1, 3 * n).t() @ h_prev.reshape(-1, n)
        rest = rlstm_weight_grads(d_acts, acts, cs, state_mask, needs[2:6])
        return (d_acts[..., : 2 * n], d_weight_hh, *rest, dh, dc, None)


def rlstm_recurrence(
    gx: Tensor,
    weight_hh: Tensor,
    weight_fu: Tensor,
    bias_f: Tensor,
    weight_oc: Tensor,
    bias_o: Tensor,
    h0: Tensor,
    c0: Tensor,
    state_mask: Tensor | None,
) -> tuple[Tensor, Tensor]:
    """Functional entry point of :class:`RLSTMRecurrence`; returns (h_1..h_T [T, B, n], c_T)."""
    return float32_recurrence(RLSTMRecurrence.apply, gx, weight_hh, weight_fu, bias_f, weight_oc, bias_o, h0, c0,
                              state_mask)
