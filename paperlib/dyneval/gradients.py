"""The gradients dynamic evaluation steps with: of one segment, for one stream (or a sparse M per stream) or
vmapped over streams with fast weights per stream (:mod:`paperlib.models.transformable` for paperlib's fused
layers), and their
mean squares over training batches, MS_g of the global RMS rule (Krause eq. 4.4)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap
from torch.utils._pytree import tree_flatten, tree_unflatten

from paperlib.data.batching import batchify, bptt_windows
from paperlib.dyneval.core import AdaptSpec, Params, _eval_mode, adapted_parameters
from paperlib.dyneval.sparse import _check_sparse_mode, sparse_adaptation
from paperlib.models.transformable import functorch_compatible
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
