"""The design of the synthetic study: every estimator configuration of the thesis' figures and the Table 5.2
ranges, with the Optuna suggestions and Halton start designs over them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paperlib.estimators import MonteCarloObjective


EXPERIMENT = "micmco_synthetic"

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
