"""Evaluation of language models, Melis thesis §2.2.2 and §4.6.

* Deterministic dropout: dropout off (eval mode), inverted scaling makes no
  correction necessary.
* Monte Carlo dropout (Gal & Ghahramani, 2016): probabilities averaged over N
  independently sampled dropout masks, optionally with scaled dropout rates.
* Softmax temperature chosen to maximise validation likelihood. The NLL is
  convex in the inverse temperature β = 1/T (a linear term plus a log-sum-exp
  of a linear function of β), so a bounded scalar minimisation over β finds the
  global optimum.

``batches`` are iterables of (inputs [B, T], targets [B, T]) pairs of
consecutive BPTT windows; the recurrent state is carried across them.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import torch
import torch.nn.functional as F
from scipy.optimize import minimize_scalar
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
        chunk = logits[start : start + chunk_size].double() / temperature
        total += F.cross_entropy(chunk, targets[start : start + chunk_size], reduction="sum").item()
    return total / max(targets.numel(), 1)


def optimal_temperature(
    logits: Tensor, targets: Tensor, bounds: tuple[float, float] = (0.05, 20.0), xatol: float = 1e-5
) -> float:
    """Softmax temperature in ``bounds`` minimising the validation NLL of cached ``logits`` [N, V].

    Minimises over β = 1/T, where the objective is convex; returns T = 1 if the
    optimiser's answer is not at least as good as T = 1.
    """
    low, high = bounds
    if not 0 < low <= 1.0 <= high:
        raise ValueError(f"bounds must satisfy 0 < low <= 1 <= high, got {bounds}")
    result = minimize_scalar(
        lambda beta: nll_at_temperature(logits, targets, 1.0 / beta),
        bounds=(1.0 / high, 1.0 / low),
        method="bounded",
        options={"xatol": xatol},
    )
    temperature = 1.0 / float(result.x)
    if nll_at_temperature(logits, targets, temperature) > nll_at_temperature(logits, targets, 1.0):
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
