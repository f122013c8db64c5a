"""MICMCO on synthetic data: rate vs data-fit Pareto frontiers, Melis thesis §5.7.1, §5.A, §5.B.3, §5.C.

Every data point is one symbol drawn uniformly from a vocabulary of V = 10,000, so the optimal NLL is
ln V ≈ 9.210 and a model can reach it while ignoring its latents; the experiments ask how much of the
latents' capacity (the mutual information I_p(X, Z), up to H(X) = ln V) each estimator of the objective
(5.5)/(5.6) can use before the data fit suffers. This module holds, in order:

**Models** (§5.7.1): :class:`GaussianVAE` (40 continuous latents, N(f(o), diag(exp(g(o)))) posterior, standard
normal prior), :class:`CategoricalVAE` (8 categorical latents of 10 classes, q ∝ exp(o), uniform prior) and the
:class:`VQVAE` baseline of §5.A (van den Oord et al. 2017). Encoders embed the symbol and apply two 128-unit tanh
layers; decoders mirror them with a final softmax over the vocabulary (one hidden layer for categorical latents,
which are embedded). All share ``posterior``/``log_likelihood``/``log_prior`` and :meth:`log_densities`.

**Training** (§5.C): one step draws a batch of symbols, evaluates the chosen objective (KL (5.11), Renyi (5.15),
power (5.18), or the beta-VAE with analytic KL for the "ELBO" base estimator) with the chosen gradient estimator of
:mod:`paperlib.estimators` and sample counts (including the asymmetric 16/1 and 1/16 of Figs. 5.4/5.7), and takes
an Adam step with beta_1 = 0, beta_2 = 0.999, eps = 1e-8. :func:`evaluate` returns the NLL by IWAE and the mutual
information by :func:`~paperlib.estimators.mutual_information`, both with K = 100, averaged over a fixed set of
evaluation symbols.

**Frontiers**: :func:`pareto_front` (non-dominated points, minimise NLL, maximise MI), :func:`hypervolume` (area
dominated by a frontier within a reference box) and :func:`nll_at_mi` (the frontier's NLL at given MI levels, by
linear interpolation), plus :func:`claim_verdicts`, the explicit rules deciding which of the thesis' claims our
frontiers reproduce.

**Studies**: every configuration (:data:`CONFIGURATIONS`, grouped by thesis figure in :data:`FIGURES`) is tuned by an
Optuna multi-objective study over the ranges of Table 5.2 (:func:`search_space`); :func:`run_study` is resumable
from a SQLite file, and :func:`run_micmco_synthetic` runs every study of a ``params.yaml`` profile and writes
``results/micmco_synthetic.json``.

Departures from the thesis (which does not give them, or where we chose differently):

- Batch size, number of optimisation steps and the number of tuning trials are not given for the synthetic task;
  they are ``params.yaml`` settings (the ``cpu`` profile also shrinks the vocabulary, see there).
- The thesis tunes with batched Gaussian-process bandits (Golovin et al. 2017). We start each study with a scrambled
  Halton design of ``startup_trials`` points (enqueued one by one, so a resumed study continues the same sequence)
  and continue with Optuna's GP sampler (log expected hypervolume improvement for two objectives).
- Table 5.2 labels the alpha range [0.86, 16] (log) "power objective only", while §5.7.2 says alpha is also tuned for
  the Renyi objective; we use the same range for both. The VQ decay range [0.9, 0.99999] "log" is taken as
  log-uniform in 1 - decay in [1e-5, 0.1].
- With the analytic-KL "ELBO" base estimator the KL and Renyi objectives both equal the beta-VAE with
  beta = 1 - lambda exactly (Prop. 13 with the KL in closed form; the Renyi divergence estimate (5.16) becomes the
  analytic KL for every alpha), so one study ("elbo") stands for both markers of Figs. 5.2/5.3.
- The VQ-VAE posterior is deterministic and its prior uniform, so the MI estimate (U^K - ln p^K with samples from q)
  is exactly L ln C and the IWAE NLL is -ln p(x|z_q) + L ln C for every K ("the KL cost ... is fixed", §5.A); we
  evaluate it with one sample. Codebooks are per latent (so the decoder can sum the L code vectors, as it sums the
  embeddings of categorical latents) and updated by exponential moving averages with Laplace smoothing
  (van den Oord et al. 2017, appendix).
- Figs. 5.26/5.27 do not state the sample count of the power objective; we use 16 samples (the best KL/Renyi runs).
- MI estimates above H(X) = ln V (which only loose bounds produce) are capped at ln V for the tuner, the frontiers
  and the hypervolume; the raw estimate is kept in each trial record.
- "q(z|x) is proportional to exp(o)" with o the last encoder layer's output: for categorical latents we take that
  layer to be affine (8 x 10 unbounded logits), as f and g are for continuous ones; a tanh layer of width 128 could
  neither match the number of logits nor make q sharp.
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Distribution, Independent, Normal
from torch.nn import functional as F

from paperlib.experiments.code_hash import code_hash
from paperlib.experiments.config import register_experiment
from paperlib.data import uniform_symbols
from paperlib.device import cache_key
from paperlib.experiments.stage import setup_stage, stage_device
from paperlib.estimators import (
    PATHWISE_ESTIMATORS,
    MonteCarloObjective,
    Surrogates,
    analytic_elbo,
    iwae_bound,
    mutual_information,
    surrogates,
)

EXPERIMENT = "micmco_synthetic"

# ---------------------------------------------------------------------------------------------------
# models (§5.7.1)


def tanh_mlp(inputs: int, hidden: int, layers: int) -> nn.Sequential:
    """``layers`` densely connected tanh layers of width ``hidden``."""
    modules: list[nn.Module] = []
    for i in range(layers):
        modules += [nn.Linear(inputs if i == 0 else hidden, hidden), nn.Tanh()]
    return nn.Sequential(*modules)


class SymbolEncoder(nn.Module):
    """Embedding of the symbol, two tanh layers, and an affine head giving the posterior's parameters o."""

    def __init__(self, vocab_size: int, hidden: int, outputs: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.body = tanh_mlp(hidden, hidden, 2)
        self.head = nn.Linear(hidden, outputs)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(self.embedding(x)))  # [B, outputs]


