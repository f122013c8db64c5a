"""Unconditional word generation experiments, Schmidt & Hofmann §4–§5 (Tables 1–3, Figs 2–3).

`run_word_generation(profile)` trains the deep state space model (DSSM, :mod:`paperlib.models.dssm`)
in the flow configurations of the profile and the teacher-forced GRU baseline on a word list, then
evaluates every run as the paper does and writes ``results/word_generation.json`` (+ provenance):

* Table 1 (standard split, each token goes to test with probability 0.1): ``H[P_train, P_hat]``,
  ``H[P_test, P_hat]`` (§4.1; the DSSM's ``P_hat`` is the Monte Carlo estimate of eq. 12),
  ``w in V unique``, ``w in V`` (of ``generated_words`` sampled words) and ``I_bar`` (eq. 13);
* Table 2 (alternative split, 10% of the word *types* only in test): cross-entropies and the
  perplexities of generated words under Witten–Bell character n-gram models (n = 2..5) estimated
  on train+test or on test only; the DSSM emits the argmax of ``P(w_t | h_t)`` along sampled
  trajectories, the GRU samples (§5.3);
* Table 3: test cross-entropy and ``I_bar`` of every ``F_g x F_q`` combination (single-sample ELBO);
* Fig. 2: ``I(t)`` per position over sampled prefixes; Fig. 3: ``I_bar`` and the mean symbolic
  entropy ``H[w_t | h_t]`` over training, beside the baseline's per-symbol entropy.

Oracle rows are computed for our data: ORACLE-TRAIN is the training distribution itself (its
cross-entropy with itself is its entropy; sampling it gives the data-space metrics), ORACLE-TEST
(Table 2) the test distribution.

What differs from the paper (also stated in the results JSON and the notebook):

* Data: the `wordfreq` English list filtered by the paper's rules stands in for BooksCorpus
  (:func:`paperlib.data.english_word_list`); the cpu profile keeps only the most frequent words.
* Training: the paper states Adam (§2.6) but no learning rate, batch size or number of steps; ours
  are in params.yaml. Training words are drawn i.i.d. from the training unigram distribution.
* A run whose loss becomes non-finite stops and is reported like the paper's bars (unstable).
* The DSSM's inference GRU and embedding have the state size ``d`` unless a spec says otherwise;
  with ``K > 1`` the proposal ``q`` also sees ``h_g`` (Algorithm 1) but not ``h_{t-1}`` (§2.5).
* Fig. 3's dashed line ("overall word entropy of the trained baseline") is read as the GRU's mean
  entropy of ``P(w_t | w_<t)`` per symbol along its own samples, up to the end-of-word symbol.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from paperlib.experiments.code_hash import code_hash
from paperlib.experiments.config import active_profile, experiment_params, load_params, register_experiment, repo_root
from paperlib.data.wordlist import WordList, english_word_list, split_tokens, split_types
from paperlib.device import cache_key, load_checkpoint
from paperlib.experiments.stage import setup_stage
from paperlib.flows import build_flow
from paperlib.models.dssm import CharVocab, DeepStateSpaceModel, DSSMConfig, GRUWordModel, force_end_of_word
from paperlib.experiments.provenance import provenance
from paperlib.atomic_files import write_json_atomic
from paperlib.word_metrics import (
    char_ngram_perplexity,
    fit_char_ngram,
    noise_mutual_information,
    train_test_cross_entropy,
    vocabulary_coverage,
)

NAME = "word_generation"
SPLITS = ("standard", "types")
MODEL_KINDS = ("dssm", "gru")
_DSSM_FIELDS = tuple(f.name for f in dataclasses.fields(DSSMConfig))
_DSSM_SPEC_KEYS = ("kind", "samples", *_DSSM_FIELDS)
_GRU_SPEC_KEYS = ("kind", "state_size")
_TUPLE_FIELDS = ("flow_hidden", "coupling_hidden", "q_hidden")

# -- the paper's numbers (Tables 1-3, footnotes 6-7), for display beside ours ---------------
# [mean, std]; std None where the paper gives a single run; None where it reports nothing.

PAPER_TABLE1: dict[str, dict[str, list[float | None] | None]] = {
    name: dict(zip(("H_train", "H_test", "in_vocab_unique", "in_vocab", "I_bar"), values))
    for name, values in {
        "TRIL": ([12.13, .11], [11.99, .11], [.18, .00], [.43, .03], [.95, .04]),
        "TRIL, K=2": ([11.76, .12], [11.82, .12], [.16, .01], [.46, .02], [1.06, .16]),
        "TRIL, K=5": ([11.46, .05], [11.51, .05], [.16, .01], [.48, .02], [1.08, .13]),
        "TRIL, K=10": ([11.43, .05], [11.47, .05], [.16, .01], [.49, .02], [1.12, .12]),
        "2xTRIL": ([11.91, .08], [11.86, .13], [.17, .01], [.45, .02], [.89, .07]),
        "2xTRIL, K=2": ([11.55, .09], [11.61, .09], [.16, .00], [.47, .01], [1.00, .13]),
        "2xTRIL, K=5": ([11.42, .07], [11.46, .06], [.16, .00], [.49, .01], [1.20, .12]),
        "2xTRIL, K=10": ([11.33, .05], [11.38, .06], [.16, .00], [.49, .01], [1.28, .13]),
        "2xTRIL, K=10, BIDI": ([11.33, .09], [11.39, .10], [.16, .01], [.48, .00], [1.25, .16]),
        "d=16, 2xTRIL, K=10": ([11.21, None], [11.43, None], [.15, None], [.48, None], [1.43, None]),
        "d=32, 2xTRIL, K=10": ([11.27, None], [11.13, None], [.15, None], [.50, None], [1.31, None]),
        "REAL-NVP-[2,3,4,5,6,7]": ([11.77, None], [11.81, None], [.12, None], [.53, None], [.94, None]),
        "BASELINE-8D": ([12.92, None], [12.97, None], [.13, None], [.53, None], None),
        "BASELINE-16D": ([12.55, None], [12.60, None], [.14, None], [.62, None], None),
        "ORACLE-TRAIN": ([7.0, None], [7.02, None], [.27, None], [1.0, None], None),
    }.items()
}
PAPER_TEST_ENTROPY = 6.80  # footnote 7
PAPER_BEST_SINGLE = {"model": "2xTRIL, K=10", "H_train": 11.26, "H_test": 11.28}  # footnote 6

PAPER_TABLE2: dict[str, dict[str, Any]] = {
    "2xTRIL, K=10": {"H_train": 11.56, "H_test": 12.27,
                     "full": [10.4, 12.8, 20.9, 30.7], "test": [13.1, 21.9, 49.6, 81.1]},
    "BASELINE-8D": {"H_train": 12.90, "H_test": 13.67,
                    "full": [11.4, 12.1, 17.5, 24.8], "test": [14.5, 22.7, 48.3, 80.5]},
    "ORACLE-TRAIN": {"H_train": None, "H_test": None, "full": [10.1, 6.7, 4.8, 4.1], "test": [13.2, 15.7, 21.4, 26.4]},
    "ORACLE-TEST": {"H_train": None, "H_test": None, "full": [9.5, 6.0, 4.5, 3.9], "test": [7.9, 4.1, 2.9, 2.6]},
}
PAPER_NGRAM_ORDERS = (2, 3, 4, 5)

# Table 3 as legible in our copy of the paper: rows F_g, columns F_q; "unstable" = the paper's bar,
# None = not legible.
PAPER_TABLE3_FLOWS = ("ID", "DIAG", "TRIL", "2xTRIL")
PAPER_TABLE3: dict[str, dict[str, dict[str, Any]]] = {
    "H_test": {
        "ID": {"ID": [14.23, .00], "DIAG": [14.23, .00], "TRIL": [14.23, .00], "2xTRIL": "unstable"},
        "DIAG": {"ID": None, "DIAG": [12.35, .37], "TRIL": None, "2xTRIL": "unstable"},
        "TRIL": {"ID": None, "DIAG": [11.99, .11], "TRIL": "unstable", "2xTRIL": "unstable"},
        "2xTRIL": {"ID": "unstable", "DIAG": [11.86, .13], "TRIL": "unstable", "2xTRIL": "unstable"},
    },
    "I_bar": {
        "ID": {"ID": [0.0, .00], "DIAG": [0.0, .00], "TRIL": [0.0, .00], "2xTRIL": "unstable"},
        "DIAG": {"ID": [.93, .15], "DIAG": [.85, .16], "TRIL": [.92, .13], "2xTRIL": "unstable"},
        "TRIL": {"ID": [.65, .01], "DIAG": [.95, .04], "TRIL": "unstable", "2xTRIL": "unstable"},
        "2xTRIL": {"ID": "unstable", "DIAG": [.89, .07], "TRIL": "unstable", "2xTRIL": "unstable"},
    },
}


# -- parameters -----------------------------------------------------------------------------


def complete_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A model spec with every default filled in, so that equal models compare equal.

    DSSM: ``{kind: dssm, samples: K, <DSSMConfig fields>}``; ``embedding_size`` and
    ``inference_hidden`` default to ``state_size``, ``q_uses_proposal`` to ``K > 1`` (Algorithm 1).
    GRU baseline: ``{kind: gru, state_size: d}`` (embedding size = state size, §5.1).
    """
    if not isinstance(spec, dict) or spec.get("kind") not in MODEL_KINDS:
        raise ValueError(f"a model spec needs 'kind', one of {MODEL_KINDS}; got {spec!r}")
    valid = _DSSM_SPEC_KEYS if spec["kind"] == "dssm" else _GRU_SPEC_KEYS
    unknown = sorted(set(spec) - set(valid))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in a {spec['kind']} spec; valid keys: {', '.join(valid)}")
    if spec["kind"] == "gru":
        d = int(spec.get("state_size", 8))
        if d < 1:
            raise ValueError("state_size must be a positive integer")
        return {"kind": "gru", "state_size": d}
    samples = int(spec.get("samples", 1))
    if samples < 1:
        raise ValueError("samples (K) must be at least 1")
    options = {k: v for k, v in spec.items() if k not in ("kind", "samples")}
    d = int(options.get("state_size", 8))
    options.setdefault("embedding_size", d)
    options.setdefault("inference_hidden", d)
    options.setdefault("q_uses_proposal", samples > 1)
    for name in _TUPLE_FIELDS:
        if name in options:
            options[name] = tuple(options[name])
    config = DSSMConfig(**options)
    build_flow(config.generative_flow, config.state_size)
    build_flow(config.inference_flow, config.state_size)
    full = {"kind": "dssm", "samples": samples, **dataclasses.asdict(config)}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in full.items()}


