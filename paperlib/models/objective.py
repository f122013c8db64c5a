"""Multi-dropout-sample training objective, Melis thesis §4.3.

    ln p(w_t | w_<t) = ln( 1/D Σ_d p(w_t | w_<t, M^d_t) )

The D samples are computed in one batched pass: the batch is repeated D times
(sample-major: row d·B + b holds sample d of sequence b), every copy gets its own
independent dropout masks, and the per-token log-likelihoods are combined with a
log-mean-exp over the sample axis. With D = 1 this is ordinary cross-entropy.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def log_mean_exp(values: Tensor, dim: int = 0) -> Tensor:
    """ln(1/D Σ_d exp(values_d)) along ``dim``, computed stably."""
    return torch.logsumexp(values, dim=dim) - math.log(values.shape[dim])


def token_log_likelihood(logits: Tensor, targets: Tensor) -> Tensor:
    """ln p(target) per position: ``logits`` [..., V], ``targets`` [...] -> [...]."""
    flat = -F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    return flat.view(targets.shape)


def multi_sample_nll(logits: Tensor, targets: Tensor, num_samples: int, reduction: str = "mean") -> Tensor:
    """Negative multi-sample log-likelihood of Melis thesis §4.3.

    ``logits`` [D·B, T, V] (sample-major rows, as produced by ``tokens.repeat(D, 1)``),
    ``targets`` [B, T]. Returns the mean over tokens (``reduction="mean"``), the
    sum (``"sum"``) or the per-token values [B, T] (``"none"``).
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be one of ('mean', 'sum', 'none'), got {reduction!r}")
    batch, steps = targets.shape
    if num_samples < 1 or logits.shape[0] != num_samples * batch:
        raise ValueError(
            f"logits have {logits.shape[0]} rows but num_samples * batch = {num_samples} * {batch}; "
            "repeat the batch num_samples times (tokens.repeat(num_samples, 1))"
        )
    log_p = token_log_likelihood(logits, targets.repeat(num_samples, 1))  # [D*B, T]
    nll = -log_mean_exp(log_p.view(num_samples, batch, steps), dim=0)  # [B, T]
    if reduction == "mean":
        return nll.mean()
    if reduction == "sum":
        return nll.sum()
    return nll


def multi_sample_loss(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    num_samples: int,
    state: Any = None,
    masks: Any = None,
) -> tuple[Tensor, Any]:
    """Forward ``model`` once on the batch repeated ``num_samples`` times and return (loss, state).

    The state has batch size D·B: each dropout sample keeps its own recurrent
    state across BPTT windows. In training mode the model draws independent
    masks for each of the D·B rows; explicit ``masks`` (for D·B rows) override that.
    """
    repeated = inputs.repeat(num_samples, 1)  # [D*B, T]
    if masks is None:
        logits, state = model(repeated, state)
    else:
        logits, state = model(repeated, state, masks)
    return multi_sample_nll(logits, targets, num_samples), state
