"""MICMCO on Penn Treebank: sentence VAEs, rate vs data-fit frontiers and Table 5.1 (Melis thesis §5.7.2, §5.B).

Sentence-level language modelling with one set of latents per sentence (:class:`~paperlib.models.sentence_vae.
SentenceVAE`: BiLSTM encoder, LSTM decoder with the latents added to its input, 40 Gaussian latents trained with
DReG or 8 x 10 categorical latents trained with VIMCO). Sentences are truncated to 35 tokens in the training and
validation sets (§5.7.2). Every curve of a thesis figure (:data:`FIGURES`, :data:`CURVES`) is an Optuna
multi-objective study over the Table 5.2 ranges of its hyperparameters (:data:`PTB_RANGES`): learning rate, lambda,
alpha (Renyi / power), and for validation curves three decoder dropout rates or an L2 coefficient. A trial trains
one model and reports the per-token NLL (-IWAE with 100 samples) and the per-token KL (the estimate
U^K - ln p^K of §5.7.1 with the same samples) on the training set ("training fit" curves, no regularisation) or on
the validation set; the frontier of a curve is its non-dominated trials (minimise NLL, maximise KL).

The machinery comes from :mod:`paperlib.experiments.micmco_synthetic` (imported, not copied): the estimator configurations
(:class:`~paperlib.experiments.micmco_synthetic.Configuration`), the Table 5.2 ranges, :func:`~paperlib.experiments.micmco_synthetic.step_surrogates`, the
resumable study loop (:func:`~paperlib.experiments.micmco_synthetic.open_study`, :func:`~paperlib.experiments.micmco_synthetic.tune`, Halton start designs),
and the frontier tools (:func:`~paperlib.experiments.micmco_synthetic.pareto_front`, :func:`~paperlib.experiments.micmco_synthetic.hypervolume`,
:func:`~paperlib.experiments.micmco_synthetic.nll_at_mi`). What is new here is the data, the curve definitions with their regularisation
regime and compute variants, training on sentence batches, per-token evaluation, Table 5.1 and the claims.

**Table 5.1**: for every column (DReG / VIMCO, 1 or 16 samples, KL or Renyi) and hidden size, the trial with the
lowest validation NLL among the shared-mask dropout curves of that estimator (base length and twice as long) is
evaluated on the test set with 500 samples; the thesis' numbers are :data:`THESIS_TABLE_5_1`.

**Resuming**: each study is a SQLite file ``runs/micmco_ptb/<curve>-<profile>-<settings hash>-<code hash>.sqlite3``;
the model of its best-validation trial is kept beside it (``.best.pt``) for Table 5.1, and test evaluations are
cached as JSON. An interrupted run continues every study where it stopped (trials left running count as failed).

Departures and readings (the thesis does not give them, or we chose differently):

- Single-sample objectives: with one sample in the divergence term the KL and Renyi estimates coincide
  (both are ln q(z|x) - ln p(z)), which is why the thesis merges "1 K / R" in Table 5.1; we run one curve for them
  (and for 16/1). With one latent sample, shared and naive masks coincide, so the single-sample curves of
  Fig. 5.10 are those of Fig. 5.12. "VIMCO 1" is REINFORCE 1 (§5.7.1).
- Loss scale: the training loss is the negative objective summed over a batch's sentences divided by its number of
  tokens (per-token, like the reported NLL); the L2 penalty is coefficient x ||theta||^2 over all weights (Adam's
  ``weight_decay`` = 2 x coefficient). The thesis does not say which weights L2 covers or how the loss is scaled.
- Not stated in the thesis, chosen here: batch size, number of trials, the batch-size variant of Figs. 5.16/5.19
  (x2), whether Figs. 5.16-5.21 and 5.28-5.29 show training or validation NLL (robustness: validation with shared
  masks, since Table 5.1's 256-unit rows need validation runs; power objective: training fit, as its synthetic
  counterparts), the optimisation length of the paper profile (40k steps, the shorter length of Figs. 5.17-5.21),
  and that the test set is not truncated (§5.7.2 truncates "the training and validation sets").
- Tuning: a scrambled Halton start design followed by Optuna's GP sampler (the thesis uses batched GP bandits).
  KL estimates above ``kl_cap`` nats per token are capped for the tuner, the frontiers and hypervolumes.
- Hypervolumes: per figure (or per claim), the reference point is (lowest NLL of any trial of the compared curves
  + ``hv_margin``, KL = 0), the KL axis is capped at ``kl_cap``; normalised by ``hv_margin * kl_cap``.
- The ``cpu`` profile shrinks the problem (vocabulary, model, steps, subsets, trials; see ``params.yaml``), so its
  perplexities are not comparable to the thesis'; only the relative claims are tested.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from paperlib.experiments.code_hash import code_hash
from paperlib.experiments.config import register_experiment
from paperlib.data import SentenceBatch, pad_sentences, sentence_batches, truncate_sentences
from paperlib.device import cache_key
from paperlib.experiments.stage import setup_stage, stage_device
from paperlib.estimators import Surrogates, iwae_bound, mutual_information
from paperlib.experiments.micmco_synthetic import (
    HV_TIE,
    TABLE_5_2,
    Configuration,
    Figure,
    Range,
    TrainResult,
    fail_stale_trials,
    halton_design,
    hypervolume,
    json_safe,
    nll_at_mi,
    open_study,
    pareto_front,
    step_surrogates,
    suggest_space,
    trial_index,
    trial_records,
    tune,
    verdict_of,
)
from paperlib.models.masks import DropoutRates
from paperlib.models.sentence_vae import SentenceVAE
from paperlib.reference import MICMCO_PTB_TABLE_5_1

EXPERIMENT = "micmco_ptb"

# ---------------------------------------------------------------------------------------------------
# the thesis' numbers

THESIS_TABLE_5_1 = MICMCO_PTB_TABLE_5_1  # Table 5.1 of the thesis (paperlib.reference): hidden size -> column -> numbers
TABLE_5_1_COLUMNS: dict[str, str] = {  # column -> estimator stem
    "DReG 1 K/R": "dreg1", "DReG 16 K": "dreg16_kl", "DReG 16 R": "dreg16_renyi",
    "VIMCO 1 K/R": "vimco1", "VIMCO 16 K": "vimco16_kl", "VIMCO 16 R": "vimco16_renyi",
}
TABLE_5_1_VARIANTS: dict[int, tuple[str, ...]] = {128: ("", ".T2"), 256: (".hs2", ".hs2.T2")}  # thesis hs -> curves

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
    ``threads`` torch threads each.
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
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]

    def test_fingerprint(self) -> str:
        blob = json.dumps({"samples": self.test_samples, "sentences": self.test_sentences, "seed": self.seed})
        return hashlib.sha256(blob.encode()).hexdigest()[:8]


# ---------------------------------------------------------------------------------------------------
# data


@dataclass
class SentenceData:
    """The sentences a run uses: training (truncated), the training-fit evaluation subset, validation, test."""

    train: list[Tensor]
    train_eval: list[Tensor]
    valid: list[Tensor]
    test: list[Tensor]
    vocab_size: int
    eos_id: int

    def split(self, name: str) -> list[Tensor]:
        return {"train": self.train_eval, "valid": self.valid, "test": self.test}[name]

    def summary(self) -> dict[str, Any]:
        def tokens(sentences: Sequence[Tensor]) -> int:
            return int(sum(len(s) for s in sentences))

        return {"vocab_size": self.vocab_size,
                **{f"{name}_sentences": len(s) for name, s in
                   (("train", self.train), ("train_eval", self.train_eval), ("valid", self.valid),
                    ("test", self.test))},
                **{f"{name}_tokens": tokens(s) for name, s in
                   (("train", self.train), ("train_eval", self.train_eval), ("valid", self.valid),
                    ("test", self.test))}}


def _subset(sentences: list[Tensor], size: int | None, seed: int) -> list[Tensor]:
    """A fixed random subset of ``size`` sentences in corpus order (all of them for None or a larger size)."""
    if size is None or size >= len(sentences):
        return list(sentences)
    keep = torch.randperm(len(sentences), generator=torch.Generator().manual_seed(seed))[:size].sort().values
    return [sentences[i] for i in keep.tolist()]


def prepare_sentences(splits: Mapping[str, list[Tensor]], vocab_size: int, eos_id: int, unk_id: int | None,
                      settings: MicmcoPtbParams) -> SentenceData:
    """Apply the profile to sentence lists (each ending in ``<eos>``): vocabulary cut, truncation (train and valid,
    §5.7.2), subsets. Ids are assumed sorted by training frequency (as :class:`~paperlib.data.Vocabulary` does)."""
    vocab = vocab_size
    if settings.vocab_size is not None and settings.vocab_size < vocab_size:
        vocab = settings.vocab_size
        if unk_id is None or unk_id >= vocab or eos_id >= vocab:
            raise ValueError(f"cannot cut the vocabulary to {vocab}: <unk> ({unk_id}) and <eos> ({eos_id}) must "
                             "be among the kept ids")

    def cut(sentences: list[Tensor]) -> list[Tensor]:
        return [torch.where(s < vocab, s, torch.full_like(s, unk_id)) if vocab < vocab_size else s
                for s in sentences]

    train = truncate_sentences(cut(list(splits["train"])), settings.max_len)
    if settings.train_sentences is not None:
        train = train[: settings.train_sentences]
    valid = truncate_sentences(cut(list(splits["valid"])), settings.max_len)
    return SentenceData(
        train=train,
        train_eval=_subset(train, settings.train_eval_sentences, settings.seed + 1),
        valid=_subset(valid, settings.valid_sentences, settings.seed + 2),
        test=_subset(cut(list(splits["test"])), settings.test_sentences, settings.seed + 3),
        vocab_size=vocab, eos_id=eos_id,
    )


_DATA_CACHE: dict[tuple[str, str], SentenceData] = {}


def load_data(settings: MicmcoPtbParams, data_root: str | os.PathLike) -> SentenceData:
    """The profile's sentences of ``settings.corpus`` under ``data_root`` (cached per process)."""
    from paperlib.data import EOS, UNK, load_corpus

    key = (str(data_root), settings.trial_fingerprint() + settings.test_fingerprint())
    if key not in _DATA_CACHE:
        corpus = load_corpus(settings.corpus, data_root)
        splits = {split: corpus.sentences(split) for split in ("train", "valid", "test")}
        _DATA_CACHE[key] = prepare_sentences(splits, len(corpus.vocab), corpus.vocab.stoi[EOS],
                                             corpus.vocab.stoi.get(UNK), settings)
    return _DATA_CACHE[key]