def spec_key(spec: dict[str, Any]) -> str:
    """Short stable hash of a completed spec (run folders, de-duplication across tables)."""
    return hashlib.sha1(json.dumps(complete_spec(spec), sort_keys=True).encode()).hexdigest()[:10]


@register_experiment(NAME)
@dataclass(frozen=True)
class WordGenerationParams:
    """Settings of the word generation experiment (Schmidt & Hofmann §5).

    `table1`/`table2` map a row name (the paper's, where it has one) to a model spec (see
    :func:`complete_spec`); `table2` models are trained on the alternative (type) split.
    `table3_generative` x `table3_inference` are the flow grid of Table 3 (d = 8, K = 1 unless
    `table3_base` says otherwise). Runs with the same spec and split are trained once.
    `figure_model` (a `table1` row) gives Figs 2-3; `baseline_reference` (a `table1` GRU row) the
    dashed line of Fig. 3. Models with K > 1 use `seeds_weighted` (the paper: 10 runs instead of 5).
    """

    table1: dict
    table2: dict
    table3_generative: list[str]
    table3_inference: list[str]
    figure_model: str
    baseline_reference: str
    steps: int
    batch_size: int
    lr: float
    seeds: list[int]
    seeds_weighted: list[int]
    eval_samples: int  # K of the Monte Carlo word probability, eq. (12)
    generated_words: int  # words generated per run for the data-space metrics
    ngram_words: int  # generated words scored by the n-gram models (Table 2)
    mi_prefixes: int  # prefixes h_{t-1} of the I(t) estimate, eq. (13)
    fig2_trajectories: int  # single prefixes whose I(t) make the box plot of Fig. 2
    history_every: int  # steps between points of Fig. 3
    history_prefixes: int
    top_n: int | None = None  # keep only the most frequent word types (None: the whole list)
    table3_base: dict = field(default_factory=dict)
    mi_noise: int = 20  # draws of xi_t per prefix (the paper: K = 20, §5.4)
    ngram_orders: list[int] = field(default_factory=lambda: list(PAPER_NGRAM_ORDERS))
    min_len: int = 2
    max_len: int = 12
    min_count: int = 10
    total_tokens: float = 1e9
    test_fraction: float = 0.1
    split_seed: int = 0
    clip_norm: float | None = None  # gradient-norm clipping (not in the paper; None = off)
    checkpoint_every: int = 1000
    samples_shown: int = 30
    threads: int = 1  # the models are many tiny ops: one intra-op thread is fastest (measured)

    def __post_init__(self) -> None:
        # complete_spec builds the flows to check them; validating params.yaml (which other stages do in the middle
        # of their runs, e.g. to find the device) must not draw from the global random generator
        with torch.random.fork_rng(devices=[]):
            self._check_specs()
        if self.figure_model not in self.table1 or self.table1[self.figure_model].get("kind") != "dssm":
            raise ValueError(f"figure_model must be a DSSM row of table1; choices: {self._rows('dssm')}")
        if self.baseline_reference not in self.table1 or self.table1[self.baseline_reference].get("kind") != "gru":
            raise ValueError(f"baseline_reference must be a GRU row of table1; choices: {self._rows('gru')}")
        positive = ("steps", "batch_size", "eval_samples", "generated_words", "ngram_words", "mi_prefixes",
                    "fig2_trajectories", "history_every", "history_prefixes", "mi_noise", "checkpoint_every",
                    "threads")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad:
            raise ValueError(f"{', '.join(bad)} must be positive integers")
        if self.lr <= 0 or not self.seeds or not self.seeds_weighted:
            raise ValueError("lr must be positive and seeds, seeds_weighted non-empty")
        if self.top_n is not None and self.top_n < 20:
            raise ValueError("top_n must be at least 20 (or null for the whole list)")
        if not self.ngram_orders or min(self.ngram_orders) < 1:
            raise ValueError("ngram_orders must be positive integers")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError("test_fraction must lie in (0, 1)")
        if self.clip_norm is not None and self.clip_norm <= 0:
            raise ValueError("clip_norm must be positive or null")

    def _check_specs(self) -> None:
        for name in ("table1", "table2"):
            table = getattr(self, name)
            if not isinstance(table, dict):
                raise ValueError(f"{name} must map row names to model specs")
            for row, spec in table.items():
                try:
                    complete_spec(spec)
                except (ValueError, TypeError) as err:
                    raise ValueError(f"{name}.{row}: {err}") from None
        for spec in self.table3_specs().values():
            complete_spec(spec)

    def _rows(self, kind: str) -> list[str]:
        return [r for r, s in self.table1.items() if s.get("kind") == kind]

    def table3_specs(self) -> dict[tuple[str, str], dict[str, Any]]:
        """``(F_g, F_q) -> spec`` of the Table 3 grid."""
        base = {"kind": "dssm", "samples": 1, **self.table3_base}
        return {(g, q): {**base, "generative_flow": g, "inference_flow": q}
                for g in self.table3_generative for q in self.table3_inference}

    def seeds_for(self, spec: dict[str, Any]) -> list[int]:
        return list(self.seeds_weighted if complete_spec(spec).get("samples", 1) > 1 else self.seeds)


