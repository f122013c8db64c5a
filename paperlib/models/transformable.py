"""Forms of the recurrent layers that ``torch.func`` transforms (``vmap``, ``grad``) can trace.

The fused recurrences of :mod:`~paperlib.models.lstm`, :mod:`~paperlib.models.rlstm` and
:mod:`~paperlib.models.mogrifier` are ``torch.autograd.Function`` s with hand-written backward passes and in-place
kernels, which functorch cannot see through. :class:`LSTMScan` is the plain or capped LSTM time loop of eq. (2.1)
written without in-place updates (it keeps the one-matmul recurrent weight gradient); any other layer falls back to
its per-step autograd reference (:func:`~paperlib.models.layers.stepwise_recurrence`); a one-layer ``nn.GRU`` runs
:func:`gru_forward`. Under :func:`functorch_compatible` a model's LSTM/RLSTM/GRU layers compute the same function
through these forms: per-stream
dynamic evaluation and stacked training of many small models (:mod:`paperlib.stacked`) vmap over them.
"""

from __future__ import annotations

import contextlib
import types
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.models.layers import LSTMLayer, RLSTMLayer, stepwise_recurrence


class LSTMScan(torch.autograd.Function):
    """The LSTM time loop of eq. (2.1) (optionally capped) with a one-matmul recurrent weight gradient.

    Written without in-place updates and with ``setup_context``, so functorch can vmap it (the fused
    :class:`~paperlib.models.lstm.LSTMRecurrence` cannot be transformed). Inputs: ``gx`` [T, B, 4n] =
    x W^x + b, ``weight_hh`` [4n, n], ``h0``/``c0`` [B, n]. Outputs h_0..h_T and c_0..c_T ([T+1, B, n])
    and the gate activations [T, B, 4n] (kept for the backward pass).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(gx: Tensor, weight_hh: Tensor, h0: Tensor, c0: Tensor, capped: bool):  # type: ignore[override]
        n = h0.shape[-1]
        hs, cs, acts = [h0], [c0], []
        for g_t in gx:
            pre = g_t + hs[-1] @ weight_hh.transpose(0, 1)  # [B, 4n]
            i, f = torch.sigmoid(pre[..., :n]), torch.sigmoid(pre[..., n : 2 * n])
            j, o = torch.tanh(pre[..., 2 * n : 3 * n]), torch.sigmoid(pre[..., 3 * n :])
            i_eff = torch.minimum(i, 1.0 - f) if capped else i
            cs.append(f * cs[-1] + i_eff * j)
            hs.append(o * torch.tanh(cs[-1]))
            acts.append(torch.cat([i, f, j, o], dim=-1))
        return torch.stack(hs), torch.stack(cs), torch.stack(acts)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        _, weight_hh, _, _, capped = inputs
        hs, cs, acts = output
        ctx.capped = capped
        ctx.save_for_backward(weight_hh, hs, cs, acts)
        ctx.mark_non_differentiable(acts)

    @staticmethod
    def backward(ctx, d_hs: Tensor, d_cs: Tensor, _d_acts: Tensor):  # type: ignore[override]
        weight_hh, hs, cs, acts = ctx.saved_tensors
        n = hs.shape[-1]
        dh, dc = torch.zeros_like(hs[0]), torch.zeros_like(cs[0])
        d_pre = []
        for t in reversed(range(acts.shape[0])):
            i, f, j, o = acts[t, ..., :n], acts[t, ..., n : 2 * n], acts[t, ..., 2 * n : 3 * n], acts[t, ..., 3 * n :]
            dh = dh + d_hs[t + 1]
            tanh_c = torch.tanh(cs[t + 1])
            dc = dc + d_cs[t + 1] + dh * o * (1.0 - tanh_c * tanh_c)
            d_update = dc * j  # gradient w.r.t. the (possibly capped) input gate
            df = dc * cs[t]
            if ctx.capped:
                routed = i <= 1.0 - f  # the min passes its gradient to i or to 1 - f
                di = torch.where(routed, d_update, torch.zeros_like(d_update))
                df = df - (d_update - di)
                i_eff = torch.minimum(i, 1.0 - f)
            else:
                di, i_eff = d_update, i
            step = torch.cat([di * i * (1 - i), df * f * (1 - f), dc * i_eff * (1 - j * j), dh * tanh_c * o * (1 - o)], -1)
            d_pre.append(step)
            dh = step @ weight_hh  # [B, n]
            dc = dc * f
        d_gx = torch.stack(d_pre[::-1])  # [T, B, 4n]
        d_weight = d_gx.flatten(0, -2).transpose(0, 1) @ hs[:-1].flatten(0, -2)  # one matmul over all steps
        return d_gx, d_weight, dh + d_hs[0], dc + d_cs[0], None


def reference_recurrent_forward(layer: nn.Module, x: Tensor, state, state_mask: Tensor | None = None):
    """Functorch-transformable form of an LSTM/RLSTM layer (same function as its fused recurrence).

    A plain or capped LSTM without state mask or Mogrifier runs :class:`LSTMScan`; otherwise the layer
    runs per step: mask h_prev, mogrify (eq. 2.2), cell (eq. 2.1 or Melis §4.1).
    """
    h, c = state
    mogrified = layer.mogrifier is not None and layer.mogrifier.rounds > 0
    if isinstance(layer, LSTMLayer) and not mogrified and state_mask is None:
        rnn = layer.rnn
        gx = F.linear(x, rnn.weight_ih_l0, rnn.bias_ih_l0 + rnn.bias_hh_l0)  # [T, B, 4n]
        hs, cs, _ = LSTMScan.apply(gx, rnn.weight_hh_l0, h, c, layer.capped_input_gate)
        return hs[1:], (hs[-1], cs[-1])
    return stepwise_recurrence(layer, x, (h, c), state_mask)


def gru_forward(gru: nn.GRU, x: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Functorch-transformable form of a one-layer, one-direction ``nn.GRU`` (the same function, step by step).

    ``torch.func.vmap`` has no batching rule for the fused ``aten::gru``. The cell is torch's GRU (Cho et al.):
    ``r = σ(W_ir x + b_ir + W_hr h + b_hr)``, ``z = σ(W_iz x + b_iz + W_hz h + b_hz)``,
    ``n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))``, ``h' = (1 - z) ⊙ n + z ⊙ h``. Returns ``(output, h_n)`` as
    ``nn.GRU`` does (``batch_first`` honoured, ``h_n`` [1, B, n]).
    """
    if gru.num_layers != 1 or gru.bidirectional or not gru.bias:
        raise ValueError("the transformable GRU form covers one layer, one direction, with biases")
    if x.dim() != 3:
        raise ValueError(f"the transformable GRU form takes batched input [B, T, m] or [T, B, m], got {tuple(x.shape)}")
    steps = x.transpose(0, 1) if gru.batch_first else x  # [T, B, m]
    n = gru.hidden_size
    h = steps.new_zeros(steps.shape[1], n) if hx is None else hx[0]
    gates_x = F.linear(steps, gru.weight_ih_l0, gru.bias_ih_l0)  # [T, B, 3n]: r, z, n
    outputs = []
    for g_x in gates_x:
        g_h = F.linear(h, gru.weight_hh_l0, gru.bias_hh_l0)
        r = torch.sigmoid(g_x[..., :n] + g_h[..., :n])
        z = torch.sigmoid(g_x[..., n : 2 * n] + g_h[..., n : 2 * n])
        candidate = torch.tanh(g_x[..., 2 * n :] + r * g_h[..., 2 * n :])
        h = (1.0 - z) * candidate + z * h
        outputs.append(h)
    out = torch.stack(outputs)  # [T, B, n]
    return (out.transpose(0, 1) if gru.batch_first else out), h.unsqueeze(0)


@contextlib.contextmanager
def functorch_compatible(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily run recurrent layers through functorch-transformable code computing the same function.

    The fused recurrences are ``torch.autograd.Function`` s with hand-written backward passes and in-place
    kernels, which ``torch.func`` transforms cannot see through. Under this context a plain or capped LSTM
    layer runs :class:`LSTMScan`, any other LSTM/RLSTM layer its per-step autograd reference, and a one-layer,
    one-direction ``nn.GRU`` with biases :func:`gru_forward` (other GRUs are left as they are).
    """
    patched = []
    try:
        for module in model.modules():
            if isinstance(module, (LSTMLayer, RLSTMLayer)) and "forward" not in vars(module):
                module.forward = types.MethodType(reference_recurrent_forward, module)
                patched.append(module)
            elif (isinstance(module, nn.GRU) and module.num_layers == 1 and not module.bidirectional and module.bias
                  and "forward" not in vars(module)):
                module.forward = types.MethodType(gru_forward, module)
                patched.append(module)
        yield model
    finally:
        for module in patched:
            del module.forward
