"""Train/test splits of the word list, the oracle rows (closed forms for our data) and the n-gram models of Table 2."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import Tensor

from paperlib.data.wordlist import WordList, split_tokens, split_types
from paperlib.models.dssm import CharVocab
from paperlib.word_metrics import char_ngram_perplexity, fit_char_ngram, train_test_cross_entropy, vocabulary_coverage
from paperlib.experiments.word_generation.settings import WordGenerationParams


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

def _flatten_ngram(metrics: dict[str, Any]) -> dict[str, Any]:
    flat = dict(metrics)
    for source in ("full", "test"):
        for n, v in metrics.get(f"ppl_{source}", {}).items():
            flat[f"ppl_{source}_{n}"] = v
    return flat