def _symbol_log_likelihood(logits: Tensor, x: Tensor) -> Tensor:
    """ln softmax(logits)[x] for logits ``[K, B, V]`` and symbols ``[B]`` -> ``[K, B]``."""
    k, b, v = logits.shape
    targets = x.expand(k, b).reshape(-1)
    return -F.cross_entropy(logits.reshape(k * b, v), targets, reduction="none").view(k, b)


class LatentVariableModel(nn.Module, abc.ABC):
    """Shared interface: ``posterior(x)`` (batch ``[B]``), ``prior()``, ``log_prior(z)``, ``log_likelihood(z, x)``.

    ``z`` carries a leading sample dimension ``[K, B, ...]``; log densities are ``[K, B]``. Parameters whose name
    starts with ``encoder.`` belong to q; the rest to the generative model (needed by DReG's split backward).
    """

    encoder: SymbolEncoder

    @abc.abstractmethod
    def posterior(self, x: Tensor) -> Distribution:
        """q(z|x) with batch shape ``[B]``."""

    @abc.abstractmethod
    def prior(self) -> Distribution:
        """p(z) with batch shape ``[]``."""

    @abc.abstractmethod
    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        """ln p(x|z) for samples ``[K, B, ...]`` -> ``[K, B]``."""

    def log_prior(self, z: Tensor) -> Tensor:
        return self.prior().log_prob(z)  # [K, B]

    def encoder_parameters(self) -> list[nn.Parameter]:
        return list(self.encoder.parameters())

    def model_parameters(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if not name.startswith("encoder.")]

    @torch.no_grad()
    def log_densities(self, x: Tensor, num_samples: int) -> tuple[Tensor, Tensor, Tensor]:
        """``(ln p(x|z_k), ln p(z_k), ln q(z_k|x))`` at K samples of q, each ``[K, B]``, for evaluation."""
        q = self.posterior(x)
        z = q.sample((num_samples,))  # [K, B, ...]
        return self.log_likelihood(z, x), self.log_prior(z), q.log_prob(z)


class GaussianVAE(LatentVariableModel):
    """Continuous latents: q(z|x) = N(f(o), diag(exp(g(o)))), p(z) = N(0, I), decoder of two tanh layers (§5.7.1)."""

    def __init__(self, vocab_size: int, hidden: int = 128, latent_dim: int = 40) -> None:
        super().__init__()
        self.latent_dim = latent_dim
        self.encoder = SymbolEncoder(vocab_size, hidden, 2 * latent_dim)  # f and g: two affine maps of o
        self.decoder = nn.Sequential(tanh_mlp(latent_dim, hidden, 2), nn.Linear(hidden, vocab_size))
        self.register_buffer("zero", torch.zeros(()))

    def posterior(self, x: Tensor) -> Independent:
        loc, log_var = self.encoder(x).chunk(2, dim=-1)  # [B, D] each; g(o) is the log variance
        return Independent(Normal(loc, (0.5 * log_var).exp()), 1)

    def prior(self) -> Independent:
        standard = Normal(self.zero, self.zero + 1.0).expand((self.latent_dim,))
        return Independent(standard, 1)

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        return _symbol_log_likelihood(self.decoder(z), x)  # z: [K, B, D] -> [K, B]


class CategoricalVAE(LatentVariableModel):
    """Discrete latents: L categorical variables of C classes, q ∝ exp(o), uniform prior (§5.7.1).

    The decoder sums one embedding per (latent, class) and applies one tanh layer before the softmax.
    """

    def __init__(self, vocab_size: int, hidden: int = 128, num_latents: int = 8, categories: int = 10) -> None:
        super().__init__()
        self.num_latents, self.categories = num_latents, categories
        self.encoder = SymbolEncoder(vocab_size, hidden, num_latents * categories)
        self.latent_embedding = nn.Embedding(num_latents * categories, hidden)
        self.decoder = nn.Sequential(tanh_mlp(hidden, hidden, 1), nn.Linear(hidden, vocab_size))
        self.register_buffer("offsets", torch.arange(num_latents) * categories)  # [L]
        self.register_buffer("prior_logits", torch.zeros(num_latents, categories))  # [L, C]

    def posterior(self, x: Tensor) -> Independent:
        logits = self.encoder(x).view(-1, self.num_latents, self.categories)  # [B, L, C]
        return Independent(Categorical(logits=logits), 1)

    def prior(self) -> Independent:
        return Independent(Categorical(logits=self.prior_logits), 1)

    def log_likelihood(self, z: Tensor, x: Tensor) -> Tensor:
        h = self.latent_embedding(z + self.offsets).sum(-2)  # z: [K, B, L] -> [K, B, H]
        return _symbol_log_likelihood(self.decoder(h), x)


