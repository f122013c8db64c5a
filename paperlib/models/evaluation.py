"""Evaluation of language models, Melis thesis §2.2.2 and §4.6.

* Deterministic dropout: dropout off (eval mode), inverted scaling makes no
  correction necessary.
* Monte Carlo dropout (Gal & Ghahramani, 2016): probabilities averaged over N
  independently sampled dropout masks, optionally with scaled dropout rates.
* Softmax temperature chosen to maximise validation likelihood. The NLL is
  convex in the inverse temperature β = 1/T (a linear term plus a log-sum-exp
  of a linear function of β), so a Newton iteration over β finds the global
  optimum.

``batches`` are iterables of (inputs [B, T], targets [B, T]) pairs of
consecutive BPTT windows; the recurrent state is carried across them.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from paperlib.models.objective import token_log_likelihood

Batches = Iterable[tuple[Tensor, Tensor]]


@contextmanager
def _mode(model: nn.Module, training: bool) -> Iterator[None]:
    was_training = model.training
    model.train(training)
    try:
        yield
    finally:
        model.train(was_training)


def nll_at_temperature(logits: Tensor, targets: Tensor, temperature: float = 1.0, chunk_size: int = 8192) -> float:
    """Mean negative log-likelihood of softmax(logits / T); ``logits`` [N, V], ``targets`` [N]."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    total = 0.0
    for start in range(0, logits.shape[0], chunk_size):
        chunk = logits[start : start + chunk_size] / temperature  # float32: sums are accumulated in Python floats
        total += F.cross_entropy(chunk, targets[start : start + chunk_size], reduction="sum").item()
    return total / max(targets.numel(), 1)


@torch.no_grad()
def _nll_derivatives(logits: Tensor, targets: Tensor, beta: float, chunk_size: int) -> tuple[float, float, float]:
    """NLL(β) of softmax(β z) and its first two derivatives in β: E_p[z] − z_y and Var_p[z] (means over tokens)."""
    nll = d1 = d2 = 0.0
    for start in range(0, logits.shape[0], chunk_size):
        z = logits[start : start + chunk_size].double()
        y = targets[start : start + chunk_size, None]
        log_p = torch.log_softmax(beta * z, dim=-1)
        p = log_p.exp()
        mean_z = (p * z).sum(-1)
        nll -= log_p.gather(1, y).sum().item()
        d1 += (mean_z - z.gather(1, y).squeeze(1)).sum().item()
        d2 += ((p * z * z).sum(-1) - mean_z**2).sum().item()
    n = max(targets.numel(), 1)
    return nll / n, d1 / n, d2 / n


def optimal_temperature(
    logits: Tensor, targets: Tensor, bounds: tuple[float, float] = (0.05, 20.0), tol: float = 1e-7,
    chunk_size: int = 4096,
) -> float:
    """Softmax temperature in ``bounds`` minimising the validation NLL of cached ``logits`` [N, V].

    The NLL is convex in β = 1/T with derivative E_p[z] − z_y and second derivative Var_p[z], so a
    Newton iteration on β (kept inside the bounds) converges in a handful of passes over the logits.
    Returns T = 1 if the answer is not at least as good as T = 1.
    """
    low, high = bounds
    if not 0 < low <= 1.0 <= high:
        raise ValueError(f"bounds must satisfy 0 < low <= 1 <= high, got {bounds}")
    logits = logits.reshape(-1, logits.shape[-1])
    targets = targets.reshape(-1)
    beta_low, beta_high = 1.0 / high, 1.0 / low
    beta = 1.0
    nll_at_one = None
    for _ in range(50):
        nll, d1, d2 = _nll_derivatives(logits, targets, beta, chunk_size)
        nll_at_one = nll if nll_at_one is None else nll_at_one
        # Newton step, with bisection-like damping at the bounds (d2 > 0 by convexity unless p is one-hot)
        step = d1 / d2 if d2 > 1e-12 else math.copysign(0.5 * beta, d1)
        new_beta = min(max(beta - step, beta_low), beta_high)
        if abs(new_beta - beta) < tol * max(1.0, beta):
            beta = new_beta
            break
        beta = new_beta
    temperature = 1.0 / beta
    if _nll_derivatives(logits, targets, beta, chunk_size)[0] > nll_at_one:
        return 1.0
    return temperature