# -- data -------------------------------------------------------------------------------------


@dataclass
class SplitData:
    """One train/test split: word lists with counts, encoded training words, and the vocabulary."""

    name: str
    train: WordList
    test: WordList
    vocab: CharVocab
    tokens: Tensor  # [N_train, max_len + 1] training words, end-of-word padded
    lengths: Tensor  # [N_train] letters + end-of-word
    probs: Tensor  # [N_train] unigram distribution P_train (float64)

    @classmethod
    def build(cls, name: str, train: WordList, test: WordList, vocab: CharVocab) -> "SplitData":
        tokens, lengths = vocab.encode(train.words)
        probs = torch.as_tensor(train.counts, dtype=torch.float64)
        return cls(name, train, test, vocab, tokens, lengths, probs / probs.sum())

    def batch(self, size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``size`` training words drawn i.i.d. by frequency -> tokens [B, T_max], lengths [B]."""
        idx = torch.multinomial(self.probs, size, replacement=True, generator=generator)
        lengths = self.lengths[idx]
        return self.tokens[idx, : int(lengths.max())], lengths


def make_splits(data: WordList, test_fraction: float = 0.1, seed: int = 0) -> dict[str, SplitData]:
    """The paper's two splits (§5.1): tokens (``standard``) and word types (``types``)."""
    vocab = CharVocab.from_symbols(data.alphabet())
    return {
        "standard": SplitData.build("standard", *split_tokens(data, test_fraction, seed), vocab),
        "types": SplitData.build("types", *split_types(data, test_fraction, seed), vocab),
    }


def word_list_sha256(data: WordList) -> str:
    """Checksum of the filtered word list and its counts (provenance: wordfreq data can change)."""
    digest = hashlib.sha256()
    for word, count in zip(data.words, data.counts.tolist()):
        digest.update(f"{word}\t{count}\n".encode())
    return digest.hexdigest()


# -- oracles (closed forms for our data) -------------------------------------------------------


def entropy(counts: Sequence[float] | np.ndarray) -> float:
    """``H[P] = -sum_w P(w) log P(w)`` in nats of the normalised counts."""
    p = np.asarray(counts, dtype=np.float64)
    if p.ndim != 1 or (p < 0).any() or p.sum() <= 0:
        raise ValueError("counts must be a non-negative vector with a positive total")
    p = p[p > 0] / p.sum()
    return float(-(p * np.log(p)).sum())


def distribution_log_probs(model: WordList, words: Sequence[str]) -> Tensor:
    """``log P_model(w)`` [N] of the normalised counts of `model`; ``-inf`` for words it lacks."""
    position = {w: i for i, w in enumerate(model.words)}
    log_p = np.log(model.probs)
    return torch.tensor([log_p[position[w]] if w in position else -math.inf for w in words], dtype=torch.float64)


def expected_unique_fraction(probs: Sequence[float] | np.ndarray, n: int) -> float:
    """``E[#distinct words] / n`` for ``n`` i.i.d. draws: ``sum_w (1 - (1 - p_w)^n) / n``."""
    p = np.asarray(probs, dtype=np.float64)
    return float(-np.expm1(n * np.log1p(-np.clip(p, 0.0, 1.0 - 1e-16))).sum() / n)


def sample_words(data: WordList, n: int, generator: torch.Generator) -> list[str]:
    """``n`` words drawn i.i.d. from the unigram distribution of `data`."""
    idx = torch.multinomial(torch.as_tensor(data.probs), n, replacement=True, generator=generator)
    return [data.words[i] for i in idx.tolist()]


def finite_or_none(x: float) -> float | None:
    """JSON-safe: infinite cross-entropies (a word of zero probability) become null."""
    return float(x) if math.isfinite(x) else None


def oracle_rows(split: SplitData, settings: WordGenerationParams, seed: int,
                ngram: dict[str, dict[int, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """ORACLE-TRAIN (and, with n-gram models, ORACLE-TEST): the data distributions as models.

    ``H[P_train, P_train]`` is the training entropy; ``H[P_test, P_train]`` is infinite (null)
    when a test word is missing from train. ``in_vocab`` of training samples is 1 by construction;
    ``in_vocab_unique`` is random, and its expectation is given in closed form beside it.
    """
    rows = {}
    for name, source in (("ORACLE-TRAIN", split.train), ("ORACLE-TEST", split.test)):
        if name == "ORACLE-TEST" and ngram is None:
            continue
        gen = torch.Generator().manual_seed(seed)
        h_train, h_test = train_test_cross_entropy(lambda ws, s=source: distribution_log_probs(s, ws),
                                                   split.train.words, split.train.counts,
                                                   split.test.words, split.test.counts)
        sampled = sample_words(source, settings.generated_words, gen)
        coverage = vocabulary_coverage(sampled, split.train.words)
        row = {"H_train": finite_or_none(h_train), "H_test": finite_or_none(h_test),
               "in_vocab": coverage.in_vocabulary, "in_vocab_unique": coverage.unique_in_vocabulary,
               "in_vocab_unique_expected": (expected_unique_fraction(source.probs, settings.generated_words)
                                            if source is split.train else None),
               "samples": sampled[: settings.samples_shown]}
        if ngram is not None:
            row.update(ngram_row(sample_words(source, settings.ngram_words, gen), ngram))
        flat = _flatten_ngram(row)
        row["infinite"] = [k for k, v in flat.items() if v is None and k != "in_vocab_unique_expected"]
        rows[name] = row
    return rows


# -- n-gram perplexities (Table 2) ----------------------------------------------------------


def fit_ngram_models(split: SplitData, orders: Sequence[int]) -> dict[str, dict[int, Any]]:
    """Witten–Bell character n-gram models weighted by token counts, from train+test and test only."""
    full: dict[str, float] = {}
    for part in (split.train, split.test):
        for w, c in zip(part.words, part.counts.tolist()):
            full[w] = full.get(w, 0.0) + c
    return {
        "full": {n: fit_char_ngram(list(full), n, list(full.values())) for n in orders},
        "test": {n: fit_char_ngram(split.test.words, n, split.test.counts.tolist()) for n in orders},
    }


def ngram_row(words: Sequence[str], models: dict[str, dict[int, Any]]) -> dict[str, dict[str, float]]:
    """``{"ppl_full": {n: P_n}, "ppl_test": {n: P_n}}`` of generated `words` (Table 2).

    A perplexity is infinite (null) when a generated word holds a letter the n-gram model never saw.
    """
    return {f"ppl_{source}": {str(n): finite_or_none(char_ngram_perplexity(lm, words)) for n, lm in by_order.items()}
            for source, by_order in models.items()}


# -- models -----------------------------------------------------------------------------------


def build_model(spec: dict[str, Any], vocab: CharVocab, max_len: int) -> nn.Module:
    """DSSM or GRU baseline from a spec (see :func:`complete_spec`)."""
    spec = complete_spec(spec)
    if spec["kind"] == "gru":
        return GRUWordModel(vocab, spec["state_size"], max_len)
    options = {k: tuple(v) if k in _TUPLE_FIELDS else v for k, v in spec.items() if k in _DSSM_FIELDS}
    options["max_len"] = max_len  # the data's limit
    return DeepStateSpaceModel(vocab, DSSMConfig(**options))


def model_loss(model: nn.Module, tokens: Tensor, lengths: Tensor, samples: int,
               generator: torch.Generator) -> Tensor:
    """Negative bound (DSSM: ELBO, eq. 9, or the weighted bound of Algorithm 1) or teacher-forced NLL."""
    if isinstance(model, DeepStateSpaceModel):
        return model.loss(tokens, lengths, samples, generator)
    return model.loss(tokens, lengths)


@torch.no_grad()
def gru_symbol_entropy(model: GRUWordModel, n: int, generator: torch.Generator) -> float:
    """Mean entropy of ``P(w_t | w_<t)`` per symbol along ``n`` ancestral samples, up to end-of-word."""
    device = model.output.weight.device
    eow = model.vocab.eow_index
    symbol = torch.full((n, 1), eow, dtype=torch.long, device=device)
    alive = torch.ones(n, dtype=torch.bool, device=device)
    state, total, count = None, 0.0, 0
    for t in range(model.max_len + 1):
        logits, state = model(symbol, state)
        log_p = force_end_of_word(logits[:, 0], torch.tensor(t, device=device), model.max_len, eow).log_softmax(-1)
        ent = -(log_p.exp() * log_p).sum(-1)  # [n]
        total += float(ent[alive].sum())
        count += int(alive.sum())
        symbol = torch.multinomial(log_p.exp(), 1, generator=generator)
        alive &= symbol[:, 0] != eow
        if not bool(alive.any()):
            break
    return total / count


def noise_information_trajectories(model: DeepStateSpaceModel, steps: int, trajectories: int, n_noise: int,
                                   generator: torch.Generator) -> Tensor:
    """``I(t)`` [trajectories, steps] of single prior prefixes (eq. 13 without the outer mean; Fig. 2)."""
    return torch.stack([noise_mutual_information(model, steps, 1, n_noise, generator).per_step
                        for _ in range(trajectories)])


# -- training -------------------------------------------------------------------------------


@dataclass
class TrainResult:
    steps: int
    diverged: bool
    history: list[dict[str, float]]


def _history_point(model: nn.Module, settings: WordGenerationParams, seed: int) -> dict[str, float]:
    """Fig. 3 quantities of a DSSM: ``I_bar`` and mean ``H[w_t | h_t]`` with common random numbers."""
    if not isinstance(model, DeepStateSpaceModel):
        return {}
    gen = torch.Generator(device=model.h0.device).manual_seed(seed + 7919)
    info = noise_mutual_information(model, model.config.max_len + 1, settings.history_prefixes,
                                    settings.mi_noise, gen)
    return {"I_bar": info.mean, "emission_entropy": float(info.emission_entropy.mean())}


GENERATOR_KEYS = frozenset({"batch_gen", "noise_gen"})  # checkpoint entries that must stay CPU ByteTensors


def train_model(model: nn.Module, split: SplitData, settings: WordGenerationParams, samples: int, seed: int,
                checkpoint: Path | None = None, progress: Callable[[str], None] | None = None,
                stop_at: int | None = None) -> TrainResult:
    """Adam on the negative bound with words drawn by frequency (§2.6, §5.1), resumable.

    Every ``history_every`` steps the mean training loss (and for the DSSM ``I_bar`` and the mean
    symbolic entropy, Fig. 3) is recorded. The checkpoint holds model, optimizer, both random
    generators and the history, so a resumed run continues bit-for-bit. ``stop_at`` ends this call
    early (with a checkpoint), as an interruption would. A non-finite loss stops the run
    (``diverged``) — the paper's "did not allow for stable training".
    """
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    batch_gen = torch.Generator().manual_seed(seed)
    noise_gen = torch.Generator(device=device).manual_seed(seed + 1)
    step, diverged, history, running = 0, False, [], [0.0, 0]
    if checkpoint is not None and checkpoint.is_file():
        state = load_checkpoint(checkpoint, device, cpu_keys=GENERATOR_KEYS)  # generator states stay CPU tensors
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        batch_gen.set_state(state["batch_gen"])
        noise_gen.set_state(state["noise_gen"])
        step, diverged, history, running = state["step"], state["diverged"], state["history"], state["running"]

    def save() -> None:
        if checkpoint is None:
            return
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        tmp = checkpoint.with_name(f".{checkpoint.name}.tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "batch_gen": batch_gen.get_state(), "noise_gen": noise_gen.get_state(), "step": step,
                    "diverged": diverged, "history": history, "running": running}, tmp)
        os.replace(tmp, checkpoint)

    if step == 0 and not history:
        history.append({"step": 0, **_history_point(model, settings, seed)})
    model.train()
    last = settings.steps if stop_at is None else min(stop_at, settings.steps)
    while step < last and not diverged:
        tokens, lengths = split.batch(settings.batch_size, batch_gen)
        loss = model_loss(model, tokens.to(device), lengths.to(device), samples, noise_gen)
        if not torch.isfinite(loss):
            diverged = True
            history.append({"step": step, "diverged": True})
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if settings.clip_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
        optimizer.step()
        step += 1
        running = [running[0] + float(loss.detach()), running[1] + 1]
        if step % settings.history_every == 0 or step == settings.steps:
            point = {"step": step, "loss": running[0] / running[1], **_history_point(model, settings, seed)}
            history.append(point)
            running = [0.0, 0]
            if progress is not None:
                progress("  " + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                          for k, v in point.items()))
        if step % settings.checkpoint_every == 0:
            save()
    save()
    return TrainResult(step, diverged, history)


# -- evaluation -----------------------------------------------------------------------------


def _log_prob_fn(model: nn.Module, settings: WordGenerationParams, seed: int) -> Callable[[list[str]], Tensor]:
    if isinstance(model, DeepStateSpaceModel):
        gen = torch.Generator(device=model.h0.device).manual_seed(seed + 11)
        return lambda words: model.log_prob_words(words, settings.eval_samples, gen)
    return model.log_prob_words


def evaluate_model(model: nn.Module, split: SplitData, settings: WordGenerationParams, seed: int,
                   ngram: dict[str, dict[int, Any]] | None = None) -> dict[str, Any]:
    """The metrics of §4 for one trained run.

    Cross-entropies use the union of train and test types in one call, so the DSSM's Monte Carlo
    ``P_hat`` (eq. 12) shares its ``eval_samples`` trajectories across all words. Words for the
    data-space metrics are sampled; with ``ngram`` models (Table 2) a second set is generated with
    the DSSM emitting the argmax of the observation model (the GRU keeps sampling).
    """
    model.eval()
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed + 13)
    h_train, h_test = train_test_cross_entropy(_log_prob_fn(model, settings, seed), split.train.words,
                                               split.train.counts, split.test.words, split.test.counts)
    generated = model.sample_words(settings.generated_words, generator=gen)
    coverage = vocabulary_coverage(generated, split.train.words)
    row: dict[str, Any] = {"H_train": finite_or_none(h_train), "H_test": finite_or_none(h_test),
                           "in_vocab": coverage.in_vocabulary, "in_vocab_unique": coverage.unique_in_vocabulary,
                           "unique": coverage.unique, "samples": generated[: settings.samples_shown]}
    if isinstance(model, DeepStateSpaceModel):
        info = noise_mutual_information(model, model.config.max_len + 1, settings.mi_prefixes, settings.mi_noise,
                                        torch.Generator(device=device).manual_seed(seed + 17))
        row.update(I_bar=info.mean, I_t=info.per_step.tolist(), emission_entropy=info.emission_entropy.tolist())
    else:
        row.update(symbol_entropy=gru_symbol_entropy(model, settings.generated_words, gen))
    if ngram is not None:
        emission = "argmax" if isinstance(model, DeepStateSpaceModel) else "sample"
        words = model.sample_words(settings.ngram_words, generator=gen, emission=emission)
        row.update(ngram_row(words, ngram), ngram_emission=emission, ngram_samples=words[: settings.samples_shown])
    return row


# -- the experiment -------------------------------------------------------------------------


@dataclass(frozen=True)
class RunSpec:
    """One training run: a model spec on a split with a seed; `labels` are the table cells it fills."""

    split: str
    spec: dict
    seed: int
    labels: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.split}-{spec_key(self.spec)}"

    def folder(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.labels[0]).strip("-").lower()
        return f"{self.key}-{slug}-seed{self.seed}"