class VQVAE(nn.Module):
    """VQ-VAE baseline of §5.A (van den Oord et al. 2017) with the synthetic task's encoder and decoder.

    The encoder outputs L vectors z_e of size ``hidden``; each is replaced by its nearest code among C in its own
    codebook (z_q), the decoder sees the sum of the L code vectors through one tanh layer, and the encoder receives
    the decoder's gradient by the straight-through estimator. Codebooks follow exponential moving averages of the
    encoder outputs assigned to them (decay ``decay``, Laplace smoothing); the loss adds beta ||z_e - sg(z_q)||^2.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden: int = 128,
        num_latents: int = 1,
        categories: int = 2,
        beta: float = 0.25,
        decay: float = 0.99,
        epsilon: float = 1e-5,
    ) -> None:
        super().__init__()
        if not (0.0 < decay < 1.0) or beta < 0.0:
            raise ValueError(f"need 0 < decay < 1 and beta >= 0; got decay={decay}, beta={beta}")
        self.num_latents, self.categories, self.hidden = num_latents, categories, hidden
        self.beta, self.decay, self.epsilon = beta, decay, epsilon
        self.encoder = SymbolEncoder(vocab_size, hidden, num_latents * hidden)
        self.decoder = nn.Sequential(tanh_mlp(hidden, hidden, 1), nn.Linear(hidden, vocab_size))
        codebook = torch.randn(num_latents, categories, hidden) / math.sqrt(hidden)
        self.register_buffer("codebook", codebook)  # [L, C, H]
        self.register_buffer("ema_count", torch.zeros(num_latents, categories))  # [L, C]
        self.register_buffer("ema_sum", torch.zeros_like(codebook))  # [L, C, H]

    def encode(self, x: Tensor) -> Tensor:
        return self.encoder(x).view(-1, self.num_latents, self.hidden)  # [B, L, H]

    def quantize(self, z_e: Tensor) -> tuple[Tensor, Tensor]:
        """Nearest codes: indices ``[B, L]`` and code vectors ``[B, L, H]`` (no gradient)."""
        distances = torch.cdist(z_e.detach().transpose(0, 1), self.codebook)  # [L, B, C]
        index = distances.argmin(-1).T  # [B, L]
        codes = self.codebook[torch.arange(self.num_latents, device=z_e.device), index]  # [B, L, H]
        return index, codes

    def straight_through(self, z_e: Tensor, codes: Tensor) -> Tensor:
        """z_q in the forward pass, identity gradient to z_e in the backward pass."""
        return z_e + (codes - z_e).detach()

    def decode_log_likelihood(self, z_q: Tensor, x: Tensor) -> Tensor:
        """ln p(x|z_q) as ``[1, B]`` (one "sample") for code vectors ``[B, L, H]``."""
        logits = self.decoder(z_q.sum(-2)).unsqueeze(0)  # [1, B, V]
        return _symbol_log_likelihood(logits, x)

    @torch.no_grad()
    def update_codebook(self, z_e: Tensor, index: Tensor) -> None:
        """EMA codebook update (van den Oord et al. 2017, appendix A.1) with Laplace-smoothed counts.

        Both averages start at zero, so their common start-up bias (1 - decay^t) cancels in the ratio and a code
        is the (decayed) mean of the encoder outputs assigned to it; codes never assigned keep their initial value.
        """
        assign = F.one_hot(index, self.categories).to(z_e.dtype)  # [B, L, C]
        counts = assign.sum(0)  # [L, C]
        sums = torch.einsum("blc,blh->lch", assign, z_e.detach())  # [L, C, H]
        self.ema_count.mul_(self.decay).add_(counts, alpha=1.0 - self.decay)
        self.ema_sum.mul_(self.decay).add_(sums, alpha=1.0 - self.decay)
        total = self.ema_count.sum(-1, keepdim=True)  # [L, 1]
        smoothed = (self.ema_count + self.epsilon) / (total + self.categories * self.epsilon) * total  # [L, C]
        used = (self.ema_count > 0).unsqueeze(-1)  # [L, C, 1]
        self.codebook.copy_(torch.where(used, self.ema_sum / smoothed.clamp_min(1e-12).unsqueeze(-1), self.codebook))

    def loss(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(loss, ln p(x|z_q))``: mean over the batch of -ln p(x|z_q) + beta ||z_e - sg(z_q)||^2; updates codes."""
        z_e = self.encode(x)
        index, codes = self.quantize(z_e)
        log_lik = self.decode_log_likelihood(self.straight_through(z_e, codes), x)[0]  # [B]
        commitment = (z_e - codes).pow(2).sum((-1, -2))  # [B]
        if self.training:
            self.update_codebook(z_e, index)
        return (-log_lik + self.beta * commitment).mean(), log_lik

    @torch.no_grad()
    def log_densities(self, x: Tensor, num_samples: int) -> tuple[Tensor, Tensor, Tensor]:
        """One sample suffices: q is a point mass, so every estimate over K copies equals the one-sample value."""
        _, codes = self.quantize(self.encode(x))
        log_px_z = self.decode_log_likelihood(codes, x)  # [1, B]
        log_pz = log_px_z.new_full(log_px_z.shape, -self.num_latents * math.log(self.categories))
        return log_px_z, log_pz, torch.zeros_like(log_px_z)


# ---------------------------------------------------------------------------------------------------
# configurations of the thesis' figures

LATENTS = ("gaussian", "categorical", "vq")
BASE_ESTIMATORS = ("elbo", "iwae", "dreg", "reinforce", "vimco", "vq")
CONFIG_OBJECTIVES = ("kl", "renyi", "power", "beta_vae", "vq")
_SURROGATE_OF_BASE = {"iwae": "reparam", "dreg": "dreg", "reinforce": "reinforce", "vimco": "vimco"}
_LABEL_OF_BASE = {"elbo": "ELBO", "iwae": "IWAE", "dreg": "DReG", "reinforce": "REINFORCE", "vimco": "VIMCO",
                  "vq": "VQ-VAE"}


@dataclass(frozen=True)
class Configuration:
    """One curve of a thesis figure: latents, base estimator, objective and sample counts (lik / KL term)."""

    latent: str
    base: str
    objective: str
    lik_samples: int = 1
    kl_samples: int = 1

    def __post_init__(self) -> None:
        if self.latent not in LATENTS:
            raise ValueError(f"unknown latent type {self.latent!r}; choose one of {LATENTS}")
        if self.base not in BASE_ESTIMATORS:
            raise ValueError(f"unknown base estimator {self.base!r}; choose one of {BASE_ESTIMATORS}")
        if self.objective not in CONFIG_OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose one of {CONFIG_OBJECTIVES}")
        if min(self.lik_samples, self.kl_samples) < 1:
            raise ValueError("sample counts must be >= 1")

    @property
    def num_samples(self) -> int:
        """K drawn per step; the likelihood and KL terms use the first lik_samples / kl_samples of them."""
        return max(self.lik_samples, self.kl_samples)

    @property
    def samples_label(self) -> str:
        if self.lik_samples == self.kl_samples:
            return str(self.lik_samples)
        return f"{self.lik_samples}/{self.kl_samples}"

    @property
    def label(self) -> str:
        if self.base in ("elbo", "vq"):
            return _LABEL_OF_BASE[self.base]
        objective = {"kl": "KL", "renyi": "Rényi", "power": "power"}[self.objective]
        return f"{_LABEL_OF_BASE[self.base]} {self.samples_label} {objective}"

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        """The Table 5.2 hyperparameters tuned for this configuration."""
        if self.objective == "vq":
            return ("learning_rate", "num_latents", "categories", "vq_beta", "vq_one_minus_decay")
        if self.objective == "power":
            return ("learning_rate", "alpha")
        if self.objective == "renyi":
            return ("learning_rate", "lam", "alpha")
        return ("learning_rate", "lam")

    def objective_fn(self, params: Mapping[str, float]) -> MonteCarloObjective:
        """The Monte Carlo objective of :mod:`paperlib.estimators` for tuned ``params``."""
        if self.objective == "power":
            return MonteCarloObjective("power", alpha=float(params["alpha"]))
        if self.objective not in ("kl", "renyi"):
            raise ValueError(f"{self.objective!r} is not a Monte Carlo objective of paperlib.estimators")
        return MonteCarloObjective(
            self.objective,
            lam=float(params["lam"]),
            alpha=float(params.get("alpha", 1.0)),
            num_lik_samples=self.lik_samples,
            num_kl_samples=self.kl_samples,
        )


