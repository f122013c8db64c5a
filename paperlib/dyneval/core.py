"""What every part of dynamic evaluation shares: the result of an evaluation (per-token losses, final weights
and state), which parameters are adapted, and the shapes of the token streams."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

import torch
from torch import Tensor, nn


LN2 = math.log(2.0)

Params = dict[str, Tensor]
AdaptSpec = Sequence[str] | Callable[[str], bool] | None


@dataclass
class DynamicEvalResult:
    """Per-token losses (nats) of one evaluation, ``losses`` [T-1] or [S, T-1], and the final weights/state.

    ``params`` are the local weights θ_l after the last update (for sparse evaluation: M) and ``state``
    the final recurrent state, so evaluation can be inspected or continued.
    """

    losses: Tensor
    params: Params = field(default_factory=dict)
    state: Any = None

    def mean_nll(self) -> float:
        return float(self.losses.double().mean())

    def perplexity(self) -> float:
        return math.exp(self.mean_nll())

    def bits_per_token(self) -> float:
        return self.mean_nll() / LN2

    def block_means(self, block: int) -> tuple[list[float], list[int]]:
        """:func:`block_means` of this evaluation's losses (one stream)."""
        return block_means(self.losses, block)

    def curve(self, bin_size: int = 1) -> Tensor:
        """Loss against position: averaged over streams, then over bins of ``bin_size`` positions."""
        losses = self.losses.double().reshape(-1, self.losses.shape[-1]).mean(0)  # [N]
        usable = losses.shape[0] // bin_size * bin_size
        return losses[:usable].view(-1, bin_size).mean(1)


def block_means(losses: Tensor, block: int) -> tuple[list[float], list[int]]:
    """One stream's per-token losses ``[N]`` as the mean of each block of ``block`` consecutive tokens (the last
    block may be shorter) and each block's token count: the units over which a paired bootstrap compares two
    evaluations of the same text. Blocks rather than tokens, since dynamic evaluation makes neighbouring tokens'
    losses depend on each other."""
    if losses.dim() != 1:
        raise ValueError(f"block_means needs one stream's losses [N], got shape {tuple(losses.shape)}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    chunks = losses.double().split(block)
    return [float(c.mean()) for c in chunks], [c.numel() for c in chunks]


def adapted_parameters(model: nn.Module, adapt: AdaptSpec = None) -> list[str]:
    """Names of the parameters dynamic evaluation adapts: all trainable ones, a list, or a predicate's choice.

    Tied weights appear once (under their first name), as in ``model.named_parameters()``.
    """
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    if adapt is None:
        return names
    if callable(adapt):
        chosen = [n for n in names if adapt(n)]
    else:
        unknown = sorted(set(adapt) - set(names))
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}; valid names: {', '.join(names)}")
        chosen = [n for n in names if n in set(adapt)]
    if not chosen:
        raise ValueError("adapt selects no parameter")
    return chosen


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    """``model`` in eval mode (no dropout) for the block. Dynamic evaluation takes gradients through the model in
    eval mode, and on CUDA cuDNN's fused RNN refuses a backward pass after an eval-mode forward ("cudnn RNN backward
    can only be called in training mode"). So on CUDA the ``nn.LSTM`` / ``nn.GRU`` modules inside stay in training
    mode where that is the same function (one layer, or no dropout between layers: their modes differ in nothing
    else), and cuDNN is switched off for the block only if one with inter-layer dropout remains (PyTorch's own
    kernels then). On a CPU nothing but the mode changes."""
    modes, cudnn = [(m, m.training) for m in model.modules()], torch.backends.cudnn.enabled
    model.eval()
    if any(p.is_cuda for p in model.parameters()):
        recurrent = [m for m in model.modules() if isinstance(m, nn.RNNBase)]
        for module in recurrent:
            if module.num_layers == 1 or module.dropout == 0:
                module.train()
        if any(not m.training for m in recurrent):
            torch.backends.cudnn.enabled = False  # only this flag: the others (TF32, determinism) stay as configured
    try:
        yield
    finally:
        torch.backends.cudnn.enabled = cudnn
        for module, mode in modes:  # each module as it was: a nested block hands its caller's modes back
            module.training = mode


def _as_streams(tokens: Tensor) -> Tensor:
    if tokens.dim() not in (1, 2) or tokens.shape[-1] < 2:
        raise ValueError(f"tokens must be [T] or [S, T] with T >= 2, got shape {tuple(tokens.shape)}")
    return tokens.unsqueeze(0) if tokens.dim() == 1 else tokens