def _batch_stream(sentences: list[Tensor], batch_size: int, eos_id: int, seed: int) -> Iterator[SentenceBatch]:
    """Endless shuffled epochs of full batches (an epoch's last, smaller batch is dropped unless it is the only one)."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        for batch in sentence_batches(sentences, batch_size, eos_id, shuffle=True, generator=generator):
            if len(batch.lengths) == min(batch_size, len(sentences)):
                yield batch


# ---------------------------------------------------------------------------------------------------
# training and evaluation


def build_model(curve: Curve, params: Mapping[str, float], settings: MicmcoPtbParams, vocab_size: int) -> SentenceVAE:
    """The §5.7.2 model of ``curve``, with the trial's dropout rates for the dropout regimes."""
    dropout = None
    if curve.regime in ("shared", "naive"):
        dropout = DropoutRates(input=float(params["input_dropout"]), state=float(params["state_dropout"]),
                               output=float(params["output_dropout"]))
    return SentenceVAE(vocab_size, settings.hidden_size * curve.hidden_factor, curve.estimator.latent,
                       settings.latent_dim, settings.num_categorical, settings.categories, dropout, curve.mask_mode,
                       settings.tie_embeddings)


def per_token(s: Surrogates, tokens: int) -> Surrogates:
    """Rescale per-sentence surrogates ``[B]`` so that ``-mean`` becomes the negative objective per token."""
    scale = s.model.shape[0] / tokens
    if s.model is s.encoder:
        scaled = s.model * scale
        return Surrogates(scaled, scaled)
    return Surrogates(s.model * scale, s.encoder * scale)


def train(model: SentenceVAE, curve: Curve, params: Mapping[str, float], sentences: list[Tensor], eos_id: int,
          steps: int, batch_size: int, seed: int, score_at: Sequence[int] = (),
          score: Callable[[int], None] | None = None) -> TrainResult:
    """Adam (beta_1 = 0, beta_2 = 0.999, eps = 1e-8; §5.C) on the curve's objective, per-token loss.

    L2 (``params["l2_penalty"]``, regime ``"l2"``) is Adam's weight decay of 2 x coefficient, i.e. the gradient of
    coefficient x ||theta||^2. Stops early, flagged ``diverged``, when the objective becomes non-finite.
    ``score(n)`` is called, with the model in eval mode, after each step count n in ``score_at`` (a scale ladder
    scores one run at several budgets; it must leave the random state as it found it, as :func:`evaluate` does).
    """
    started = time.perf_counter()
    device = next(model.parameters()).device
    l2 = float(params.get("l2_penalty", 0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=float(params["learning_rate"]), betas=(0.0, 0.999), eps=1e-8,
                                 weight_decay=2.0 * l2)
    model.train()
    stream = _batch_stream(sentences, batch_size, eos_id, seed)
    tail = max(1, steps // 10)
    tail_values: list[float] = []
    for step in range(steps):
        batch = next(stream)
        batch = SentenceBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.mask, batch.lengths)))
        tokens = int(batch.lengths.sum())
        optimizer.zero_grad(set_to_none=True)
        s = per_token(step_surrogates(model, batch, curve.estimator, params), tokens)
        s.backward(model.model_parameters(), model.encoder_parameters())
        value = float(s.model.detach().mean())  # the objective per token
        if not math.isfinite(value):
            model.eval()
            return TrainResult(step + 1, time.perf_counter() - started, value, True)
        optimizer.step()
        if step >= steps - tail:
            tail_values.append(value)
        if score is not None and step + 1 in score_at:
            model.eval()
            score(step + 1)
            model.train()
    model.eval()
    return TrainResult(steps, time.perf_counter() - started, float(np.mean(tail_values)), False)