def _build_configurations() -> dict[str, Configuration]:
    configs: dict[str, Configuration] = {
        "elbo": Configuration("gaussian", "elbo", "beta_vae"),
        "vqvae": Configuration("vq", "vq", "vq"),
    }
    counts = {
        "iwae": [(1, 1), (16, 16), (64, 64)],
        "dreg": [(1, 1), (16, 16), (16, 1), (1, 16)],
        "reinforce": [(1, 1), (16, 16), (64, 64)],
        "vimco": [(16, 16), (64, 64), (16, 1), (1, 16)],
    }
    for base, pairs in counts.items():
        latent = "gaussian" if base in ("iwae", "dreg") else "categorical"
        for lik, kl in pairs:
            tag = str(lik) if lik == kl else f"{lik}-{kl}"
            for objective in ("kl", "renyi"):
                configs[f"{base}{tag}_{objective}"] = Configuration(latent, base, objective, lik, kl)
    configs["dreg16_power"] = Configuration("gaussian", "dreg", "power", 16, 16)
    configs["vimco16_power"] = Configuration("categorical", "vimco", "power", 16, 16)
    return configs


CONFIGURATIONS: dict[str, Configuration] = _build_configurations()


def _both(*stems: str) -> list[str]:
    return [f"{s}_{o}" for s in stems for o in ("kl", "renyi")]


@dataclass(frozen=True)
class Figure:
    """A thesis figure: its caption's gist, its curves and the claim the thesis makes about them."""

    title: str
    configurations: list[str]
    thesis_says: str


FIGURES: dict[str, Figure] = {
    "5.2": Figure("continuous, ELBO and IWAE N", ["elbo", *_both("iwae1", "iwae16", "iwae64")],
                  "IWAE 1 much worse than ELBO; more samples reverse this, with some degradation at 64"),
    "5.3": Figure("continuous, ELBO and DReG N", ["elbo", *_both("dreg1", "dreg16")],
                  "DReG 1 beats ELBO; DReG 16 improves on DReG 1; Rényi slightly better than KL"),
    "5.4": Figure("continuous, DReG asymmetric samples", _both("dreg1", "dreg16-1", "dreg1-16", "dreg16"),
                  "DReG 16 beats 16/1 and 1/16 (1/16 the better of the two)"),
    "5.5": Figure("discrete, REINFORCE N", _both("reinforce1", "reinforce16", "reinforce64"),
                  "small gain with 16 samples, degradation with 64"),
    "5.6": Figure("discrete, VIMCO N", _both("reinforce1", "vimco16", "vimco64"),
                  "VIMCO 16 almost perfect (near ln V at high MI); 64 much worse"),
    "5.7": Figure("discrete, VIMCO asymmetric samples", _both("reinforce1", "vimco16-1", "vimco1-16", "vimco16"),
                  "16/1 and 1/16 beat REINFORCE 1 only with Rényi; both far short of VIMCO 16"),
    "5.15": Figure("discrete, VQ-VAE baseline", ["vqvae", *_both("reinforce1", "vimco16")],
                   "VQ-VAE better than REINFORCE 1, much worse than VIMCO 16"),
    "5.26": Figure("continuous, power objective (DReG 16)", ["dreg16_kl", "dreg16_renyi", "dreg16_power"],
                   "power often better than KL but lags Rényi"),
    "5.27": Figure("discrete, power objective (VIMCO 16)", ["vimco16_kl", "vimco16_renyi", "vimco16_power"],
                   "power often better than KL but lags Rényi"),
}


# ---------------------------------------------------------------------------------------------------
# hyperparameter ranges (Table 5.2)


@dataclass(frozen=True)
class Range:
    """A tuned hyperparameter's range; ``log`` ranges are sampled log-uniformly, ``integer`` ones uniformly."""

    low: float
    high: float
    log: bool = False
    integer: bool = False

    def from_unit(self, u: float) -> float | int:
        """Map u in [0, 1) to the range (used for the space-filling start design)."""
        if self.integer:
            return int(min(self.high, math.floor(self.low + u * (self.high - self.low + 1))))
        if self.log:
            value = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
        else:
            value = self.low + u * (self.high - self.low)
        return float(min(self.high, max(self.low, value)))  # rounding must not leave the range


TABLE_5_2: dict[str, Range] = {
    "learning_rate": Range(1e-4, 1e-2, log=True),
    "lam": Range(-0.05, 0.9999),
    "alpha": Range(0.86, 16.0, log=True),
    "num_latents": Range(1, 8, integer=True),
    "categories": Range(2, 20, integer=True),
    "vq_beta": Range(0.01, 20.0, log=True),
    "vq_one_minus_decay": Range(1e-5, 0.1, log=True),  # decay in [0.9, 0.99999]
}


def search_space(config: Configuration) -> dict[str, Range]:
    """The Table 5.2 ranges of ``config``'s tuned hyperparameters."""
    return {name: TABLE_5_2[name] for name in config.hyperparameters}


def suggest_space(trial: Any, space: Mapping[str, Range]) -> dict[str, float | int]:
    """Ask an Optuna trial for a value of every hyperparameter of ``space``."""
    params: dict[str, float | int] = {}
    for name, r in space.items():
        if r.integer:
            params[name] = trial.suggest_int(name, int(r.low), int(r.high))
        else:
            params[name] = trial.suggest_float(name, r.low, r.high, log=r.log)
    return params


def suggest(trial: Any, config: Configuration) -> dict[str, float | int]:
    """Ask an Optuna trial for ``config``'s hyperparameters."""
    return suggest_space(trial, search_space(config))