_NOT_IN_FINGERPRINT = ("table1", "table2", "table3_generative", "table3_inference", "table3_base", "figure_model",
                       "baseline_reference", "seeds", "seeds_weighted", "threads", "checkpoint_every")


def settings_fingerprint(settings: WordGenerationParams, data: WordList) -> str:
    """Hash of everything a finished run's numbers depend on besides its spec and seed (data, training
    and evaluation settings), so runs of another profile or word list are never mistaken for ours."""
    relevant = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _NOT_IN_FINGERPRINT}
    payload = json.dumps({**relevant, **cache_key(), "code": code_hash(__name__)}, sort_keys=True) + word_list_sha256(data)
    return hashlib.sha1(payload.encode()).hexdigest()[:10]


def plan_runs(settings: WordGenerationParams) -> list[RunSpec]:
    """Every (split, model, seed) the tables need, each trained once even if several cells use it."""
    wanted: dict[tuple[str, str], tuple[dict, list[str]]] = {}

    def add(split: str, label: str, spec: dict) -> None:
        key = (split, spec_key(spec))
        wanted.setdefault(key, (spec, []))[1].append(label)

    for row, spec in settings.table1.items():
        add("standard", f"table1:{row}", spec)
    for (g, q), spec in settings.table3_specs().items():
        add("standard", f"table3:{g}/{q}", spec)
    for row, spec in settings.table2.items():
        add("types", f"table2:{row}", spec)
    return [RunSpec(split, spec, seed, tuple(labels))
            for (split, _), (spec, labels) in wanted.items() for seed in settings.seeds_for(spec)]


