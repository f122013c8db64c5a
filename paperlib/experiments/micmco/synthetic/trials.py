"""One synthetic trial's model, training (§5.C) and evaluation (IWAE NLL and mutual information, K = 100)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from torch.distributions import Distribution

from paperlib.estimators import (
    PATHWISE_ESTIMATORS, Surrogates, analytic_elbo, iwae_bound, mutual_information, sample, surrogates,
)
from paperlib.symbol_vae import CategoricalVAE, GaussianVAE, LatentVariableModel, VQVAE
from paperlib.experiments.micmco.synthetic.design import Configuration, _SURROGATE_OF_BASE


def build_model(config: Configuration, vocab_size: int, hidden: int = 128, latent_dim: int = 40,
                num_latents: int = 8, categories: int = 10,
                params: Mapping[str, float] | None = None) -> nn.Module:
    """The §5.7.1 model of ``config`` (for the VQ-VAE, latent sizes, beta and decay come from ``params``)."""
    if config.latent == "gaussian":
        return GaussianVAE(vocab_size, hidden, latent_dim)
    if config.latent == "categorical":
        return CategoricalVAE(vocab_size, hidden, num_latents, categories)
    params = params or {}
    return VQVAE(vocab_size, hidden, int(params.get("num_latents", 1)), int(params.get("categories", 2)),
                 float(params.get("vq_beta", 0.25)), 1.0 - float(params.get("vq_one_minus_decay", 0.01)))


def latent_samples(q: Distribution, config: Configuration, generator: torch.Generator | None = None) -> Tensor:
    """The K samples z ~ q(z|x) of one training step: reparameterised for pathwise estimators (and the ELBO).

    With ``generator`` they are drawn from it (:func:`~paperlib.estimators.sample`), the same numbers
    ``rsample``/``sample`` draw from the default generator in the same state.
    """
    pathwise = config.base == "elbo" or _SURROGATE_OF_BASE[config.base] in PATHWISE_ESTIMATORS
    return sample(q, (config.num_samples,), pathwise, generator)  # [K, B, ...]


def objective_surrogates(model: LatentVariableModel, config: Configuration, params: Mapping[str, float],
                         q: Distribution, z: Tensor, log_px_z: Tensor) -> Surrogates:
    """Surrogates (value = objective per example ``[B]``) given the step's posterior, samples and ln p(x|z)."""
    if config.base == "elbo":  # beta-VAE (5.19) with analytic KL, beta = 1 - lambda (Prop. 13)
        value = analytic_elbo(log_px_z, q, model.prior(), beta=1.0 - float(params["lam"]))
        return Surrogates(value, value)
    estimator = _SURROGATE_OF_BASE[config.base]
    return surrogates(estimator, config.objective_fn(params), log_px_z, model.log_prior(z), z, q)


def step_surrogates(model: LatentVariableModel, x: Tensor, config: Configuration,
                    params: Mapping[str, float]) -> Surrogates:
    """Surrogates (value = objective per example ``[B]``) of one training step of a VAE configuration."""
    q = model.posterior(x)
    z = latent_samples(q, config)
    return objective_surrogates(model, config, params, q, z, model.log_likelihood(z, x))


@dataclass
class TrainResult:
    """What :func:`train` did: steps taken, wall time, the objective at the end, and whether it diverged."""

    steps: int
    seconds: float
    final_objective: float  # mean training objective over the last 10% of steps (VAE) or -loss (VQ-VAE)
    diverged: bool


def train(model: nn.Module, config: Configuration, params: Mapping[str, float], batches: Tensor,
          score_at: Sequence[int] = (), score: Callable[[int], None] | None = None) -> TrainResult:
    """Adam (beta_1 = 0, beta_2 = 0.999, eps = 1e-8; §5.C) over ``batches`` ``[steps, B]`` of symbols.

    Stops early, flagged ``diverged``, when the objective becomes non-finite. ``score(n)`` is called, with the
    model in eval mode, after each step count n in ``score_at`` (a scale ladder scores one run at several budgets;
    it must leave the random state as it found it for the run to continue unchanged).
    """
    started = time.perf_counter()
    optimizer = torch.optim.Adam(model.parameters(), lr=float(params["learning_rate"]), betas=(0.0, 0.999), eps=1e-8)
    model.train()
    tail = max(1, len(batches) // 10)
    tail_values: list[float] = []
    for step, x in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        if isinstance(model, VQVAE):
            loss, _ = model.loss(x)
            loss.backward()
            value = -loss.detach()
        else:
            s = step_surrogates(model, x, config, params)
            s.backward(model.model_parameters(), model.encoder_parameters())
            value = s.model.detach().mean()
        value_f = float(value)
        if not math.isfinite(value_f):
            return TrainResult(step + 1, time.perf_counter() - started, value_f, True)
        optimizer.step()
        if step >= len(batches) - tail:
            tail_values.append(value_f)
        if score is not None and step + 1 in score_at:
            model.eval()
            score(step + 1)
            model.train()
    model.eval()
    final = float(np.mean(tail_values)) if tail_values else float("nan")
    return TrainResult(len(batches), time.perf_counter() - started, final, False)


@torch.no_grad()
def evaluate(model: nn.Module, symbols: Tensor, num_samples: int = 100,
             max_elements: int = 2**24) -> tuple[float, float]:
    """``(NLL, MI)`` averaged over ``symbols`` (§5.7.1): -IWAE (5.8) and U^K - ln p^K (5.9), K = ``num_samples``.

    Evaluates in chunks of symbols so that the ``[K, chunk, V]`` logits stay below ``max_elements`` numbers.
    """
    model.eval()
    vocab = model.encoder.embedding.num_embeddings
    chunk = max(1, max_elements // (num_samples * vocab))
    nll, mi = [], []
    for x in symbols.split(chunk):
        log_px_z, log_pz, log_qz = model.log_densities(x, num_samples)  # [K, b] each
        nll.append(-iwae_bound(log_px_z, log_pz, log_qz))
        mi.append(mutual_information(log_px_z, log_pz, log_qz))
    return float(torch.cat(nll).mean()), float(torch.cat(mi).mean())