def halton_design(space: Mapping[str, Range], num: int, seed: int) -> list[dict[str, float | int]]:
    """The first ``num`` points of a scrambled Halton sequence over ``space``; prefixes agree for every ``num``."""
    from scipy.stats import qmc

    units = qmc.Halton(len(space), scramble=True, seed=seed).random(num)  # [num, d]
    return [{name: r.from_unit(float(u)) for (name, r), u in zip(space.items(), row)} for row in units]


def start_design(config: Configuration, num: int, seed: int) -> list[dict[str, float | int]]:
    """The Halton start design (:func:`halton_design`) over ``config``'s Table 5.2 space."""
    return halton_design(search_space(config), num, seed)


# ---------------------------------------------------------------------------------------------------
# training and evaluation


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


def step_surrogates(model: LatentVariableModel, x: Tensor, config: Configuration,
                    params: Mapping[str, float]) -> Surrogates:
    """Surrogates (value = objective per example ``[B]``) of one training step of a VAE configuration."""
    q = model.posterior(x)
    if config.base == "elbo":  # beta-VAE (5.19) with analytic KL, beta = 1 - lambda (Prop. 13)
        z = q.rsample((config.num_samples,))  # [K, B, D]
        value = analytic_elbo(model.log_likelihood(z, x), q, model.prior(), beta=1.0 - float(params["lam"]))
        return Surrogates(value, value)
    estimator = _SURROGATE_OF_BASE[config.base]
    k = config.num_samples
    z = q.rsample((k,)) if estimator in PATHWISE_ESTIMATORS else q.sample((k,))  # [K, B, ...]
    objective = config.objective_fn(params)
    return surrogates(estimator, objective, model.log_likelihood(z, x), model.log_prior(z), z, q)


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


# ---------------------------------------------------------------------------------------------------
# frontiers