def aggregate(records: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """Mean and standard deviation (ddof = 1) over the seeds that trained stably.

    A metric a run lacks (``I_bar`` of the GRU) is None; one stored as None (infinite, see
    :func:`finite_or_none`) makes the mean None and is listed under ``infinite``.
    """
    stable = [r for r in records if not r["diverged"]]
    out: dict[str, Any] = {"seeds": len(records), "unstable": len(records) - len(stable), "infinite": []}
    for key in keys:
        values = [r["metrics"].get(key, _MISSING) for r in stable]
        ok = bool(values) and all(v is not None and v is not _MISSING for v in values)
        if values and not ok and _MISSING not in values:
            out["infinite"].append(key)
        out[key] = float(np.mean(values)) if ok else None
        out[key + "_std"] = float(np.std(values, ddof=1)) if ok and len(values) > 1 else None
    return out


_MISSING = object()


TABLE1_KEYS = ("H_train", "H_test", "in_vocab_unique", "in_vocab", "I_bar")


def _ngram_keys(orders: Sequence[int]) -> list[str]:
    return [f"ppl_{s}_{n}" for s in ("full", "test") for n in orders]


def _flatten_ngram(metrics: dict[str, Any]) -> dict[str, Any]:
    flat = dict(metrics)
    for source in ("full", "test"):
        for n, v in metrics.get(f"ppl_{source}", {}).items():
            flat[f"ppl_{source}_{n}"] = v
    return flat


def build_tables(settings: WordGenerationParams, records: Sequence[dict[str, Any]],
                 oracles: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Tables 1-3 in the paper's shape (ours with ± over seeds, the paper's beside)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_key.setdefault(r["key"], []).append({**r, "metrics": _flatten_ngram(r["metrics"] or {})})

    def runs(split: str, spec: dict) -> list[dict[str, Any]]:
        return by_key.get(f"{split}-{spec_key(spec)}", [])

    table1 = []
    for row, spec in settings.table1.items():
        table1.append({"model": row, **aggregate(runs("standard", spec), TABLE1_KEYS),
                       "paper": PAPER_TABLE1.get(row)})
    oracle = oracles["standard"]["ORACLE-TRAIN"]
    table1.append({"model": "ORACLE-TRAIN", "seeds": 1, "unstable": 0, "infinite": oracle["infinite"],
                   **{k: oracle.get(k) for k in TABLE1_KEYS}, **{k + "_std": None for k in TABLE1_KEYS},
                   "in_vocab_unique_expected": oracle["in_vocab_unique_expected"],
                   "paper": PAPER_TABLE1["ORACLE-TRAIN"]})

    keys2 = ("H_train", "H_test", *_ngram_keys(settings.ngram_orders))
    table2 = [{"model": row, **aggregate(runs("types", spec), keys2), "paper": PAPER_TABLE2.get(row)}
              for row, spec in settings.table2.items()]
    for name in ("ORACLE-TRAIN", "ORACLE-TEST"):
        flat = _flatten_ngram(oracles["types"][name])
        table2.append({"model": name, "seeds": 1, "unstable": 0, "infinite": flat["infinite"],
                       **{k: flat.get(k) for k in keys2},
                       **{k + "_std": None for k in keys2}, "paper": PAPER_TABLE2[name]})

    cells: dict[str, dict[str, Any]] = {}
    for (g, q), spec in settings.table3_specs().items():
        cells.setdefault(g, {})[q] = aggregate(runs("standard", spec), ("H_test", "I_bar"))
    table3 = {"generative": list(settings.table3_generative), "inference": list(settings.table3_inference),
              "cells": cells, "paper": PAPER_TABLE3, "paper_flows": list(PAPER_TABLE3_FLOWS)}
    return {"table1": table1, "table2": table2, "table3": table3}


def _record_for(run: RunSpec, result: TrainResult, metrics: dict[str, Any] | None,
                seconds: tuple[float, float]) -> dict[str, Any]:
    return {"key": run.key, "split": run.split, "labels": list(run.labels), "seed": run.seed,
            "spec": complete_spec(run.spec), "steps": result.steps,
            "diverged": result.diverged, "history": result.history, "metrics": metrics,
            "seconds": {"train": round(seconds[0], 1), "evaluate": round(seconds[1], 1)}}


def _finite_metrics(metrics: dict[str, Any]) -> bool:
    return all(metrics.get(k) is not None and math.isfinite(metrics[k]) for k in ("H_train", "H_test"))


def run_experiment(settings: WordGenerationParams, data: WordList, runs_dir: str | os.PathLike,
                   progress: bool = False, device: torch.device | str | None = None) -> dict[str, Any]:
    """Train (resumably) and evaluate every run of `settings` on `data`; returns the results dict.

    Each run lives in ``runs_dir/<settings fingerprint>/<split>-<spec hash>-<label>-seed<s>/`` with
    ``checkpoint.pt`` and, once evaluated, ``done.json``; finished runs are read back instead of
    retrained, and interrupted ones resume from their checkpoint.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    runs_dir = Path(runs_dir) / settings_fingerprint(settings, data)
    say = (lambda msg: print(msg, flush=True)) if progress else None
    splits = make_splits(data, settings.test_fraction, settings.split_seed)
    ngram = fit_ngram_models(splits["types"], settings.ngram_orders)
    seed0 = min(settings.seeds)
    oracles = {"standard": oracle_rows(splits["standard"], settings, seed0),
               "types": oracle_rows(splits["types"], settings, seed0, ngram)}

    records = []
    plan = plan_runs(settings)
    for i, run in enumerate(plan):
        folder = runs_dir / run.folder()
        done = folder / "done.json"
        if done.is_file():
            records.append(json.loads(done.read_text()))
            continue
        spec = complete_spec(run.spec)
        samples = spec.get("samples", 1)
        torch.manual_seed(run.seed)  # parameter initialisation
        model = build_model(spec, splits[run.split].vocab, settings.max_len).to(device)
        if say:
            say(f"[{i + 1}/{len(plan)}] {run.split} split, {', '.join(run.labels)}, seed {run.seed}")
        started = time.time()
        result = train_model(model, splits[run.split], settings, samples, run.seed, folder / "checkpoint.pt", say)
        trained = time.time()
        metrics = None
        if not result.diverged:
            metrics = evaluate_model(model, splits[run.split], settings, run.seed,
                                     ngram if run.split == "types" else None)
        record = _record_for(run, result, metrics, (trained - started, time.time() - trained))
        if metrics is not None and not _finite_metrics(metrics):
            record["diverged"] = True  # e.g. NaN parameters that never produced a NaN loss
        write_json_atomic(done, record)
        records.append(record)

    tables = build_tables(settings, records, oracles)
    figure_runs = [r for r in records if r["split"] == "standard" and f"table1:{settings.figure_model}" in r["labels"]]
    fig2 = figure2_data(settings, splits["standard"].vocab, figure_runs, runs_dir, plan, device)
    baseline = [r for r in records if r["split"] == "standard"
                and f"table1:{settings.baseline_reference}" in r["labels"] and not r["diverged"]]
    fig3 = {"model": settings.figure_model,
            "histories": [r["history"] for r in figure_runs],
            "baseline": settings.baseline_reference,
            "baseline_symbol_entropy": (float(np.mean([r["metrics"]["symbol_entropy"] for r in baseline]))
                                        if baseline else None)}
    data_summary = {
        name: {"train_types": len(s.train), "test_types": len(s.test),
               "train_tokens": int(s.train.counts.sum()), "test_tokens": int(s.test.counts.sum()),
               "train_entropy": entropy(s.train.counts), "test_entropy": entropy(s.test.counts),
               "test_types_unseen_in_train": len(set(s.test.words) - set(s.train.words))}
        for name, s in splits.items()
    }
    return {
        "experiment": NAME,
        "data": {"source": "wordfreq English list (stand-in for BooksCorpus), letters only, "
                           f"{settings.min_len}-{settings.max_len} letters, >= {settings.min_count} of "
                           f"{settings.total_tokens:.0e} virtual tokens",
                 "types": len(data), "top_n": settings.top_n, "splits": data_summary,
                 "paper": {"types": 143_000, "tokens": "almost 1B (BooksCorpus)", "test_entropy": PAPER_TEST_ENTROPY}},
        "scale": {k: getattr(settings, k) for k in ("steps", "batch_size", "lr", "seeds", "seeds_weighted",
                                                       "eval_samples", "generated_words", "ngram_words",
                                                       "mi_prefixes", "mi_noise", "clip_norm", "ngram_orders",
                                                       "top_n")},
        **tables,
        "paper_best_single": PAPER_BEST_SINGLE,
        "oracles": oracles,
        "figure2": fig2,
        "figure3": fig3,
        "runs": [{k: v for k, v in r.items() if k != "seconds"} for r in records],  # timings: provenance
    }


def figure2_data(settings: WordGenerationParams, vocab: CharVocab, figure_runs: list[dict[str, Any]],
                 runs_dir: Path, plan: list[RunSpec], device: torch.device) -> dict[str, Any]:
    """``I(t)`` of single prior prefixes for every stable run of the figure model (Fig. 2 box plot)."""
    per_run = []
    for record in figure_runs:
        if record["diverged"]:
            continue
        run = next(p for p in plan if p.key == record["key"] and p.seed == record["seed"])
        model = build_model(record["spec"], vocab, settings.max_len).to(device)
        state = load_checkpoint(runs_dir / run.folder() / "checkpoint.pt", device, cpu_keys=GENERATOR_KEYS)
        model.load_state_dict(state["model"])
        model.eval()
        gen = torch.Generator(device=device).manual_seed(record["seed"] + 19)
        values = noise_information_trajectories(model, settings.max_len + 1, settings.fig2_trajectories,
                                                settings.mi_noise, gen)
        per_run.append({"seed": record["seed"], "I_t": [[round(float(v), 5) for v in row] for row in values]})
    return {"model": settings.figure_model, "runs": per_run}


def run_word_generation(profile: str | None = None, progress: bool = True, runs_dir: str | os.PathLike | None = None,
                        out: str | os.PathLike | None = None) -> Path:
    """The DVC stage: settings from params.yaml, results to ``results/word_generation.json``."""
    started = time.time()
    root = repo_root()
    params = load_params()
    profile = active_profile(profile, params)
    settings = experiment_params(NAME, profile, params)
    torch.set_num_threads(settings.threads)
    device = setup_stage(profile, params)
    data = english_word_list(settings.min_len, settings.max_len, settings.min_count, settings.total_tokens,
                             settings.top_n)
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / NAME
    results = run_experiment(settings, data, runs_dir, progress, device)
    results["profile"] = profile
    out = Path(out) if out is not None else root / "results" / f"{NAME}.json"
    write_json_atomic(out, results)
    timing = {Path(p).parent.name: json.loads(p.read_text()).get("seconds")
              for p in sorted((runs_dir / settings_fingerprint(settings, data)).glob("*/done.json"))}
    try:
        from importlib.metadata import version

        wordfreq_version = version("wordfreq")
    except Exception:  # noqa: BLE001 - provenance only
        wordfreq_version = None
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, dataclasses.asdict(settings),
                                    {"wordfreq_en_filtered": word_list_sha256(data)}, started,
                                    code=code_hash(__name__)),
                       "wordfreq": wordfreq_version, "run_seconds": timing})
    return out


# -- presentation (used by notebooks/word_generation.ipynb) ---------------------------------


def format_value(mean: float | None, std: float | None = None, digits: int = 2) -> str:
    """``12.13 ± 0.11``, ``12.13`` without a spread, ``–`` without a value."""
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" + (f" ± {std:.{digits}f}" if std is not None else "")


def _ours_cell(row: dict[str, Any], key: str, digits: int = 2) -> str:
    if key in row.get("infinite", []):
        return "∞"
    return format_value(row.get(key), row.get(key + "_std"), digits)


def _paper_cell(paper: Any, digits: int = 2) -> str:
    if paper is None:
        return "–"
    if paper == "unstable":
        return "unstable"
    return format_value(paper[0], paper[1], digits)


def table1_frame(results: dict[str, Any]):
    """Table 1 as a DataFrame: ours (mean ± std over seeds) beside the paper's."""
    import pandas as pd

    columns = {"H_train": "H[P_train,P̂]", "H_test": "H[P_test,P̂]", "in_vocab_unique": "w∈V unique",
               "in_vocab": "w∈V", "I_bar": "Ī"}
    rows = []
    for row in results["table1"]:
        entry = {"model": row["model"], "seeds": row["seeds"], "unstable": row["unstable"]}
        for key, title in columns.items():
            entry[f"{title} ours"] = _ours_cell(row, key)
            paper = (row.get("paper") or {}).get(key)
            entry[f"{title} paper"] = _paper_cell(paper)
        rows.append(entry)
    return pd.DataFrame(rows).set_index("model")


def table2_frame(results: dict[str, Any]):
    """Table 2 in the paper's shape (models as rows); each cell reads "ours (paper)"."""
    import pandas as pd

    orders = results["scale"].get("ngram_orders") or list(PAPER_NGRAM_ORDERS)
    rows = {}
    for row in results["table2"]:
        paper = row.get("paper") or {}
        entry = {}
        for key, title in (("H_train", "H[P_train,P̂]"), ("H_test", "H[P_test,P̂]")):
            entry[("cross-entropy", title)] = f"{_ours_cell(row, key)} ({format_value(paper.get(key))})"
        for source, title in (("full", "n-gram from train+test"), ("test", "n-gram from test")):
            values = paper.get(source)
            for n in orders:
                theirs = values[PAPER_NGRAM_ORDERS.index(n)] if values and n in PAPER_NGRAM_ORDERS else None
                entry[(title, f"P{n}")] = f"{_ours_cell(row, f'ppl_{source}_{n}', 1)} ({format_value(theirs, None, 1)})"
        rows[row["model"]] = entry
    frame = pd.DataFrame(rows).T
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame.rename_axis(index="model")


def table3_frames(results: dict[str, Any]) -> dict[str, Any]:
    """Table 3 (a) test cross-entropy and (b) ``I_bar``: rows F_g, columns F_q, "ours / paper"."""
    import pandas as pd

    t3 = results["table3"]
    frames = {}
    for key in ("H_test", "I_bar"):
        rows = {}
        for g in t3["generative"]:
            rows[g] = {}
            for q in t3["inference"]:
                cell = t3["cells"][g][q]
                ours = "unstable" if cell["unstable"] == cell["seeds"] else _ours_cell(cell, key)
                paper = t3["paper"][key].get(g, {}).get(q)
                rows[g][q] = f"{ours}  (paper {_paper_cell(paper) if paper is not None else 'n/a'})"
        frames[key] = pd.DataFrame(rows).T.rename_axis(index="F_g", columns="F_q")
    return frames


def _row(table: list[dict[str, Any]], model: str) -> dict[str, Any] | None:
    return next((r for r in table if r["model"] == model), None)


def paper_claims(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The paper's qualitative claims (§5.3–5.4), each checked on our numbers where we ran both sides."""
    t1 = results["table1"]
    claims = []

    def compare(claim: str, better: str, worse: str, key: str = "H_test") -> None:
        a, b = _row(t1, better), _row(t1, worse)
        if a is None or b is None or a.get(key) is None or b.get(key) is None:
            return
        claims.append({"claim": claim, "ours": f"{a[key]:.2f} vs {b[key]:.2f}", "holds": a[key] < b[key]})

    compare("2xTRIL beats TRIL in test cross-entropy", "2xTRIL", "TRIL")
    compare("importance weighting (K=10) beats the ELBO (2xTRIL)", "2xTRIL, K=10", "2xTRIL")
    compare("DSSM 2xTRIL, K=10 beats BASELINE-8D in test cross-entropy", "2xTRIL, K=10", "BASELINE-8D")
    compare("DSSM TRIL beats BASELINE-8D in test cross-entropy", "TRIL", "BASELINE-8D")
    compare("BASELINE-16D beats BASELINE-8D", "BASELINE-16D", "BASELINE-8D")
    fig2 = results["figure2"]["runs"]
    if fig2:
        per_t = np.mean([np.mean(r["I_t"], 0) for r in fig2], 0)
        claims.append({"claim": "I(t) is largest at the first positions and decreases (Fig. 2)",
                       "ours": f"I(1..3) {per_t[:3].mean():.2f} vs I(T-2..T) {per_t[-3:].mean():.2f}",
                       "holds": bool(per_t[:3].mean() > per_t[-3:].mean())})
    histories = [h for h in results["figure3"]["histories"] if len(h) > 1 and "I_bar" in h[-1]]
    if histories:
        curves = [[p["I_bar"] for p in h if "I_bar" in p] for h in histories]
        first, last = np.mean([c[0] for c in curves]), np.mean([c[-1] for c in curves])
        lowest = np.mean([min(c) for c in curves])
        claims.append({"claim": "I_bar grows over training (Fig. 3)",
                       "ours": f"{first:.2f} at initialisation, lowest {lowest:.2f}, final {last:.2f}",
                       "holds": bool(last > first)})
    return claims