EVAL_TOKEN_SAMPLES = 2**16  # sample x token evaluations per evaluation chunk


@torch.no_grad()
def evaluate(model: SentenceVAE, sentences: Sequence[Tensor], eos_id: int, num_samples: int = 100,
             seed: int = 0) -> dict[str, float]:
    """Per-token NLL (-IWAE, eq. 5.8), KL (U^K - ln p^K, §5.7.1) and diagnostics with K = ``num_samples``.

    Also the per-token ELBO NLL of the same samples (>= the IWAE NLL by Jensen), the closed-form representational
    KL(q(z|x) || p(z)) per token, and the KL per sentence. Sentences are evaluated in length-sorted chunks without
    dropout; the sampling is seeded, so the result is a deterministic function of the model.
    """
    model.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    chunks: list[list[int]] = [[]]
    budget = 0
    for i in order:
        cost = num_samples * len(sentences[i])
        if chunks[-1] and budget + cost > EVAL_TOKEN_SAMPLES:
            chunks.append([])
            budget = 0
        chunks[-1].append(i)
        budget += cost
    totals = {"log_p": 0.0, "kl": 0.0, "elbo": 0.0, "q_kl": 0.0}
    device = next(model.parameters()).device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for chunk in chunks:
            batch = pad_sentences([sentences[i] for i in chunk], eos_id)
            batch = SentenceBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.mask, batch.lengths)))
            log_px_z, log_pz, log_qz = model.log_densities(batch, num_samples)  # [K, b] each
            totals["log_p"] += float(iwae_bound(log_px_z, log_pz, log_qz).sum())
            totals["kl"] += float(mutual_information(log_px_z, log_pz, log_qz).sum())
            totals["elbo"] += float((log_px_z + log_pz - log_qz).mean(0).sum())
            totals["q_kl"] += float(model.representational_kl(batch).sum())
    tokens = sum(len(s) for s in sentences)
    return {"nll": -totals["log_p"] / tokens, "kl": totals["kl"] / tokens, "elbo_nll": -totals["elbo"] / tokens,
            "q_kl": totals["q_kl"] / tokens, "kl_per_sentence": totals["kl"] / len(sentences),
            "sentences": len(sentences), "tokens": tokens}


DIVERGED_NLL = 10.0  # x ln V: an evaluated NLL per token this far above the uniform model's means a broken model


def run_trial(curve: Curve, params: Mapping[str, float], data: SentenceData, settings: MicmcoPtbParams,
              seed: int) -> tuple[dict[str, Any], SentenceVAE]:
    """Train one model of ``curve`` with ``params`` and evaluate it on the curve's split; returns (record, model).

    A trial diverged when its training objective became non-finite or when the evaluated NLL per token exceeds
    ``DIVERGED_NLL`` x ln V (a finite objective can still leave e.g. posterior means so large that the bound
    explodes); its NLL and KL are then NaN, which fails the Optuna trial.
    """
    device = stage_device()
    torch.manual_seed(seed)
    model = build_model(curve, params, settings, data.vocab_size).to(device)
    result = train(model, curve, params, data.train, data.eos_id, settings.steps * curve.steps_factor,
                   settings.batch_size * curve.batch_factor, seed)
    record: dict[str, Any] = {"steps": result.steps, "train_seconds": round(result.seconds, 2),
                              "final_objective": result.final_objective, "diverged": result.diverged}
    diverged = {"diverged": True, "nll": math.nan, "kl": math.nan, "elbo_nll": math.nan, "q_kl": math.nan}
    if result.diverged:
        return {**record, **diverged, "eval_seconds": 0.0}, model
    started = time.perf_counter()
    scores = evaluate(model, data.split(curve.split), data.eos_id, settings.eval_samples, seed + 1)
    seconds = round(time.perf_counter() - started, 2)
    if not scores["nll"] <= DIVERGED_NLL * math.log(data.vocab_size):
        return {**record, **diverged, "eval_seconds": seconds}, model
    return {**record, **{k: scores[k] for k in ("nll", "kl", "elbo_nll", "q_kl")}, "eval_seconds": seconds}, model


# ---------------------------------------------------------------------------------------------------
# studies (one per curve, resumable)


def study_name(curve_name: str, profile: str, settings: MicmcoPtbParams) -> str:
    code = code_hash(__name__)  # a study made by other code starts anew
    return f"{curve_name}-{profile}-{settings.trial_fingerprint()}-{code[:8]}" + "".join(f"-{v}" for v in cache_key().values())


def _checkpoint_path(runs_dir: Path, study: str) -> Path:
    return runs_dir / f"{study}.best.pt"


def _save_checkpoint(path: Path, trial: int, model: SentenceVAE) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save({"trial": trial, "state": model.state_dict()}, tmp)
    os.replace(tmp, path)


def run_curve_study(name: str, settings: MicmcoPtbParams, data: SentenceData, runs_dir: str | os.PathLike,
                    profile: str, progress: bool = False) -> list[dict[str, Any]]:
    """Tune curve ``name`` until ``settings.trials`` trials have finished (resuming its SQLite study).

    The tuner sees (NLL, min(KL, ``kl_cap``)) per token; the raw KL estimate is kept as ``kl_estimate``. The model
    of the best trial so far (lowest NLL) is saved for Table 5.1. Returns the trial records (``kl`` = capped KL).
    """
    import optuna

    curve = CURVES[name] if name in CURVES else curve_of(name)
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    study_id = study_name(name, profile, settings)
    study = open_study(study_id, f"sqlite:///{runs_dir / study_id}.sqlite3", settings.seed, settings.startup_trials)
    fail_stale_trials(study)
    space = curve.space
    design = halton_design(space, settings.startup_trials, settings.seed)
    checkpoint = _checkpoint_path(runs_dir, study_id)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        params = suggest_space(trial, space)
        record, model = run_trial(curve, params, data, settings, settings.seed + 1000 * trial_index(trial))
        for key in ("steps", "train_seconds", "eval_seconds", "final_objective", "diverged", "elbo_nll", "q_kl"):
            trial.set_user_attr(key, record[key])
        trial.set_user_attr("kl_estimate", record["kl"])
        best = min((t.values[0] for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))),
                   default=math.inf)
        if math.isfinite(record["nll"]) and record["nll"] < best:
            _save_checkpoint(checkpoint, trial.number, model)
        if progress:
            shown = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
            print(f"  {curve.label:<22} {curve.regime:<6} trial {trial.number:>3}: NLL {record['nll']:.4f}  "
                  f"KL {record['kl']:.4f}  ({shown}; {record['train_seconds']:.0f}+{record['eval_seconds']:.0f}s)",
                  flush=True)
        return record["nll"], (record["kl"] if not record["kl"] > settings.kl_cap else settings.kl_cap)

    tune(study, objective, design, settings.trials)
    records = trial_records(study)
    for r in records:
        r["kl"] = r.pop("mi")
    return records