def _as_points(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nll_a, mi_a = np.asarray(nll, dtype=float), np.asarray(mi, dtype=float)
    if nll_a.shape != mi_a.shape or nll_a.ndim != 1:
        raise ValueError(f"nll and mi must be 1-d arrays of the same length; got {nll_a.shape} and {mi_a.shape}")
    return nll_a, mi_a


def pareto_front(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (minimise NLL, maximise MI), ordered by increasing MI.

    A point is dominated if another has NLL <= and MI >= with one of them strict; of exact duplicates the first is
    kept. Non-finite points are ignored. Sorting by MI (descending) and sweeping keeps each point whose NLL is below
    every point of larger-or-equal MI seen so far: O(n log n).
    """
    nll_a, mi_a = _as_points(nll, mi)
    finite = np.flatnonzero(np.isfinite(nll_a) & np.isfinite(mi_a))
    order = finite[np.lexsort((finite, nll_a[finite], -mi_a[finite]))]  # MI desc, then NLL asc, then index
    keep: list[int] = []
    best = math.inf
    for i in order:
        if nll_a[i] < best:
            keep.append(int(i))
            best = nll_a[i]
    return np.array(keep[::-1], dtype=int)


def hypervolume(nll: Sequence[float] | np.ndarray, mi: Sequence[float] | np.ndarray,
                reference: tuple[float, float], mi_cap: float = math.inf) -> float:
    """Area of {(n, m): n <= ref_nll, ref_mi <= m <= mi_cap, dominated by some point}, reference = (ref_nll, ref_mi).

    The 2-D hypervolume indicator of the points (minimise NLL, maximise MI); points outside the box add nothing.
    ``mi_cap`` clips MI estimates from above: the true I(X, Z) cannot exceed H(X) = ln V, and estimates beyond it
    only arise from loose bounds (U^K - S^K grows with the gap of S^K). With the cap at ln V an ideal model
    (NLL = ln V at every MI) scores (ref_nll - ln V) * (ln V - ref_mi). Larger is better.
    """
    nll_a, mi_a = _as_points(nll, mi)
    ref_nll, ref_mi = reference
    if not mi_cap > ref_mi:
        raise ValueError(f"mi_cap must exceed the reference MI {ref_mi}; got {mi_cap}")
    mi_a = np.minimum(mi_a, mi_cap)
    front = pareto_front(nll_a, mi_a)
    area, covered_mi = 0.0, ref_mi
    for i in front:  # increasing MI, hence increasing NLL
        width = ref_nll - nll_a[i]
        if width <= 0.0 or mi_a[i] <= covered_mi:
            continue
        area += width * (mi_a[i] - covered_mi)
        covered_mi = mi_a[i]
    return float(area)


def nll_at_mi(front_mi: Sequence[float] | np.ndarray, front_nll: Sequence[float] | np.ndarray,
              levels: Sequence[float] | np.ndarray) -> np.ndarray:
    """NLL of a frontier at MI ``levels``, linearly interpolated between its points (sorted by MI).

    Below the frontier's smallest MI the NLL of that point applies (it reaches that level too); above its largest MI
    the level is not reached and the result is NaN.
    """
    nll_a, mi_a = _as_points(front_nll, front_mi)
    levels_a = np.asarray(levels, dtype=float)
    if mi_a.size == 0:
        return np.full(levels_a.shape, np.nan)
    order = np.argsort(mi_a, kind="stable")
    mi_s, nll_s = mi_a[order], nll_a[order]
    if np.any(np.diff(mi_s) <= 0) or np.any(np.diff(nll_s) < 0):
        raise ValueError("front_mi/front_nll must be a Pareto frontier: distinct MI values, NLL non-decreasing in MI")
    return np.interp(levels_a, mi_s, nll_s, left=nll_s[0], right=np.nan)


# ---------------------------------------------------------------------------------------------------
# claims (explicit rules applied to the results)

NEAR_OPTIMAL_NATS = 0.25  # "near-optimal": within this many nats of ln V
HIGH_MI_FRACTION = 0.75  # "high MI": 75% of the maximum ln V
HV_TIE = 0.02  # normalised hypervolumes closer than this (2% of the ideal area) are a tie


def verdict_of(wins: int, total: int) -> str:
    """"reproduced" if all ``total`` comparisons hold, "partly reproduced" if at least half, else "not reproduced"."""
    if total == 0:
        return "not run at this profile"
    if wins == total:
        return "reproduced"
    return "partly reproduced" if 2 * wins >= total else "not reproduced"


def claim_verdicts(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Decide the thesis' claims on ``results`` (the JSON of :func:`run_micmco_synthetic`) by explicit rules.

    HV is the normalised hypervolume; "A beats B" means HV(A) > HV(B) + 0.02 (smaller differences are ties).

    1. *VIMCO 16 reaches near-optimal NLL at high MI*: the better of VIMCO 16 KL/Renyi has, at MI = 0.75 ln V, an
       interpolated NLL within 0.25 nats of ln V.
    2. *Multiple samples in both terms beat 16/1 and 1/16*: for each base estimator and objective with all three
       runs, 16 beats both asymmetric ones.
    3. *Renyi slightly better than KL*: for every base estimator and sample count run with both objectives (not
       ELBO, where they coincide), Renyi beats KL.
    4. *Power objective between KL and Renyi*: for each base estimator with a power run,
       HV(KL) - 0.02 <= HV(power) <= HV(Renyi) + 0.02.

    A claim is "reproduced" if every comparison holds, "partly reproduced" if at least half do, else "not
    reproduced"; claims whose runs are missing are "not run at this profile".
    """
    configs = results["configurations"]
    ln_v = float(results["optimum_nll"])

    def hv(name: str) -> float | None:
        entry = configs.get(name)
        return None if entry is None else float(entry["normalised_hypervolume"])

    def beats(a: float, b: float) -> bool:
        return a > b + HV_TIE

    verdicts = []
    # 1
    level = HIGH_MI_FRACTION * ln_v
    gaps = {}
    for name in ("vimco16_kl", "vimco16_renyi"):
        if name in configs:
            front = configs[name]["frontier"]
            value = nll_at_mi([p["mi"] for p in front], [p["nll"] for p in front], [level])[0]
            gaps[name] = float(value - ln_v)
    finite_gaps = [g for g in gaps.values() if math.isfinite(g)]
    ok = bool(finite_gaps) and min(finite_gaps) <= NEAR_OPTIMAL_NATS
    verdicts.append({
        "claim": "VIMCO 16 reaches near-optimal NLL at high MI",
        "rule": f"min over KL/Rényi of NLL(MI = {HIGH_MI_FRACTION:g} ln V) - ln V <= {NEAR_OPTIMAL_NATS} nats",
        "evidence": {k: (f"{v:+.3f} nats" if math.isfinite(v) else "MI level not reached") for k, v in gaps.items()},
        "verdict": verdict_of(int(ok), 1 if gaps else 0),
    })
    # 2
    comparisons, evidence = {}, {}
    for base in ("dreg", "vimco"):
        for objective in ("kl", "renyi"):
            values = [hv(f"{base}{tag}_{objective}") for tag in ("16", "16-1", "1-16")]
            if all(v is not None for v in values):
                key = f"{base} {objective}"
                comparisons[key] = beats(values[0], values[1]) and beats(values[0], values[2])
                evidence[key] = "HV 16 / 16-1 / 1-16 = " + " / ".join(f"{v:.3f}" for v in values)
    verdicts.append({
        "claim": "multi-sample in both terms beats 16/1 and 1/16",
        "rule": f"HV(16) > HV(16/1) + {HV_TIE} and HV(16) > HV(1/16) + {HV_TIE}, per base estimator and objective",
        "evidence": evidence,
        "verdict": verdict_of(sum(comparisons.values()), len(comparisons)),
    })
    # 3
    pairs, evidence = {}, {}
    for name in configs:
        stem = name[: -len("_kl")]
        if name.endswith("_kl") and f"{stem}_renyi" in configs:
            kl, renyi = hv(name), hv(f"{stem}_renyi")
            pairs[stem] = beats(renyi, kl)
            evidence[stem] = f"HV Rényi / KL = {renyi:.3f} / {kl:.3f}"
    verdicts.append({
        "claim": "Rényi slightly better than KL",
        "rule": f"HV(Rényi) > HV(KL) + {HV_TIE} for every base estimator / sample count run with both",
        "evidence": evidence,
        "verdict": verdict_of(sum(pairs.values()), len(pairs)),
    })
    # 4
    between, evidence = {}, {}
    for stem in ("dreg16", "vimco16"):
        values = [hv(f"{stem}_{o}") for o in ("kl", "power", "renyi")]
        if all(v is not None for v in values):
            between[stem] = values[0] - HV_TIE <= values[1] <= values[2] + HV_TIE
            evidence[stem] = "HV KL / power / Rényi = " + " / ".join(f"{v:.3f}" for v in values)
    verdicts.append({
        "claim": "power objective between KL and Rényi",
        "rule": f"HV(KL) - {HV_TIE} <= HV(power) <= HV(Rényi) + {HV_TIE}, per base estimator",
        "evidence": evidence,
        "verdict": verdict_of(sum(between.values()), len(between)),
    })
    return verdicts


# ---------------------------------------------------------------------------------------------------
# settings, studies and the experiment


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class MicmcoSyntheticParams:
    """Settings of the synthetic MICMCO experiment (one ``params.yaml`` profile).

    ``configurations`` are keys of :data:`CONFIGURATIONS` (or ``["all"]``); each is tuned by ``trials`` trials, the
    first ``startup_trials`` from a Halton design, each training for ``steps`` Adam steps on batches of
    ``batch_size`` symbols and evaluated on ``eval_symbols`` symbols with ``eval_samples`` samples. Frontiers are
    compared by hypervolume w.r.t. (ln V + ``hypervolume_margin``, 0) and by NLL at MI = ``mi_fractions`` * ln V.
    ``workers`` studies run in parallel processes with ``threads`` torch threads each.
    """

    configurations: list[str]
    trials: int
    startup_trials: int
    steps: int
    batch_size: int
    vocab_size: int = 10_000
    eval_symbols: int = 1000
    eval_samples: int = 100
    hidden_size: int = 128
    latent_dim: int = 40
    num_categorical: int = 8
    categories: int = 10
    mi_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 0.9])
    hypervolume_margin: float = 1.0
    seed: int = 0
    threads: int = 1
    workers: int = 2

    def __post_init__(self) -> None:
        unknown = [c for c in self.configurations if c not in CONFIGURATIONS and c != "all"]
        if unknown or not self.configurations:
            raise ValueError(f"unknown configurations {unknown}; choose 'all' or from: {', '.join(CONFIGURATIONS)}")
        positive = ("trials", "steps", "batch_size", "eval_symbols", "eval_samples", "hidden_size", "latent_dim",
                    "num_categorical", "categories", "threads", "workers")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad or self.startup_trials < 0 or self.vocab_size < 2:
            raise ValueError(f"{bad or 'startup_trials/vocab_size'} must be >= 1 (startup_trials >= 0, vocab >= 2)")
        if not all(0.0 < f <= 1.0 for f in self.mi_fractions) or self.hypervolume_margin <= 0:
            raise ValueError("mi_fractions must lie in (0, 1] and hypervolume_margin must be positive")

    @property
    def selected(self) -> list[str]:
        return list(CONFIGURATIONS) if "all" in self.configurations else list(dict.fromkeys(self.configurations))

    def trial_fingerprint(self) -> str:
        """Hash of the settings that change a trial's outcome (not the trial budget or the selection)."""
        keys = ("steps", "batch_size", "vocab_size", "eval_symbols", "eval_samples", "hidden_size", "latent_dim",
                "num_categorical", "categories", "seed")
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def run_trial(config: Configuration, params: Mapping[str, float], settings: MicmcoSyntheticParams,
              seed: int) -> dict[str, Any]:
    """Train one model with ``params`` and evaluate it; the data stream and evaluation set depend only on settings."""
    device = stage_device()
    batches = uniform_symbols(settings.steps * settings.batch_size, settings.vocab_size, settings.seed)
    batches = batches.view(settings.steps, settings.batch_size).to(device)  # [steps, B]
    eval_set = uniform_symbols(settings.eval_symbols, settings.vocab_size, settings.seed + 1).to(device)  # [N_eval]
    torch.manual_seed(seed)
    model = build_model(config, settings.vocab_size, settings.hidden_size, settings.latent_dim,
                        settings.num_categorical, settings.categories, params).to(device)
    result = train(model, config, params, batches)
    record: dict[str, Any] = {"steps": result.steps, "train_seconds": round(result.seconds, 2),
                              "final_objective": result.final_objective, "diverged": result.diverged}
    if result.diverged:
        return {**record, "nll": math.nan, "mi": math.nan}
    torch.manual_seed(seed + 1)
    nll, mi = evaluate(model, eval_set, settings.eval_samples)
    return {**record, "nll": nll, "mi": mi}


