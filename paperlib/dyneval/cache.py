"""Neural cache (Grave et al., 2017), the adaptive baseline of Krause thesis §2.2.1 and Tables 4.1-4.3.

Every past hidden state h_i is stored with the token that followed it, (h_i, x_{i+1}); the next-token
distribution mixes the model with a cache distribution that points at tokens whose stored hidden
states resemble the current one (Krause eq. 2.3):

    p_cache(w | h_{1:t}) ∝ Σ_{i ∈ window(t)} [x_{i+1} = w] exp(θ h_tᵀ h_i)
    p(w | x_{1:t})       = (1 - λ) p_model(w | x_{1:t}) + λ p_cache(w | h_{1:t})

with three hyperparameters: the cache length L (window(t) = the last L positions before t), the
flatness θ (θ = 0 makes p_cache the empirical distribution of the cached tokens) and the mixing
weight λ (λ = 0 is the model itself).

Reading of the seeds: h_t is the vector the LM feeds to its output embedding (the last layer's
output, after the projection when the model has one); it is taken with a forward pre-hook on the
model's ``decoder``, so any LM of the paperlib interface with a ``decoder`` module works. At the first
position the cache is empty and the model's distribution is used unmixed (Grave et al. do the same).
Probabilities are mixed in float64 so that λ → 0 reproduces the model to the last bit we can see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.data.batching import bptt_windows


@dataclass
class CacheInputs:
    """What the cache needs from one pass of the model over the streams (computed once, reused for tuning).

    ``features`` [S, N, D] are the decoder inputs h_t, ``targets`` [S, N] the next tokens x_{t+1} and
    ``model_log_probs`` [S, N] the model's log p(x_{t+1} | x_{1:t}).
    """

    features: Tensor
    targets: Tensor
    model_log_probs: Tensor


@dataclass
class CacheTuning:
    """Grid search result of :func:`tune_neural_cache` on validation data."""

    cache_length: int
    theta: float
    lam: float
    nll: float
    trials: list[dict[str, float]] = field(default_factory=list)


def _as_streams(tokens: Tensor) -> Tensor:
    if tokens.dim() == 1:
        return tokens.unsqueeze(0)
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be [T] or [S, T], got shape {tuple(tokens.shape)}")
    return tokens


@torch.no_grad()
def collect_cache_inputs(model: nn.Module, tokens: Tensor, window: int = 256, state: Any = None) -> CacheInputs:
    """Run ``model`` (eval mode) over ``tokens`` [T] or [S, T] in windows, capturing the decoder inputs.

    The recurrent state is carried from window to window, so the result equals one pass over the
    whole stream. Returns tensors with a leading stream dimension S (S = 1 for a single stream).
    """
    decoder = getattr(model, "decoder", None)
    if not isinstance(decoder, nn.Module):
        raise ValueError("the neural cache needs an LM with a `decoder` module (its input is the cached h_t)")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    streams = _as_streams(tokens)
    captured: list[Tensor] = []
    handle = decoder.register_forward_pre_hook(lambda module, args: captured.append(args[0].detach()))
    features, targets, log_probs = [], [], []
    was_training = model.training
    model.eval()
    try:
        for inputs, target in bptt_windows(streams, window):
            logits, state = model(inputs, state)  # [S, n, V]
            features.append(captured.pop())
            targets.append(target)
            log_probs.append(torch.log_softmax(logits.double(), dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1))
    finally:
        handle.remove()
        model.train(was_training)
    return CacheInputs(torch.cat(features, 1), torch.cat(targets, 1), torch.cat(log_probs, 1))


def _window_weights(features: Tensor, start: int, stop: int, cache_length: int, theta: float) -> tuple[Tensor, Tensor]:
    """Attention of queries start..stop-1 over their cache windows; returns (weights [S, C, K], key offset).

    Keys are positions max(0, start - L) .. stop - 2; query t may use keys i with t - L <= i <= t - 1.
    Rows with an empty window (t = 0) are all zero.
    """
    first = max(0, start - cache_length)
    queries = features[:, start:stop]  # [S, C, D]
    keys = features[:, first : max(first, stop - 1)]  # [S, K, D]
    t = torch.arange(start, stop, device=features.device).unsqueeze(1)  # [C, 1]
    i = torch.arange(first, first + keys.shape[1], device=features.device).unsqueeze(0)  # [1, K]
    allowed = (i <= t - 1) & (i >= t - cache_length)  # [C, K]
    scores = theta * torch.einsum("scd,skd->sck", queries.double(), keys.double())
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # empty windows: softmax of all -inf is nan
    return weights, first


def cache_target_probabilities(inputs: CacheInputs, cache_length: int, theta: float, chunk: int = 512) -> Tensor:
    """p_cache(x_{t+1} | h_{1:t}) of Krause eq. (2.3) for every position, [S, N] (0 where the cache is empty)."""
    _check_cache_args(cache_length, theta)
    features, targets = inputs.features, inputs.targets
    steps = targets.shape[1]
    out = torch.zeros(targets.shape, dtype=torch.float64, device=targets.device)
    for start in range(0, steps, chunk):
        stop = min(start + chunk, steps)
        weights, first = _window_weights(features, start, stop, cache_length, theta)  # [S, C, K]
        keys_next = targets[:, first : first + weights.shape[-1]]  # x_{i+1} of each cached h_i, [S, K]
        hit = keys_next.unsqueeze(1) == targets[:, start:stop].unsqueeze(2)  # [S, C, K]
        out[:, start:stop] = (weights * hit).sum(-1)
    return out


def cache_distribution(inputs: CacheInputs, vocab_size: int, cache_length: int, theta: float) -> Tensor:
    """The full cache distribution [S, N, V] (eq. 2.3); rows with an empty cache are zero. For small tests."""
    _check_cache_args(cache_length, theta)
    weights, first = _window_weights(inputs.features, 0, inputs.targets.shape[1], cache_length, theta)
    keys_next = inputs.targets[:, first : first + weights.shape[-1]]  # [S, K]
    one_hot = F.one_hot(keys_next, vocab_size).to(weights.dtype)  # [S, K, V]
    return weights @ one_hot


def mix_log_probs(model_log_probs: Tensor, cache_probs: Tensor, lam: float, cache_nonempty: Tensor) -> Tensor:
    """log((1 - λ) p_model + λ p_cache), the model alone where the cache is empty."""
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam (the cache mixing weight λ) must lie in [0, 1], got {lam}")
    model_log_probs = model_log_probs.double()
    if lam == 0.0:
        return model_log_probs
    keep = math.log(1.0 - lam) if lam < 1.0 else -math.inf
    mixed = torch.logaddexp(model_log_probs + keep, cache_probs.log() + math.log(lam))
    return torch.where(cache_nonempty, mixed, model_log_probs)


def neural_cache_losses_from(inputs: CacheInputs, cache_length: int, theta: float, lam: float) -> Tensor:
    """Per-token NLL [S, N] (nats) of the cache-augmented model from precomputed :class:`CacheInputs`."""
    cache = cache_target_probabilities(inputs, cache_length, theta)
    nonempty = torch.arange(inputs.targets.shape[1], device=cache.device).unsqueeze(0) > 0
    return -mix_log_probs(inputs.model_log_probs, cache, lam, nonempty.expand_as(cache))


def neural_cache_losses(
    model: nn.Module,
    tokens: Tensor,
    *,
    cache_length: int,
    theta: float,
    lam: float,
    window: int = 256,
    state: Any = None,
) -> Tensor:
    """Per-token NLL (nats) of ``model`` + neural cache on ``tokens`` [T] -> [T-1], or [S, T] -> [S, T-1].

    Each stream has its own cache. ``cache_length`` is L, ``theta`` the flatness θ (ω in Krause eq. 2.3),
    ``lam`` the mixing weight λ.
    """
    _check_cache_args(cache_length, theta)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam (the cache mixing weight λ) must lie in [0, 1], got {lam}")
    inputs = collect_cache_inputs(model, tokens, window, state)
    losses = neural_cache_losses_from(inputs, cache_length, theta, lam)
    return losses[0] if tokens.dim() == 1 else losses


def tune_neural_cache(
    model: nn.Module,
    tokens: Tensor,
    *,
    cache_lengths: Sequence[int],
    thetas: Sequence[float],
    lams: Sequence[float],
    window: int = 256,
) -> CacheTuning:
    """Grid search of (L, θ, λ) by mean validation NLL; the model runs once, the grid reuses its features."""
    if not cache_lengths or not thetas or not lams:
        raise ValueError("cache_lengths, thetas and lams must each hold at least one value")
    inputs = collect_cache_inputs(model, tokens, window)
    trials = []
    for length in cache_lengths:
        for theta in thetas:
            cache = cache_target_probabilities(inputs, length, theta)
            nonempty = (torch.arange(cache.shape[1], device=cache.device) > 0).unsqueeze(0).expand_as(cache)
            for lam in lams:
                nll = float(-mix_log_probs(inputs.model_log_probs, cache, lam, nonempty).mean())
                trials.append({"cache_length": length, "theta": theta, "lam": lam, "nll": nll})
    best = min(trials, key=lambda r: r["nll"])
    return CacheTuning(int(best["cache_length"]), best["theta"], best["lam"], best["nll"], trials)


def _check_cache_args(cache_length: int, theta: float) -> None:
    if not isinstance(cache_length, int) or cache_length < 1:
        raise ValueError(f"cache_length must be a positive integer, got {cache_length!r}")
    if not math.isfinite(theta) or theta < 0:
        raise ValueError(f"theta (the cache flatness θ) must be finite and >= 0, got {theta}")
