"""The gradients dynamic evaluation steps with: of one segment, for one stream (or a sparse M per stream) or
vmapped over streams with fast weights per stream (a vmappable LSTM scan for paperlib's fused layers), and their
mean squares over training batches, MS_g of the global RMS rule (Krause eq. 4.4)."""

from __future__ import annotations

import contextlib
import types
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from paperlib.data.batching import batchify, bptt_windows
from paperlib.dyneval.core import AdaptSpec, Params, _eval_mode, adapted_parameters
from paperlib.dyneval.sparse import _check_sparse_mode, sparse_adaptation
from paperlib.models.layers import LSTMLayer, RLSTMLayer, stepwise_recurrence
from paperlib.models.state import detach_state


GradientOracle = Callable[[Params, Tensor, Tensor, Any], tuple[Params, Tensor, Any]]


def _token_losses(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none").view(targets.shape)


def _direct_oracle(call: Callable[[Params, Tensor, Any], tuple[Tensor, Any]], per_stream: bool,
                   step_losses: Callable[[Tensor, Any], Tensor] = _token_losses) -> GradientOracle:
    """Gradients of Σ_s mean_t L[s, t] (``per_stream``, each row its own weights) or of mean L (shared weights).

    ``step_losses(outputs, targets) -> L [S, n]`` turns the model's outputs into per-step losses: token
    cross-entropy by default; the negative frame log-likelihood for songs (:mod:`paperlib.dyneval.songs`).
    """

    def oracle(params: Params, inputs: Tensor, targets: Tensor, state: Any) -> tuple[Params, Tensor, Any]:
        leaves = {k: v.detach().requires_grad_() for k, v in params.items()}
        with torch.enable_grad():
            logits, new_state = call(leaves, inputs, state)
            losses = step_losses(logits, targets)  # [S, n]
            loss = losses.mean(1).sum() if per_stream else losses.mean()
            grads = torch.autograd.grad(loss, list(leaves.values()))
        return dict(zip(leaves, grads)), losses.detach(), detach_state(new_state)

    return oracle


class _StateCodec:
    """Splits a model state into tensor leaves (batched by vmap) and static leaves (ints, None)."""

    def __init__(self, state: Any):
        self.leaves, self.spec = tree_flatten(state)
        self.tensor_at = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, Tensor)]

    def pack(self, state: Any) -> list[Tensor]:
        self.leaves, self.spec = tree_flatten(state)  # static leaves (e.g. a position offset) may change
        self.tensor_at = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, Tensor)]
        return [self.leaves[i] for i in self.tensor_at]

    def unpack(self, tensors: Sequence[Tensor]) -> Any:
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, tensors):
            leaves[i] = t
        return tree_unflatten(leaves, self.spec)


class _LSTMScan(torch.autograd.Function):
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


def _reference_recurrent_forward(layer: nn.Module, x: Tensor, state, state_mask: Tensor | None = None):
    """Functorch-transformable form of an LSTM/RLSTM layer (same function as its fused recurrence).

    A plain or capped LSTM without state mask or Mogrifier runs :class:`_LSTMScan`; otherwise the layer
    runs per step: mask h_prev, mogrify (eq. 2.2), cell (eq. 2.1 or Melis §4.1).
    """
    h, c = state
    mogrified = layer.mogrifier is not None and layer.mogrifier.rounds > 0
    if isinstance(layer, LSTMLayer) and not mogrified and state_mask is None:
        rnn = layer.rnn
        gx = F.linear(x, rnn.weight_ih_l0, rnn.bias_ih_l0 + rnn.bias_hh_l0)  # [T, B, 4n]
        hs, cs, _ = _LSTMScan.apply(gx, rnn.weight_hh_l0, h, c, layer.capped_input_gate)
        return hs[1:], (hs[-1], cs[-1])
    return stepwise_recurrence(layer, x, (h, c), state_mask)