def open_study(name: str, storage: str, seed: int, startup_trials: int):
    """Create or reopen the two-objective (minimise NLL, maximise MI) study ``name`` in ``storage``, GP-sampled."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(storage=storage, study_name=name, directions=["minimize", "maximize"],
                                    load_if_exists=True)
        finished = [t for t in study.get_trials(deepcopy=False)
                    if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
                    and not _interrupted(t)]
        # Re-seeding with the number of finished trials keeps a resumed study deterministic without repeating
        # the random choices made before it was interrupted.
        study.sampler = optuna.samplers.GPSampler(seed=seed + len(finished), n_startup_trials=max(2, startup_trials),
                                                  warn_independent_sampling=False)
    return study


def fail_stale_trials(study) -> None:
    """Trials left RUNNING by an interrupted run (we run one study at a time in one process) become FAIL, marked
    ``interrupted``: :func:`tune` runs them again (a start-design trial with the same design point and seed) and the
    records leave them out, so an interruption costs no trial of the budget. Start-design trials then equal those of
    an uninterrupted study; sampler-chosen trials may differ, as the sampler's random state restarts with the
    process (:func:`open_study`)."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)


def _interrupted(trial) -> bool:
    return bool(trial.user_attrs.get("interrupted"))


def trial_index(trial) -> int:
    """The trial's place among the study's trials that were not interrupted: the trial number an uninterrupted run
    would have given it. Seeds derive from it, so a retried start-design trial repeats the interrupted one."""
    return sum(1 for t in trial.study.get_trials(deepcopy=False) if t.number < trial.number and not _interrupted(t))


def study_name(config_name: str, profile: str, settings: MicmcoSyntheticParams) -> str:
    code = code_hash(__name__)  # a study made by other code starts anew
    return f"{config_name}-{profile}-{settings.trial_fingerprint()}-{code[:8]}" + "".join(f"-{v}" for v in cache_key().values())


def run_study(config_name: str, settings: MicmcoSyntheticParams, storage: str, profile: str,
              progress: bool = False) -> list[dict[str, Any]]:
    """Tune ``config_name`` until ``settings.trials`` trials have finished (resuming ``storage``); return all records.

    Trial ``i`` (i < ``startup_trials``) takes point i of the Halton design; later trials come from the GP sampler.
    The tuner sees (NLL, min(MI, ln V)): the true I(X, Z) cannot exceed H(X) = ln V, and larger estimates come from
    loose bounds (the MI estimate U^K - S^K grows with the gap of S^K), which the tuner would otherwise chase. Each
    record holds the trial number, state, hyperparameters, NLL, capped MI (``mi``) and the raw estimate
    (``mi_estimate``), and training diagnostics. Trials an interruption left running are retried
    (:func:`fail_stale_trials`).
    """
    import optuna

    config = CONFIGURATIONS[config_name]
    study = open_study(study_name(config_name, profile, settings), storage, settings.seed, settings.startup_trials)
    fail_stale_trials(study)
    design = start_design(config, settings.startup_trials, settings.seed)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        params = suggest(trial, config)
        record = run_trial(config, params, settings, settings.seed + 1000 * trial_index(trial))
        for key in ("steps", "train_seconds", "final_objective", "diverged"):
            trial.set_user_attr(key, record[key])
        trial.set_user_attr("mi_estimate", record["mi"])
        if progress:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in params.items())
            print(f"  {config.label:<22} trial {trial.number:>3}: NLL {record['nll']:.3f}  MI {record['mi']:.3f}  "
                  f"({shown}; {record['train_seconds']:.0f}s)", flush=True)
        return record["nll"], (record["mi"] if not record["mi"] > mi_cap else mi_cap)

    mi_cap = math.log(settings.vocab_size)
    tune(study, objective, design, settings.trials)
    return trial_records(study)


