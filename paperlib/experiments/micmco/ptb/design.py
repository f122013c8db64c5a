"""The design of the PTB study: the thesis' Table 5.1 layout, the Table 5.2 ranges, every curve of every figure
(estimator, regularisation regime, compute variant) and the stage's settings."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.micmco.synthetic.micmco_synthetic import TABLE_5_2, Configuration, Figure, Range
from paperlib.reference.micmco import MICMCO_PTB_TABLE_5_1


EXPERIMENT = "micmco_ptb"

# ---------------------------------------------------------------------------------------------------
# the thesis' numbers

THESIS_TABLE_5_1 = MICMCO_PTB_TABLE_5_1  # Table 5.1 of the thesis (paperlib.reference.micmco): hidden size -> column -> numbers
TABLE_5_1_COLUMNS: dict[str, str] = {  # column -> estimator stem
    "DReG 1 K/R": "dreg1", "DReG 16 K": "dreg16_kl", "DReG 16 R": "dreg16_renyi",
    "VIMCO 1 K/R": "vimco1", "VIMCO 16 K": "vimco16_kl", "VIMCO 16 R": "vimco16_renyi",
}
TABLE_5_1_VARIANTS: dict[int, tuple[str, ...]] = {128: ("", ".T2"), 256: (".hs2", ".hs2.T2")}  # thesis hs -> curves
TABLE_5_1_CURVES = frozenset(f"{stem}.shared{v}" for stem in TABLE_5_1_COLUMNS.values()
                             for variants in TABLE_5_1_VARIANTS.values() for v in variants)  # its candidates

# ---------------------------------------------------------------------------------------------------
# hyperparameter ranges (Table 5.2) and curves

PTB_RANGES: dict[str, Range] = {
    **TABLE_5_2,
    "input_dropout": Range(0.0, 0.9),
    "state_dropout": Range(0.0, 0.8),
    "output_dropout": Range(0.0, 0.95),
    "l2_penalty": Range(5e-6, 1e-3, log=True),
}
REGIMES = ("train", "shared", "naive", "l2")
_REGIME_HYPERPARAMETERS = {
    "train": (),
    "shared": ("input_dropout", "state_dropout", "output_dropout"),
    "naive": ("input_dropout", "state_dropout", "output_dropout"),
    "l2": ("l2_penalty",),
}
_REGIME_LABEL = {"train": "training fit", "shared": "dropout, shared masks", "naive": "dropout, naive masks",
                 "l2": "L2"}
# name suffix -> (steps factor, batch factor, hidden factor) and its label
VARIANTS: dict[str, tuple[int, int, int]] = {
    "": (1, 1, 1), ".T16": (16, 1, 1), ".bs16": (1, 16, 1), ".bs2": (1, 2, 1), ".T2": (2, 1, 1),
    ".hs2": (1, 1, 2), ".hs2.T2": (2, 1, 2),
}
# (steps, batch, hidden) factors -> the short tag in curve labels and claim evidence
_FACTOR_TAG = {(1, 1, 1): "base", (16, 1, 1): "T×16", (1, 16, 1): "bs×16", (1, 2, 1): "bs×2", (2, 1, 1): "T×2",
               (1, 1, 2): "hs×2", (2, 1, 2): "hs×2 T×2"}
_PATHWISE_BASE = {"dreg": "gaussian", "vimco": "categorical"}


def _estimators() -> dict[str, Configuration]:
    configs: dict[str, Configuration] = {}
    for base, latent in _PATHWISE_BASE.items():
        configs[f"{base}1"] = Configuration(latent, base, "kl", 1, 1)
        configs[f"{base}16-1"] = Configuration(latent, base, "kl", 16, 1)
        for objective in ("kl", "renyi"):
            configs[f"{base}16_{objective}"] = Configuration(latent, base, objective, 16, 16)
            configs[f"{base}1-16_{objective}"] = Configuration(latent, base, objective, 1, 16)
        configs[f"{base}16_power"] = Configuration(latent, base, "power", 16, 16)
    return configs


ESTIMATORS: dict[str, Configuration] = _estimators()


@dataclass(frozen=True)
class Curve:
    """One curve of a PTB figure: an estimator configuration, a regularisation regime and compute factors.

    ``regime``: ``"train"`` (no regularisation, evaluated on the training set), ``"shared"`` / ``"naive"`` (decoder
    dropout with masks shared across a sentence's latent samples or not) or ``"l2"``, all three evaluated on the
    validation set. The factors multiply the profile's steps, batch size and hidden size.
    """

    estimator: Configuration
    regime: str
    steps_factor: int = 1
    batch_factor: int = 1
    hidden_factor: int = 1

    def __post_init__(self) -> None:
        if self.regime not in REGIMES:
            raise ValueError(f"unknown regime {self.regime!r}; choose one of {REGIMES}")
        if _PATHWISE_BASE.get(self.estimator.base) != self.estimator.latent:
            raise ValueError("§5.7.2 pairs DReG with Gaussian and VIMCO with categorical latents; got "
                             f"{self.estimator.base} with {self.estimator.latent}")
        if min(self.steps_factor, self.batch_factor, self.hidden_factor) < 1:
            raise ValueError("compute factors must be >= 1")

    @property
    def split(self) -> str:
        return "train" if self.regime == "train" else "valid"

    @property
    def mask_mode(self) -> str:
        return "naive" if self.regime == "naive" else "shared"

    @property
    def hyperparameters(self) -> tuple[str, ...]:
        return self.estimator.hyperparameters + _REGIME_HYPERPARAMETERS[self.regime]

    @property
    def space(self) -> dict[str, Range]:
        """The Table 5.2 ranges of the tuned hyperparameters."""
        return {name: PTB_RANGES[name] for name in self.hyperparameters}

    @property
    def single_sample_divergence(self) -> bool:
        """One sample in the divergence term: the KL and Renyi objectives coincide ("K / R")."""
        return self.estimator.objective != "power" and self.estimator.kl_samples == 1

    @property
    def label(self) -> str:
        e = self.estimator
        if self.single_sample_divergence:
            text = f"{e.label.rsplit(' ', 1)[0]} K/R"
        else:
            text = e.label
        factors = (self.steps_factor, self.batch_factor, self.hidden_factor)
        return text if factors == (1, 1, 1) else f"{text} {_FACTOR_TAG[factors]}"

    @property
    def cost(self) -> float:
        """Rough relative cost of a trial (decoder rows x steps; DReG's second backward), to schedule studies."""
        base = 1.5 if self.estimator.base == "dreg" else 1.0
        return base * self.steps_factor * self.batch_factor * self.estimator.num_samples * self.hidden_factor ** 2


def curve_of(name: str) -> Curve:
    """Parse ``"<estimator>.<regime><variant>"``, e.g. ``"dreg16_kl.shared.hs2.T2"``."""
    stem, _, rest = name.partition(".")
    regime, _, variant = rest.partition(".")
    variant = f".{variant}" if variant else ""
    if stem not in ESTIMATORS or regime not in REGIMES or variant not in VARIANTS:
        raise ValueError(f"bad curve name {name!r}: want <estimator>.<regime><variant> with estimator in "
                         f"{sorted(ESTIMATORS)}, regime in {REGIMES}, variant in {sorted(VARIANTS)}")
    return Curve(ESTIMATORS[stem], regime, *VARIANTS[variant])


def _curves(regime: str, stems: Sequence[str], variants: Sequence[str] = ("",)) -> list[str]:
    return [f"{stem}.{regime}{v}" for v in variants for stem in stems]


def _trio(base: str) -> list[str]:
    return [f"{base}1", f"{base}16_kl", f"{base}16_renyi"]


FIGURES: dict[str, Figure] = {
    "5.8": Figure("training fit, DReG 1 vs 16", _curves("train", _trio("dreg")),
                  "16 samples improve on 1: with both objectives at low KL, only with Rényi at high KL"),
    "5.9": Figure("training fit, VIMCO 1 vs 16", _curves("train", _trio("vimco")),
                  "16 samples improve markedly with either objective; discrete beats continuous"),
    "5.10": Figure("validation, naive dropout masks",
                   ["dreg1.shared", "dreg16_kl.naive", "dreg16_renyi.naive",
                    "vimco1.shared", "vimco16_kl.naive", "vimco16_renyi.naive"],
                   "no multi-sample gain with continuous latents; a small one with discrete, which trail continuous"),
    "5.11": Figure("validation, L2 instead of dropout", _curves("l2", _trio("dreg") + _trio("vimco")),
                   "multi-sample helps; discrete degrade faster than continuous; best NLL worse than with dropout"),
    "5.12": Figure("validation, dropout masks shared across latent samples",
                   _curves("shared", _trio("dreg") + _trio("vimco")),
                   "multi-sample improves latent usage for both; discrete on par with continuous up to KL ≈ 0.5"),
    "5.13": Figure("training fit, VIMCO at equal compute",
                   _curves("train", ["vimco1"], ("", ".T16", ".bs16")) + _curves("train", _trio("vimco")[1:]),
                   "more compute gives VIMCO 1 a better best fit at low KL, but its tradeoff stays as steep"),
    "5.14": Figure("validation, VIMCO at equal compute",
                   _curves("shared", ["vimco1"], ("", ".T16", ".bs16")) + _curves("shared", _trio("vimco")[1:]),
                   "VIMCO 16 better than VIMCO 1 trained 16x longer or with 16x larger batches"),
    "5.16": Figure("validation, DReG, batch size x2", _curves("shared", _trio("dreg"), ("", ".bs2")),
                   "batch size shifts the curves but keeps their order"),
    "5.17": Figure("validation, DReG, optimisation length x2", _curves("shared", _trio("dreg"), ("", ".T2")),
                   "length shifts the curves but keeps their order"),
    "5.18": Figure("validation, DReG, hidden x2, length x2", _curves("shared", _trio("dreg"), (".hs2", ".hs2.T2")),
                   "at 256 units the three DReG estimators differ very little"),
    "5.19": Figure("validation, VIMCO, batch size x2", _curves("shared", _trio("vimco"), ("", ".bs2")),
                   "batch size shifts the curves but keeps their order"),
    "5.20": Figure("validation, VIMCO, optimisation length x2", _curves("shared", _trio("vimco"), ("", ".T2")),
                   "length shifts the curves but keeps their order"),
    "5.21": Figure("validation, VIMCO, hidden x2, length x2",
                   _curves("shared", _trio("vimco"), (".hs2", ".hs2.T2")),
                   "length shifts the curves but keeps their order"),
    "5.22": Figure("training fit, DReG asymmetric samples",
                   _curves("train", ["dreg1", "dreg16-1", "dreg1-16_kl", "dreg1-16_renyi", "dreg16_kl",
                                     "dreg16_renyi"]),
                   "gains need multiple samples in both terms"),
    "5.23": Figure("training fit, VIMCO asymmetric samples",
                   _curves("train", ["vimco1", "vimco16-1", "vimco1-16_kl", "vimco1-16_renyi", "vimco16_kl",
                                     "vimco16_renyi"]),
                   "gains need multiple samples in both terms"),
    "5.24": Figure("training fit, DReG at equal compute",
                   _curves("train", ["dreg1"], ("", ".T16", ".bs16")) + _curves("train", _trio("dreg")[1:]),
                   "more compute helps DReG 1's best fit at low KL, not its tradeoff"),
    "5.25": Figure("validation, DReG at equal compute",
                   _curves("shared", ["dreg1"], ("", ".T16", ".bs16")) + _curves("shared", _trio("dreg")[1:]),
                   "DReG 16 generalises better than either (curves close)"),
    "5.28": Figure("training fit, DReG power objective", _curves("train", ["dreg16_kl", "dreg16_renyi",
                                                                          "dreg16_power"]),
                   "power often better than KL but behind Rényi"),
    "5.29": Figure("training fit, VIMCO power objective", _curves("train", ["vimco16_kl", "vimco16_renyi",
                                                                           "vimco16_power"]),
                   "power often better than KL but behind Rényi"),
}
CURVES: dict[str, Curve] = {name: curve_of(name) for f in FIGURES.values() for name in f.configurations}
# robustness figures (§5.B.1): base estimator and the two settings of the nuisance factor, each with the trio
ROBUSTNESS: dict[str, tuple[str, tuple[str, str]]] = {
    "5.16": ("dreg", ("", ".bs2")), "5.17": ("dreg", ("", ".T2")), "5.18": ("dreg", (".hs2", ".hs2.T2")),
    "5.19": ("vimco", ("", ".bs2")), "5.20": ("vimco", ("", ".T2")), "5.21": ("vimco", (".hs2", ".hs2.T2")),
}
_VARIANT_TAG = {v: _FACTOR_TAG[f] for v, f in VARIANTS.items()}
_TRIO_TAG = ("1", "16 K", "16 R")

# ---------------------------------------------------------------------------------------------------
# settings


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class MicmcoPtbParams:
    """Settings of the PTB MICMCO experiment (one ``params.yaml`` profile).

    ``figures``: thesis figure ids of :data:`FIGURES` (or ``["all"]``); their curves are tuned with ``trials``
    trials each (the first ``startup_trials`` from a Halton design). A trial trains ``steps`` Adam steps on batches of
    ``batch_size`` sentences (times the curve's factors), with a ``hidden_size`` model, on the first
    ``train_sentences`` training sentences (None: all) truncated to ``max_len`` tokens, over the ``vocab_size`` most
    frequent words (None: the corpus vocabulary; rarer words become ``<unk>``). It is evaluated with
    ``eval_samples`` samples on ``train_eval_sentences`` of those training sentences (training-fit curves) or on
    ``valid_sentences`` validation sentences (None: all; otherwise fixed random subsets). Table 5.1 (``table_5_1``) uses
    ``test_samples`` samples on ``test_sentences`` test sentences. ``workers`` studies run in parallel processes with
    ``threads`` torch threads each. ``stack_size``: ask that many trials of a study at a time and train them as one
    stacked model (:mod:`~paperlib.experiments.micmco.ptb.studies`; None, the default: one trial at a time).
    """

    figures: list[str]
    trials: int
    startup_trials: int
    steps: int
    batch_size: int
    hidden_size: int = 128
    latent_dim: int = 40
    num_categorical: int = 8
    categories: int = 10
    max_len: int = 35
    vocab_size: int | None = None
    train_sentences: int | None = None
    train_eval_sentences: int | None = 1000
    valid_sentences: int | None = None
    test_sentences: int | None = None
    eval_samples: int = 100
    test_samples: int = 500
    tie_embeddings: bool = False
    table_5_1: bool = True
    hv_margin: float = 0.3
    kl_cap: float = 2.0
    kl_levels: list[float] = field(default_factory=lambda: [0.1, 0.25, 0.5])
    corpus: str = "ptb"
    seed: int = 0
    threads: int = 1
    workers: int = 2
    stack_size: int | None = None

    def __post_init__(self) -> None:
        unknown = [f for f in self.figures if f not in FIGURES and f != "all"]
        if unknown or not self.figures:
            raise ValueError(f"unknown figures {unknown}; choose 'all' or from: {', '.join(FIGURES)}")
        positive = ("trials", "steps", "batch_size", "hidden_size", "latent_dim", "num_categorical", "categories",
                    "max_len", "eval_samples", "test_samples", "threads", "workers")
        bad = [n for n in positive if getattr(self, n) < 1]
        optional = ("train_sentences", "train_eval_sentences", "valid_sentences", "test_sentences")
        bad += [n for n in optional if getattr(self, n) is not None and getattr(self, n) < 1]
        if bad or self.startup_trials < 0:
            raise ValueError(f"{bad or 'startup_trials'} must be >= 1 (startup_trials >= 0)")
        if self.vocab_size is not None and self.vocab_size < 3:
            raise ValueError(f"vocab_size must be None (the corpus vocabulary) or >= 3; got {self.vocab_size}")
        if self.hv_margin <= 0 or self.kl_cap <= 0 or not all(level > 0 for level in self.kl_levels):
            raise ValueError("hv_margin, kl_cap and every kl_levels entry must be positive")
        if self.stack_size is not None and (isinstance(self.stack_size, bool) or self.stack_size < 1):
            raise ValueError(f"stack_size must be None (one trial at a time) or a positive integer, got "
                             f"{self.stack_size!r}")

    @property
    def selected_figures(self) -> list[str]:
        return list(FIGURES) if "all" in self.figures else list(dict.fromkeys(self.figures))

    @property
    def selected(self) -> list[str]:
        """The curves of the selected figures, in figure order."""
        return list(dict.fromkeys(n for f in self.selected_figures for n in FIGURES[f].configurations))

    def trial_fingerprint(self) -> str:
        """Hash of the settings that change a trial's outcome (not the budget, the selection or Table 5.1)."""
        keys = ("steps", "batch_size", "hidden_size", "latent_dim", "num_categorical", "categories", "max_len",
                "vocab_size", "train_sentences", "train_eval_sentences", "valid_sentences", "eval_samples",
                "tie_embeddings", "kl_cap", "corpus", "seed")
        values = {k: getattr(self, k) for k in keys}
        if self.stack_size is not None:  # stacked trials equal separate ones up to rounding: a study of their own
            values["stack_size"] = self.stack_size
        blob = json.dumps(values, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    def test_fingerprint(self) -> str:
        blob = json.dumps({"samples": self.test_samples, "sentences": self.test_sentences, "seed": self.seed})
        return hashlib.sha256(blob.encode()).hexdigest()[:8]