@contextlib.contextmanager
def functorch_compatible(model: nn.Module) -> Iterator[nn.Module]:
    """Temporarily run LSTM/RLSTM layers through functorch-transformable code computing the same function.

    The fused recurrences are ``torch.autograd.Function`` s with hand-written backward passes and in-place
    kernels, which ``torch.func`` transforms cannot see through. Under this context a plain or capped LSTM
    layer runs :class:`_LSTMScan` and any other LSTM/RLSTM layer its per-step autograd reference.
    """
    patched = []
    try:
        for module in model.modules():
            if isinstance(module, (LSTMLayer, RLSTMLayer)) and "forward" not in vars(module):
                module.forward = types.MethodType(_reference_recurrent_forward, module)
                patched.append(module)
        yield model
    finally:
        for module in patched:
            del module.forward


def _vmap_oracle(model: nn.Module, frozen: Params, codec: _StateCodec) -> GradientOracle:
    """Per-stream gradients with per-stream fast weights: vmap over grad of one stream's mean segment loss."""

    def one_stream(params: Params, inputs: Tensor, targets: Tensor, state_tensors: list[Tensor]):
        state = codec.unpack(state_tensors)  # leaves [1, ...]: one stream is a batch of one
        logits, new_state = functional_call(model, {**frozen, **params}, (inputs.unsqueeze(0), state))
        losses = _token_losses(logits[0], targets)  # [n]
        return losses.mean(), (losses.detach(), codec.pack(detach_state(new_state)))

    batched = vmap(grad(one_stream, has_aux=True))

    def oracle(params: Params, inputs: Tensor, targets: Tensor, state: list[Tensor]):
        with functorch_compatible(model):
            grads, (losses, new_state) = batched(params, inputs, targets, state)
        return grads, losses, new_state

    return oracle


def mean_squared_gradients(
    model: nn.Module,
    train_tokens: Tensor,
    *,
    batch_size: int,
    bptt: int,
    max_batches: int | None = None,
    adapt: AdaptSpec = None,
    sparse_units: int | Sequence[int] | None = None,
    sparse_mode: str = "recurrent",
) -> Params:
    """MS_g = (1/N_b) Σ_k (∇L_k)², eq. (4.4), over N_b training batches of ``batch_size`` × ``bptt`` tokens.

    The gradient of each batch is that of its mean cross-entropy, in eval mode (no dropout), with the
    hidden state carried across batches as in training; ``max_batches`` limits N_b (§5.4.4.1 finds 1%
    of PTB enough). With ``sparse_units`` the statistics are those of M (key ``"adaptation"``) at M = 0, for
    sparse dynamic evaluation with the same ``sparse_units`` and ``sparse_mode``.
    """
    if train_tokens.dim() != 1:
        raise ValueError(f"train_tokens must be a 1-d id stream, got shape {tuple(train_tokens.shape)}")
    if max_batches is not None and max_batches < 1:
        raise ValueError(f"max_batches must be >= 1 or None, got {max_batches}")
    _check_sparse_mode(sparse_mode)
    stream = batchify(train_tokens, batch_size)  # [B, N]
    with _eval_mode(model):
        if sparse_units is not None:
            call, zero = sparse_adaptation(model, sparse_units, sparse_mode)
            params = {"adaptation": zero}  # one M for the whole batch, [1, H, H]
            oracle = _direct_oracle(lambda p, x, s: call(p["adaptation"], x, s), per_stream=False)
        else:
            names = adapted_parameters(model, adapt)
            named = dict(model.named_parameters())
            params = {n: named[n].detach() for n in names}
            frozen = {n: p.detach() for n, p in named.items() if n not in params}
            oracle = _direct_oracle(lambda p, x, s: functional_call(model, {**frozen, **p}, (x, s)), per_stream=False)
        total = {k: torch.zeros_like(v) for k, v in params.items()}
        state, batches = None, 0
        for inputs, targets in bptt_windows(stream, bptt):
            if max_batches is not None and batches >= max_batches:
                break
            grads, _, state = oracle(params, inputs, targets, state)
            for k, g in grads.items():
                total[k].addcmul_(g, g)
            batches += 1
    return {k: v / batches for k, v in total.items()}