def tune(study, objective, design: Sequence[Mapping[str, float | int]], trials: int) -> None:
    """Run ``objective`` one trial at a time until ``study`` holds ``trials`` finished (complete or failed) trials.

    Finished trial i < len(design) was asked for design point i (enqueued just before it runs, so a resumed study
    continues the design where it stopped); later trials come from the study's sampler. Interrupted trials
    (:func:`fail_stale_trials`) do not count.
    """
    from optuna.trial import TrialState

    while True:
        done = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
                   if not _interrupted(t))
        if done >= trials:
            break
        if done < len(design):
            study.enqueue_trial(dict(design[done]))
        study.optimize(objective, n_trials=1, catch=())


def trial_records(study) -> list[dict[str, Any]]:
    """JSON-able records of a study's finished trials (failed ones have NaN values; interrupted ones are left out)."""
    from optuna.trial import TrialState

    records = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if _interrupted(t):
            continue
        nll, mi = (t.values if t.values is not None else (math.nan, math.nan))
        records.append({"number": t.number, "state": t.state.name, "params": dict(t.params), "nll": nll, "mi": mi,
                        **t.user_attrs})
    return records


def summarise_configuration(records: Sequence[Mapping[str, Any]], optimum: float, margin: float,
                            levels: Sequence[float]) -> dict[str, Any]:
    """Frontier, hypervolume (absolute and as a fraction of the ideal) and NLL at the MI ``levels``."""
    nll = np.array([r["nll"] if r["nll"] is not None else np.nan for r in records], dtype=float)
    mi = np.array([r["mi"] if r["mi"] is not None else np.nan for r in records], dtype=float)
    front = pareto_front(nll, mi)
    reference = (optimum + margin, 0.0)
    hv = hypervolume(nll, mi, reference, mi_cap=optimum)
    at_levels = nll_at_mi(mi[front], nll[front], levels)
    return {
        "frontier": [{"trial": int(records[i]["number"]), "nll": float(nll[i]), "mi": float(mi[i])} for i in front],
        "hypervolume": hv,
        "normalised_hypervolume": hv / (margin * optimum),
        "nll_at_mi": [None if not math.isfinite(v) else float(v) for v in at_levels],
    }


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats replaced by None (JSON has no NaN), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _study_cost(name: str) -> float:
    """Rough relative cost of a study's trials (decoder passes per step), to start the longest studies first."""
    config = CONFIGURATIONS[name]
    return config.num_samples * (1.6 if config.base == "dreg" else 1.0)


def _study_job(name: str, settings: MicmcoSyntheticParams, runs_dir: str, profile: str,
               progress: bool) -> tuple[str, list[dict[str, Any]], float]:
    """One study in its own SQLite file (so parallel workers never contend for a database lock)."""
    import optuna

    torch.set_num_threads(settings.threads)
    setup_stage(profile)  # precision in this (possibly spawned) worker
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{Path(runs_dir) / study_name(name, profile, settings)}.sqlite3"
    if progress:
        print(f"{EXPERIMENT} [{profile}]: {name} ({CONFIGURATIONS[name].label})", flush=True)
    started = time.time()
    records = run_study(name, settings, storage, profile, progress)
    return name, records, round(time.time() - started, 1)


def run_micmco_synthetic(profile: str | None = None, progress: bool = True, runs_dir: str | os.PathLike | None = None,
                         out: str | os.PathLike | None = None) -> Path:
    """Run (or resume) every study of the profile and write ``results/micmco_synthetic.json`` plus provenance.

    Each study is a SQLite file ``runs/micmco_synthetic/<config>-<profile>-<settings hash>-<code hash>.sqlite3``;
    rerunning after an interruption continues every study where it stopped. With ``workers > 1`` studies run in
    parallel processes (``threads`` torch threads each), longest first.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from paperlib.experiments.config import active_profile, experiment_params, load_params, repo_root
    from paperlib.experiments.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings: MicmcoSyntheticParams = experiment_params(EXPERIMENT, profile, params)
    setup_stage(profile, params)
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / EXPERIMENT
    runs_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(settings.selected, key=_study_cost, reverse=True)
    jobs = [(name, settings, str(runs_dir), profile, progress) for name in names]
    if settings.workers == 1:
        threads = torch.get_num_threads()
        try:
            finished = [_study_job(*job) for job in jobs]
        finally:
            torch.set_num_threads(threads)
    else:  # spawn: forking a process whose OpenMP pool is running can deadlock
        with ProcessPoolExecutor(settings.workers, mp_context=get_context("spawn")) as pool:
            finished = list(pool.map(_study_job, *zip(*jobs)))
    optimum = math.log(settings.vocab_size)
    levels = [f * optimum for f in settings.mi_fractions]
    configurations, seconds = {}, {}
    for name, records, elapsed in sorted(finished, key=lambda job: settings.selected.index(job[0])):
        config = CONFIGURATIONS[name]
        seconds[name] = elapsed
        configurations[name] = {
            "label": config.label, **asdict(config), "search_space": list(config.hyperparameters),
            "trials": records, **summarise_configuration(records, optimum, settings.hypervolume_margin, levels),
        }
    results = {
        "experiment": EXPERIMENT, "profile": profile, "settings": asdict(settings),
        "optimum_nll": optimum, "mi_levels": levels,
        "reference_point": {"nll": optimum + settings.hypervolume_margin, "mi": 0.0, "mi_cap": optimum},
        "figures": {k: asdict(f) for k, f in FIGURES.items()},
        "configurations": configurations,
    }
    results["claims"] = claim_verdicts(results)
    out = Path(out) if out is not None else root / "results" / f"{EXPERIMENT}.json"
    write_json_atomic(out, json_safe(results))
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, asdict(settings), None, started,
                                    code=code_hash(__name__)), "study_seconds": seconds})
    return out


__all__ = [
    "CONFIGURATIONS", "FIGURES", "TABLE_5_2", "CategoricalVAE", "Configuration", "GaussianVAE",
    "MicmcoSyntheticParams", "Range", "VQVAE", "build_model", "claim_verdicts", "evaluate", "fail_stale_trials",
    "halton_design", "hypervolume", "json_safe", "nll_at_mi", "open_study", "pareto_front", "run_micmco_synthetic",
    "run_study", "run_trial", "search_space", "start_design", "step_surrogates", "suggest", "suggest_space",
    "summarise_configuration", "trial_index", "trial_records", "tune", "train", "verdict_of",
]