@torch.no_grad()
def collect_logits(model: nn.Module, batches: Batches, state: Any = None) -> tuple[Tensor, Tensor]:
    """Deterministic-dropout logits [N, V] and targets [N] over all batches (for temperature tuning)."""
    all_logits, all_targets = [], []
    with _mode(model, False):
        for inputs, targets in batches:
            logits, state = model(inputs, state)
            all_logits.append(logits.reshape(-1, logits.shape[-1]))
            all_targets.append(targets.reshape(-1))
    return torch.cat(all_logits), torch.cat(all_targets)


@torch.no_grad()
def evaluate_nll(model: nn.Module, batches: Batches, temperature: float = 1.0, state: Any = None) -> float:
    """Mean per-token NLL (nats) with deterministic dropout (eval mode) at softmax ``temperature``."""
    total, count = 0.0, 0
    with _mode(model, False):
        for inputs, targets in batches:
            logits, state = model(inputs, state)
            log_p = token_log_likelihood(logits / temperature, targets)
            total -= log_p.sum().item()
            count += targets.numel()
    return total / max(count, 1)


@torch.no_grad()
def mc_dropout_log_likelihood(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    num_samples: int,
    states: list[Any] | None = None,
    chunk_size: int = 8,
    temperature: float = 1.0,
    rate_scale: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, list[Any]]:
    """ln(1/N Σ_n p(w_t | w_<t, M^n)) per token [B, T] for one batch, and the per-chunk states.

    Samples are processed ``chunk_size`` at a time as one batched pass (the batch
    repeated per sample, as in the multi-sample objective). ``states`` holds one
    state per chunk (each dropout sample keeps its own recurrent state). Models
    with ``sample_masks`` (the recurrent LMs) get explicit masks from
    ``generator`` with rates scaled by ``rate_scale``; other models (the
    Transformer) are run in training mode under ``no_grad``.
    """
    if num_samples < 1 or chunk_size < 1:
        raise ValueError(f"num_samples and chunk_size must be >= 1, got {num_samples}, {chunk_size}")
    explicit = hasattr(model, "sample_masks")
    if not explicit and (rate_scale != 1.0 or generator is not None):
        raise ValueError("rate_scale and generator need a model with sample_masks (the recurrent LMs)")
    sizes = [min(chunk_size, num_samples - s) for s in range(0, num_samples, chunk_size)]
    states = list(states) if states is not None else [None] * len(sizes)
    batch, steps = inputs.shape
    log_total: Tensor | None = None
    with _mode(model, not explicit):
        for index, size in enumerate(sizes):
            repeated = inputs.repeat(size, 1)  # [size*B, T]
            if explicit:
                masks = model.sample_masks(size * batch, steps, generator=generator, rate_scale=rate_scale)
                logits, states[index] = model(repeated, states[index], masks)
            else:
                logits, states[index] = model(repeated, states[index])
            log_p = token_log_likelihood(logits / temperature, targets.repeat(size, 1))  # [size*B, T]
            chunk_total = torch.logsumexp(log_p.view(size, batch, steps), dim=0)
            log_total = chunk_total if log_total is None else torch.logaddexp(log_total, chunk_total)
    return log_total - math.log(num_samples), states


def mc_dropout_nll(
    model: nn.Module,
    batches: Batches,
    num_samples: int,
    chunk_size: int = 8,
    temperature: float = 1.0,
    rate_scale: float = 1.0,
    generator: torch.Generator | None = None,
) -> float:
    """Mean per-token NLL (nats) under Monte Carlo dropout averaging of probabilities over ``num_samples`` masks."""
    total, count = 0.0, 0
    states = None
    for inputs, targets in batches:
        log_p, states = mc_dropout_log_likelihood(
            model, inputs, targets, num_samples, states, chunk_size, temperature, rate_scale, generator
        )
        total -= log_p.sum().item()
        count += targets.numel()
    return total / max(count, 1)