def _study_job(name: str, settings: MicmcoPtbParams, runs_dir: str, profile: str, progress: bool,
               data_root: str | None, data: SentenceData | None) -> tuple[str, list[dict[str, Any]], float]:
    import optuna

    torch.set_num_threads(settings.threads)
    setup_stage(profile)  # precision in this (possibly spawned) worker
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if data is None:
        data = load_data(settings, data_root)
    if progress:
        print(f"{EXPERIMENT} [{profile}]: {name} ({CURVES[name].label}, {CURVES[name].regime})", flush=True)
    started = time.time()
    records = run_curve_study(name, settings, data, runs_dir, profile, progress)
    return name, records, round(time.time() - started, 1)


# ---------------------------------------------------------------------------------------------------
# frontiers, Table 5.1, claims


def _points(records: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    nll = np.array([np.nan if r.get("nll") is None else r["nll"] for r in records], dtype=float)
    kl = np.array([np.nan if r.get("kl") is None else r["kl"] for r in records], dtype=float)
    return nll, kl


def frontier(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated trials (minimise NLL, maximise KL), by increasing KL."""
    nll, kl = _points(records)
    return [{"trial": int(records[i]["number"]), "nll": float(nll[i]), "kl": float(kl[i])}
            for i in pareto_front(nll, kl)]


def compare_hypervolumes(curves: Mapping[str, Mapping[str, Any]], names: Sequence[str], margin: float,
                         kl_cap: float) -> dict[str, Any]:
    """Normalised hypervolumes of ``names`` against a common reference (best NLL among them + ``margin``, KL 0)."""
    present = [n for n in names if n in curves]
    nlls = [_points(curves[n]["trials"])[0] for n in present]
    best = [v[np.isfinite(v)].min() for v in nlls if np.isfinite(v).any()]
    if not best:
        return {"reference_nll": None, "hypervolume": {n: None for n in present}}
    reference = (float(min(best)) + margin, 0.0)
    volumes = {}
    for n in present:
        nll, kl = _points(curves[n]["trials"])
        volumes[n] = hypervolume(nll, kl, reference, mi_cap=kl_cap) / (margin * kl_cap)
    return {"reference_nll": reference[0], "hypervolume": volumes}


def summarise_figures(curves: Mapping[str, Mapping[str, Any]], settings: MicmcoPtbParams) -> dict[str, Any]:
    """Per selected figure: the curves run, their normalised hypervolumes on the figure's common reference and
    their NLL at the KL levels (interpolated along the frontier; None where a frontier does not reach a level)."""
    out = {}
    for fig_id in settings.selected_figures:
        figure = FIGURES[fig_id]
        names = [n for n in figure.configurations if n in curves]
        hv = compare_hypervolumes(curves, names, settings.hv_margin, settings.kl_cap)
        at_levels = {}
        for n in names:
            front = curves[n]["frontier"]
            values = nll_at_mi([p["kl"] for p in front], [p["nll"] for p in front], settings.kl_levels)
            at_levels[n] = [float(v) if math.isfinite(v) else None for v in values]
        out[fig_id] = {"title": figure.title, "curves": figure.configurations, "thesis_says": figure.thesis_says,
                       "regime": sorted({CURVES[n].regime for n in figure.configurations}),
                       "reference_nll": hv["reference_nll"], "normalised_hypervolume": hv["hypervolume"],
                       "nll_at_kl": at_levels}
    return out


def hidden_sizes(result: Mapping[str, Any]) -> list[int]:
    """The decoder hidden sizes the curves of ``result`` (:func:`run_micmco_ptb`'s JSON) ran at, smallest first;
    the profile's base size when no curve records one (2 sizes when Figs. 5.18 / 5.21 ran: base and x2)."""
    sizes = {int(c["hidden_size"]) for c in result["curves"].values() if c.get("hidden_size")}
    return sorted(sizes) or [int(result["settings"]["hidden_size"])]


def extra_minutes(result: Mapping[str, Any], fig: str) -> float | None:
    """Minutes figure ``fig`` would add to this stage at the profile of ``result`` (:func:`run_micmco_ptb`'s JSON):
    per curve not yet run, its cost units (:attr:`Curve.cost`) times the measured seconds per unit of the run curves
    with the same estimator (of all run curves when none has it), over the parallel workers. None without timed
    trials."""
    curves = {n: c for n, c in result["curves"].items() if n in CURVES}

    def rate(names: list[str]) -> float | None:
        seconds = sum(float(t.get("train_seconds") or 0.0) + float(t.get("eval_seconds") or 0.0)
                      for n in names for t in curves[n].get("trials", []))
        units = sum(CURVES[n].cost * len(curves[n].get("trials", [])) for n in names)
        return seconds / units if seconds and units else None

    pooled = rate(list(curves))
    if pooled is None:
        return None
    missing = [n for n in FIGURES[fig].configurations if n not in curves]
    total = 0.0
    for name in missing:
        same = [n for n in curves if n.split(".")[0] == name.split(".")[0]]
        total += CURVES[name].cost * (rate(same) or pooled)
    workers = max(1, int(result["settings"].get("workers") or 1))
    return total * result["settings"]["trials"] / workers / 60


def _best_trial(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    finite = [r for r in records if r.get("nll") is not None and math.isfinite(r["nll"])]
    return min(finite, key=lambda r: r["nll"]) if finite else None


def best_model(name: str, record: Mapping[str, Any], settings: MicmcoPtbParams, data: SentenceData,
               runs_dir: Path, profile: str, *, index: int) -> SentenceVAE:
    """The model of trial ``record`` of curve ``name``: from its checkpoint, or retrained with the trial's seed
    (``index``: its place among the curve's records, see :func:`paperlib.experiments.micmco_synthetic.trial_index`)."""
    curve = CURVES[name]
    path = _checkpoint_path(runs_dir, study_name(name, profile, settings))
    if path.is_file():
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if saved["trial"] == record["number"]:
            model = build_model(curve, record["params"], settings, data.vocab_size)
            model.load_state_dict(saved["state"])
            return model.to(stage_device()).eval()
    _, model = run_trial(curve, record["params"], data, settings, settings.seed + 1000 * index)
    _save_checkpoint(path, int(record["number"]), model)
    return model.eval()


def table_5_1(curves: Mapping[str, Mapping[str, Any]], settings: MicmcoPtbParams, data: SentenceData,
              runs_dir: str | os.PathLike, profile: str, progress: bool = False) -> list[dict[str, Any]]:
    """Rows of Table 5.1: per hidden size and column, the best-validation trial of the column's shared-mask
    curves, evaluated on the test set with ``test_samples`` samples (cached), beside the thesis' numbers."""
    runs_dir = Path(runs_dir)
    rows = []
    for thesis_hs, variants in TABLE_5_1_VARIANTS.items():
        factor = VARIANTS[variants[0]][2]
        for column, stem in TABLE_5_1_COLUMNS.items():
            row: dict[str, Any] = {"thesis_hidden": thesis_hs, "hidden_size": settings.hidden_size * factor,
                                   "column": column, "thesis": THESIS_TABLE_5_1[thesis_hs][column]}
            candidates = [(n, _best_trial(curves[n]["trials"])) for n in (f"{stem}.shared{v}" for v in variants)
                          if n in curves]
            candidates = [(n, r) for n, r in candidates if r is not None]
            if not candidates:
                rows.append({**row, "curve": None})
                continue
            name, record = min(candidates, key=lambda c: c[1]["nll"])
            cache = runs_dir / f"{study_name(name, profile, settings)}.test-{record['number']}-" \
                               f"{settings.test_fingerprint()}.json"
            if cache.is_file():
                scores = json.loads(cache.read_text())
            else:
                if progress:
                    print(f"{EXPERIMENT}: Table 5.1 {column} (hs {row['hidden_size']}): test evaluation of {name} "
                          f"trial {record['number']}", flush=True)
                model = best_model(name, record, settings, data, runs_dir, profile,
                                   index=curves[name]["trials"].index(record))
                started = time.perf_counter()
                scores = evaluate(model, data.test, data.eos_id, settings.test_samples, settings.seed + 7)
                scores["seconds"] = round(time.perf_counter() - started, 1)
                cache.write_text(json.dumps(scores))
            rows.append({**row, "curve": name, "trial": record["number"], "params": record["params"],
                         "valid_nll": record["nll"], "valid_kl": record["kl"], "test_nll": scores["nll"],
                         "test_perplexity": math.exp(scores["nll"]), "test_kl": scores["kl"],
                         "test_elbo_nll": scores["elbo_nll"], "test_q_kl": scores["q_kl"],
                         "test_sentences": scores["sentences"], "test_tokens": scores["tokens"]})
    return rows


PPL_TOLERANCE = 0.03  # "barely changes": best perplexities within 3% (the thesis' largest gap is 2.6%)
LOW_KL = 0.2  # "low latent usage" of Table 5.1's optima, nats per token (the thesis' largest is 0.167)


def _tie_note(ties: int, total: int) -> str:
    """Say how many comparisons fell within the tie: "not reproduced" then means no difference was detected."""
    if ties == total:
        return f"all {total} comparisons within the {HV_TIE} tie: no difference detected either way"
    return f"{ties} of {total} comparisons within the {HV_TIE} tie"


def _claim(claim: str, rule: str, wins: Mapping[str, bool], evidence: dict[str, str]) -> dict[str, Any]:
    """A claim's record: its rule, the comparisons it won (``wins``), their evidence and the pooled verdict."""
    return {"claim": claim, "rule": rule, "evidence": evidence, "verdict": verdict_of(sum(wins.values()), len(wins)),
            "wins": dict(wins)}


def _claim_with_ties(claim: str, rule: str, wins: Mapping[str, bool], evidence: dict[str, str],
                     ties: int) -> dict[str, Any]:
    """A verdict whose evidence also counts the comparisons that fell within the tie."""
    if wins:
        evidence["ties"] = _tie_note(ties, len(wins))
    return _claim(claim, rule, wins, evidence)


def claim_verdicts(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Decide the thesis' PTB claims on ``results`` (the JSON of :func:`run_micmco_ptb`) by explicit rules.

    HV is the normalised hypervolume on a reference common to the compared curves; "A beats B" means
    HV(A) > HV(B) + 0.02 (:data:`paperlib.experiments.micmco_synthetic.HV_TIE`).

    1. *Shared masks restore the validation frontiers* (Figs. 5.10 vs 5.12): for each 16-sample estimator run
       with both, HV(shared) beats HV(naive).
    2. *Multiple samples improve latent usage* (Figs. 5.8, 5.9, 5.11, 5.12): in each of these figures, for each base
       estimator and objective, HV(16) beats HV(1).
    3. *Latents barely change the best perplexity* (Table 5.1): per base estimator and hidden size, the best test
       perplexity of the 16-sample columns is within 3% of the single-sample one.
    4. *Table 5.1's optima are at low latent usage*: every row's test KL is at most 0.2 nats per token.
    5. *Dropout beats L2 on the best NLL* (Fig. 5.11): per base estimator, the lowest validation NLL with shared
       dropout masks is below the lowest with L2.
    6. *Discrete latents fit the training data better* (Figs. 5.8 vs 5.9): per 16-sample objective (KL, Rényi),
       HV(VIMCO) beats HV(DReG) on the training-fit curves, with KL capped at the most the categorical latents
       can carry per token (``num_categorical * ln(categories)`` per sentence over the mean sentence length), so
       that continuous latents gain no area where discrete ones cannot go.
    7. *The power objective is better than KL but behind Rényi* (Figs. 5.28, 5.29): per base estimator, HV(power)
       beats HV(KL), and HV(Rényi) beats HV(power) -- two checks per figure.

    8. *Gains need multiple samples in both terms* (Figs. 5.22, 5.23): per base estimator and objective (KL, Rényi),
       on the training fit, HV(16/16) beats both HV(16/1) (16 samples in the likelihood term only) and HV(1/16)
       (16 in the divergence term only), on the reference of the figure's curves.
    9. *16 samples generalise better than one sample given the same compute* (Figs. 5.14, 5.25, validation): the
       better of HV(16 KL) and HV(16 Rényi) beats the single-sample estimator trained 16x longer (T×16) and the one
       trained with 16x larger batches (bs×16), on a reference common to these curves.
    10. *16x compute buys one sample a better best fit but not a better tradeoff* (Figs. 5.13, 5.24, training fit;
        the thesis: "their best NLL at very low latent usage is lower than that of VIMCO 16, [but] they lose this
        advantage at higher latent usage"): per ×16 variant, its lowest NLL is below the 16-sample estimators'
        lowest, and the better 16-sample HV still beats its HV.
    11. *Batch size and optimisation length shift the curves but keep their order* (§5.B.1; Figs. 5.16, 5.17,
        5.19-5.21, length also at twice the hidden size in 5.21): per figure and pair of its three estimators (1,
        16 KL, 16 Rényi) separated by more than the tie at either setting of the factor, the pair is not separated
        the other way at the other setting ("relative positions the same": a gap may widen or close, the order may
        not reverse); HVs per setting on the reference of that setting's curves, since the factor moves all curves.
        Pairs tied at both settings are not counted; a figure whose pairs all tie fails (no order to keep).
    12. *At 256 units the three DReG estimators differ very little* (Fig. 5.18, the thesis' exception to 11): at
        each length, their HVs lie within the tie of each other, and closer than at the base hidden size (Fig. 5.17)
        when that ran.

    Verdicts as in :func:`paperlib.experiments.micmco_synthetic.verdict_of`; claims whose curves did not run say so. For 6-11 the
    evidence also counts the comparisons within the tie, which separates "no difference detected" from "the
    opposite holds". Claims 2 and 6-12 also list each comparison's outcome (``wins``); keys that start with a
    figure id let the results index give each figure its own verdict.
    """
    curves = results["curves"]
    margin, cap = results["settings"]["hv_margin"], results["settings"]["kl_cap"]
    verdicts = []

    # 1
    wins, evidence = {}, {}
    for stem in ("dreg16_kl", "dreg16_renyi", "vimco16_kl", "vimco16_renyi"):
        shared, naive = f"{stem}.shared", f"{stem}.naive"
        if shared in curves and naive in curves:
            hv = compare_hypervolumes(curves, [shared, naive], margin, cap)["hypervolume"]
            if hv[shared] is not None:
                wins[stem] = hv[shared] > hv[naive] + HV_TIE
                evidence[stem] = f"HV shared / naive = {hv[shared]:.3f} / {hv[naive]:.3f}"
    verdicts.append(_claim("shared dropout masks restore the validation frontiers",
                           f"HV(shared) > HV(naive) + {HV_TIE} per 16-sample estimator (Figs. 5.10, 5.12)",
                           wins, evidence))
    # 2
    wins, evidence = {}, {}
    for fig_id, regime, bases in (("5.8", "train", ("dreg",)), ("5.9", "train", ("vimco",)),
                                  ("5.11", "l2", ("dreg", "vimco")), ("5.12", "shared", ("dreg", "vimco"))):
        for base in bases:
            one = f"{base}1.{regime}"
            many = [f"{base}16_{o}.{regime}" for o in ("kl", "renyi")]
            if one not in curves:
                continue
            hv = compare_hypervolumes(curves, [one, *many], margin, cap)["hypervolume"]
            for name in many:
                if name in curves and hv.get(name) is not None:
                    wins[f"{fig_id} {name}"] = hv[name] > hv[one] + HV_TIE
                    evidence[f"{fig_id} {name}"] = f"HV 16 / 1 = {hv[name]:.3f} / {hv[one]:.3f}"
    verdicts.append(_claim("multiple samples improve latent usage",
                           f"HV(16) > HV(1) + {HV_TIE} per estimator and objective in Figs. 5.8, 5.9, 5.11, 5.12",
                           wins, evidence))
    # 3 and 4
    rows = [r for r in results.get("table_5_1", []) if r.get("curve")]
    wins, evidence = {}, {}
    for thesis_hs in TABLE_5_1_VARIANTS:
        for base, label in (("dreg", "DReG"), ("vimco", "VIMCO")):
            one = [r for r in rows if r["thesis_hidden"] == thesis_hs and r["column"] == f"{label} 1 K/R"]
            many = [r for r in rows if r["thesis_hidden"] == thesis_hs and r["column"].startswith(f"{label} 16")]
            if one and many:
                best = min(many, key=lambda r: r["test_perplexity"])
                change = best["test_perplexity"] / one[0]["test_perplexity"] - 1.0
                key = f"{label} hs {one[0]['hidden_size']}"
                wins[key] = abs(change) <= PPL_TOLERANCE
                evidence[key] = (f"perplexity 1 / best 16 = {one[0]['test_perplexity']:.1f} / "
                                 f"{best['test_perplexity']:.1f} ({100 * change:+.1f}%)")
    verdicts.append(_claim("latents barely change the best perplexity",
                           f"|best 16-sample / 1-sample test perplexity - 1| <= {PPL_TOLERANCE:.0%} per estimator "
                           "and hidden size (Table 5.1)", wins, evidence))
    verdicts.append(_claim("Table 5.1's optima are at low latent usage",
                           f"test KL <= {LOW_KL} nats per token in every row",
                           {f"{r['column']} hs {r['hidden_size']}": r["test_kl"] <= LOW_KL for r in rows},
                           {f"{r['column']} hs {r['hidden_size']}": f"KL {r['test_kl']:.3f}" for r in rows}))
    # 5
    wins, evidence = {}, {}
    for base in ("dreg", "vimco"):
        best = {}
        for regime in ("shared", "l2"):
            values = [_points(curves[f"{stem}.{regime}"]["trials"])[0] for stem in _trio(base)
                      if f"{stem}.{regime}" in curves]
            finite = [v[np.isfinite(v)] for v in values if np.isfinite(v).any()]
            if finite:
                best[regime] = float(min(v.min() for v in finite))
        if len(best) == 2:
            wins[base] = best["shared"] < best["l2"]
            evidence[base] = f"best NLL dropout / L2 = {best['shared']:.4f} / {best['l2']:.4f}"
    verdicts.append(_claim("dropout reaches a better best NLL than L2",
                           "min validation NLL over shared-mask curves < min over L2 curves, per base estimator",
                           wins, evidence))
    # 6 (KL capped at what the discrete latents can carry, so that continuous ones gain no area beyond it)
    wins, evidence, ties = {}, {}, 0
    settings, data = results["settings"], results.get("data", {})
    discrete_cap = cap
    if data.get("train_eval_tokens") and data.get("train_eval_sentences") and settings.get("num_categorical"):
        per_sentence = settings["num_categorical"] * math.log(settings["categories"])
        discrete_cap = min(cap, per_sentence * data["train_eval_sentences"] / data["train_eval_tokens"])
    for objective in ("kl", "renyi"):
        discrete, continuous = f"vimco16_{objective}.train", f"dreg16_{objective}.train"
        if discrete in curves and continuous in curves:
            hv = compare_hypervolumes(curves, [discrete, continuous], margin, discrete_cap)["hypervolume"]
            if hv[discrete] is not None:
                wins[objective] = hv[discrete] > hv[continuous] + HV_TIE
                ties += abs(hv[discrete] - hv[continuous]) <= HV_TIE
                evidence[objective] = f"HV VIMCO 16 / DReG 16 = {hv[discrete]:.3f} / {hv[continuous]:.3f}"
    rule = (f"HV(VIMCO 16) > HV(DReG 16) + {HV_TIE} per objective on the training fit (Figs. 5.8, 5.9), KL capped "
            f"at the discrete latents' entropy per token ({discrete_cap:.2f} nats)")
    verdicts.append(_claim_with_ties("discrete latents fit the training data better", rule, wins, evidence, ties))
    # 7
    wins, evidence, ties = {}, {}, 0
    for fig_id, base in (("5.28", "dreg"), ("5.29", "vimco")):
        kl, renyi, power = (f"{base}16_{o}.train" for o in ("kl", "renyi", "power"))
        if not all(n in curves for n in (kl, renyi, power)):
            continue
        hv = compare_hypervolumes(curves, [kl, renyi, power], margin, cap)["hypervolume"]
        if hv[power] is None:
            continue
        wins[f"{fig_id} power > KL"] = hv[power] > hv[kl] + HV_TIE
        wins[f"{fig_id} Rényi > power"] = hv[renyi] > hv[power] + HV_TIE
        ties += (abs(hv[power] - hv[kl]) <= HV_TIE) + (abs(hv[renyi] - hv[power]) <= HV_TIE)
        evidence[fig_id] = f"HV KL / power / Rényi = {hv[kl]:.3f} / {hv[power]:.3f} / {hv[renyi]:.3f}"
    rule = (f"HV(power) > HV(KL) + {HV_TIE} and HV(Rényi) > HV(power) + {HV_TIE} per base estimator on the training "
            "fit (Figs. 5.28, 5.29)")
    verdicts.append(_claim_with_ties("the power objective is better than KL but behind Rényi", rule, wins, evidence,
                                     ties))
    # 8
    wins, evidence, ties = {}, {}, 0
    for fig_id, base in (("5.22", "dreg"), ("5.23", "vimco")):
        both = {o: f"{base}16_{o}.train" for o in ("kl", "renyi")}
        lik_only = f"{base}16-1.train"
        div_only = {o: f"{base}1-16_{o}.train" for o in ("kl", "renyi")}
        names = [n for n in FIGURES[fig_id].configurations if n in curves]
        if not all(n in curves for n in (*both.values(), lik_only, *div_only.values())):
            continue
        hv = compare_hypervolumes(curves, names, margin, cap)["hypervolume"]
        if any(hv[n] is None for n in (*both.values(), lik_only, *div_only.values())):
            continue
        for o, name in both.items():
            for other, tag in ((lik_only, "16/1"), (div_only[o], "1/16")):
                wins[f"{fig_id} {o} 16/16 > {tag}"] = hv[name] > hv[other] + HV_TIE
                ties += abs(hv[name] - hv[other]) <= HV_TIE
        evidence[fig_id] = (f"HV 16/1 {hv[lik_only]:.3f}; KL 1/16 / 16/16 = {hv[div_only['kl']]:.3f} / "
                            f"{hv[both['kl']]:.3f}; Rényi 1/16 / 16/16 = {hv[div_only['renyi']]:.3f} / "
                            f"{hv[both['renyi']]:.3f}")
    rule = (f"HV(16/16) > HV(16/1) + {HV_TIE} and HV(16/16) > HV(1/16) + {HV_TIE} per base estimator and objective "
            "on the training fit (Figs. 5.22, 5.23)")
    verdicts.append(_claim_with_ties("gains need multiple samples in both terms", rule, wins, evidence, ties))
    # 9 and 10
    val_wins, val_evidence, val_ties = {}, {}, 0
    fit_wins, fit_evidence, fit_ties = {}, {}, 0
    for fig_id, base, regime in (("5.13", "vimco", "train"), ("5.14", "vimco", "shared"),
                                 ("5.24", "dreg", "train"), ("5.25", "dreg", "shared")):
        single = f"{base}1.{regime}"
        longer, larger = f"{single}.T16", f"{single}.bs16"
        many = [f"{base}16_{o}.{regime}" for o in ("kl", "renyi")]
        if not all(n in curves for n in (single, longer, larger, *many)):
            continue
        hv = compare_hypervolumes(curves, [single, longer, larger, *many], margin, cap)["hypervolume"]
        if any(hv[n] is None for n in (longer, larger, *many)):
            continue
        best = max(hv[n] for n in many)
        shown = (f"HV 1 / 1 T×16 / 1 bs×16 / best 16 = {hv[single]:.3f} / {hv[longer]:.3f} / {hv[larger]:.3f} / "
                 f"{best:.3f}")
        if regime == "shared":  # 9: validation
            for name, tag in ((longer, "T×16"), (larger, "bs×16")):
                val_wins[f"{fig_id} 16 > 1 {tag}"] = best > hv[name] + HV_TIE
                val_ties += abs(best - hv[name]) <= HV_TIE
            val_evidence[fig_id] = shown
            continue
        lowest = {name: (_best_trial(curves[name]["trials"]) or {"nll": math.inf})["nll"]  # 10: training fit
                  for name in (longer, larger, *many)}
        best_16 = min(lowest[n] for n in many)
        for name, tag in ((longer, "T×16"), (larger, "bs×16")):
            fit_wins[f"{fig_id} 1 {tag}"] = lowest[name] < best_16 and best > hv[name] + HV_TIE
            fit_ties += abs(best - hv[name]) <= HV_TIE
        fit_evidence[fig_id] = (f"lowest NLL 1 T×16 / 1 bs×16 / best 16 = {lowest[longer]:.4f} / {lowest[larger]:.4f} "
                                f"/ {best_16:.4f}; {shown}")
    rule = (f"max(HV(16 KL), HV(16 Rényi)) > HV(1 T×16) + {HV_TIE} and > HV(1 bs×16) + {HV_TIE} on validation "
            "(Figs. 5.14, 5.25)")
    verdicts.append(_claim_with_ties("16 samples generalise better than one sample given the same compute", rule,
                                     val_wins, val_evidence, val_ties))
    rule = ("per single-sample run with 16x compute (T×16, bs×16): its lowest training NLL is below the 16-sample "
            f"estimators' lowest, and yet max(HV(16 KL), HV(16 Rényi)) > its HV + {HV_TIE} (Figs. 5.13, 5.24)")
    verdicts.append(_claim_with_ties("16x compute buys one sample a better best fit but not a better tradeoff", rule,
                                     fit_wins, fit_evidence, fit_ties))
    # 11 and 12: robustness (§5.B.1), each setting's HVs on the reference of its own three curves
    trio_hv: dict[tuple[str, str], list[float]] = {}  # (figure, variant) -> HV of 1, 16 KL, 16 Rényi
    for fig_id, (base, variants) in ROBUSTNESS.items():
        for v in variants:
            names = [f"{stem}.shared{v}" for stem in _trio(base)]
            if all(n in curves for n in names):
                hv = compare_hypervolumes(curves, names, margin, cap)["hypervolume"]
                if all(hv[n] is not None for n in names):
                    trio_hv[fig_id, v] = [hv[n] for n in names]

    def trio_text(fig_id: str) -> str:
        return "; ".join(f"HV {_VARIANT_TAG[v]} 1 / 16 K / 16 R = " + " / ".join(f"{x:.3f}" for x in trio_hv[fig_id, v])
                         for v in ROBUSTNESS[fig_id][1])

    wins, evidence, ties = {}, {}, 0
    for fig_id, (_, variants) in ROBUSTNESS.items():
        if fig_id == "5.18" or not all((fig_id, v) in trio_hv for v in variants):
            continue
        reversed_, one_sided, compared = 0, 0, 0
        for i, j in ((0, 1), (0, 2), (1, 2)):
            classes = [_order(trio_hv[fig_id, v][i], trio_hv[fig_id, v][j]) for v in variants]
            if classes == [0, 0]:  # no order at either setting: nothing to keep
                ties += 1
                continue
            compared += 1
            kept = classes[0] * classes[1] >= 0  # not separated the other way
            wins[f"{fig_id} {_TRIO_TAG[i]} vs {_TRIO_TAG[j]}"] = kept
            reversed_ += not kept
            one_sided += (classes[0] == 0) != (classes[1] == 0)
        if compared:
            evidence[fig_id] = (f"{trio_text(fig_id)}; pairs reversed: {reversed_}, separated at one setting "
                                f"only: {one_sided}")
        else:
            wins[f"{fig_id} order"] = False
            evidence[fig_id] = f"{trio_text(fig_id)}; the three estimators tie at both settings: no order to keep"
    if evidence:
        evidence["ties"] = f"pairs tied at both settings (not counted): {ties}"
    rule = (f"per figure and pair of its three estimators (1, 16 KL, 16 Rényi) that is separated (HV difference > "
            f"{HV_TIE}) at either setting of the factor, the pair is not reversed (separated the other way) at the "
            "other setting, each setting's HVs on the reference of its own curves; a figure whose pairs all tie at "
            "both settings fails (Figs. 5.16, 5.17, 5.19-5.21). The evidence also counts pairs separated at one "
            "setting only (the factor widened or closed a gap)")
    verdicts.append(_claim("batch size and optimisation length shift the curves but keep their order", rule, wins,
                           evidence))
    wins, evidence = {}, {}
    if all(("5.18", v) in trio_hv for v in ROBUSTNESS["5.18"][1]):
        evidence["5.18"] = trio_text("5.18")
        for v, narrow in zip(ROBUSTNESS["5.18"][1], ROBUSTNESS["5.17"][1]):
            spread = max(trio_hv["5.18", v]) - min(trio_hv["5.18", v])
            base_hidden = trio_hv.get(("5.17", narrow))
            base_spread = None if base_hidden is None else max(base_hidden) - min(base_hidden)
            key = f"5.18 {_VARIANT_TAG[v]}"
            wins[key] = spread <= HV_TIE and (base_spread is None or spread < base_spread)
            evidence[key] = f"HV spread {spread:.3f}" + (
                "" if base_spread is None else f" (base hidden size, same length: {base_spread:.3f})")
    rule = (f"at each length, the three DReG estimators' HVs at twice the hidden size lie within {HV_TIE} of each "
            "other, and closer than at the base hidden size when Fig. 5.17 ran (Fig. 5.18, the thesis' exception)")
    verdicts.append(_claim("at 256 units the three DReG estimators differ very little", rule, wins, evidence))
    return verdicts


def _order(a: float, b: float) -> int:
    """+1 if ``a`` beats ``b`` by more than the tie, -1 if ``b`` beats ``a``, 0 within the tie."""
    return 0 if abs(a - b) <= HV_TIE else (1 if a > b else -1)


# ---------------------------------------------------------------------------------------------------
# the experiment


def run_experiment(settings: MicmcoPtbParams, runs_dir: str | os.PathLike, profile: str, progress: bool = False,
                   data: SentenceData | None = None, data_root: str | os.PathLike | None = None
                   ) -> tuple[dict[str, Any], dict[str, float]]:
    """Run (or resume) every study of ``settings`` and assemble the results; returns (results, seconds per study).

    Give either ``data`` (used in this process; requires ``workers == 1``) or ``data_root`` (each worker loads the
    corpus). With ``workers > 1`` studies run in spawned processes, most expensive first.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if data is None and data_root is None:
        raise ValueError("give the sentences (data=...) or the corpus folder (data_root=...)")
    if data is not None and settings.workers > 1:
        raise ValueError("in-memory data needs workers == 1; give data_root for parallel workers")
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(settings.selected, key=lambda n: CURVES[n].cost, reverse=True)
    root_arg = None if data_root is None else str(data_root)
    jobs = [(n, settings, str(runs_dir), profile, progress, root_arg, data) for n in names]
    if settings.workers == 1:
        threads = torch.get_num_threads()
        try:
            finished = [_study_job(*job) for job in jobs]
        finally:
            torch.set_num_threads(threads)
    else:  # spawn: forking a process whose OpenMP pool is running can deadlock
        with ProcessPoolExecutor(settings.workers, mp_context=get_context("spawn")) as pool:
            finished = list(pool.map(_study_job, *zip(*jobs)))
    curves: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, records, elapsed in sorted(finished, key=lambda job: settings.selected.index(job[0])):
        curve = CURVES[name]
        seconds[name] = elapsed
        best = _best_trial(records)
        curves[name] = {
            "label": curve.label, "regime": curve.regime, "split": curve.split,
            "estimator": asdict(curve.estimator), "steps_factor": curve.steps_factor,
            "batch_factor": curve.batch_factor, "hidden_size": settings.hidden_size * curve.hidden_factor,
            "search_space": {k: asdict(r) for k, r in curve.space.items()},
            "trials": records, "frontier": frontier(records),
            "best": None if best is None else {"trial": best["number"], "nll": best["nll"], "kl": best["kl"],
                                               "perplexity": math.exp(best["nll"])},
        }
    if data is None:
        data = load_data(settings, data_root)
    results: dict[str, Any] = {
        "experiment": EXPERIMENT, "profile": profile, "settings": asdict(settings), "data": data.summary(),
        "curves": curves, "thesis_table_5_1": {str(k): v for k, v in THESIS_TABLE_5_1.items()},
    }
    results["figures"] = summarise_figures(curves, settings)
    started = time.time()
    if settings.table_5_1:
        threads = torch.get_num_threads()
        torch.set_num_threads(settings.threads * settings.workers)
        try:
            results["table_5_1"] = table_5_1(curves, settings, data, runs_dir, profile, progress)
        finally:
            torch.set_num_threads(threads)
    else:
        results["table_5_1"] = []
    seconds["table_5_1"] = round(time.time() - started, 1)
    results["claims"] = claim_verdicts(results)
    return results, seconds


def run_micmco_ptb(profile: str | None = None, progress: bool = True, out: str | os.PathLike | None = None,
                   runs_dir: str | os.PathLike | None = None, params: dict[str, Any] | None = None) -> Path:
    """Run (or resume) the profile's studies and Table 5.1; write ``results/micmco_ptb.json`` plus provenance.

    ``params``: an already loaded ``params.yaml`` mapping (default: the repository's). Studies live in
    ``runs/micmco_ptb/`` (scratch; resumable).
    """
    from paperlib.experiments.config import active_profile, experiment_params, load_params, repo_root, section_params
    from paperlib.data import pinned_checksums
    from paperlib.experiments.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    root = repo_root()
    params = params if params is not None else load_params()
    profile = active_profile(profile, params)
    settings: MicmcoPtbParams = experiment_params(EXPERIMENT, profile, params)
    setup_stage(profile, params)
    data_root = root / section_params("data", params).root
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / EXPERIMENT
    results, seconds = run_experiment(settings, runs_dir, profile, progress, data_root=data_root)
    out = Path(out) if out is not None else root / "results" / f"{EXPERIMENT}.json"
    write_json_atomic(out, json_safe(results))
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, asdict(settings), pinned_checksums(settings.corpus), started,
                                    code=code_hash(__name__)),
                       "study_seconds": seconds})
    return out


__all__ = [
    "CURVES", "ESTIMATORS", "FIGURES", "PTB_RANGES", "THESIS_TABLE_5_1", "Curve", "MicmcoPtbParams", "SentenceData",
    "build_model", "claim_verdicts", "compare_hypervolumes", "curve_of", "evaluate", "extra_minutes", "frontier",
    "hidden_sizes", "load_data", "prepare_sentences", "run_curve_study", "run_experiment", "run_micmco_ptb",
    "run_trial", "summarise_figures", "table_5_1", "train",
]
