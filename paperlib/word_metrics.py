"""Evaluation of unconditional word generators, Schmidt & Hofmann §4 and §5 (Tables 1–3).

* Cross-entropy ``H[P_data, P_hat]`` of the data's unigram word distribution against a model's
  word probabilities (§4.1; for the DSSM ``P_hat`` is the Monte Carlo estimate of eq. 12).
* Data-space metrics of generated words: fraction in the training vocabulary (``w in V``) and the
  number of distinct generated words that are in ``V`` per generated word (``w in V unique``).
* Noise mutual information ``I(t) = I(w_t; xi_t | h_{t-1})`` and its average over steps (eq. 13).
* Character n-gram perplexities of generated words under Witten–Bell interpolated models
  (``nltk.lm.WittenBellInterpolated``), n = 2..5 (Table 2).

Cross-entropies are in nats by default (``base=e``): the paper's ORACLE-TRAIN value of about 7
matches the entropy of an English word unigram distribution in nats, not bits.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Protocol, Sequence

import torch
from nltk.lm import WittenBellInterpolated
from torch import Tensor

BOW, EOW = "<s>", "</s>"  # n-gram padding symbols (distinct from single letters)


def cross_entropy(model_log_probs: Tensor, data_counts: Tensor | Sequence[float], base: float = math.e) -> float:
    """``H[P_data, P_hat] = -sum_w P_data(w) log P_hat(w)`` (§4.1), ``P_data`` = normalised counts.

    ``model_log_probs`` [N] are natural-log model probabilities of the same N words.
    """
    counts = torch.as_tensor(data_counts, dtype=torch.float64)
    log_probs = torch.as_tensor(model_log_probs, dtype=torch.float64).cpu()
    if counts.shape != log_probs.shape or counts.dim() != 1:
        raise ValueError("model_log_probs and data_counts must be vectors of the same length")
    if bool((counts < 0).any()) or float(counts.sum()) <= 0:
        raise ValueError("data_counts must be non-negative with a positive total")
    if base <= 0 or base == 1:
        raise ValueError("base must be positive and different from 1")
    p = counts / counts.sum()
    return float(-(p * log_probs).sum() / math.log(base))


def train_test_cross_entropy(log_prob_words: Callable[[list[str]], Tensor],
                             train_words: Sequence[str], train_counts: Sequence[float],
                             test_words: Sequence[str], test_counts: Sequence[float],
                             base: float = math.e) -> tuple[float, float]:
    """``(H[P_train, P_hat], H[P_test, P_hat])`` with one call of ``log_prob_words`` on the union of
    both word lists, so a Monte Carlo ``P_hat`` uses the same K trajectories for all words (§4.1)."""
    union = sorted(set(train_words) | set(test_words))
    log_probs = torch.as_tensor(log_prob_words(union)).cpu()
    position = {w: i for i, w in enumerate(union)}

    def of(words: Sequence[str]) -> Tensor:
        return log_probs[torch.tensor([position[w] for w in words], dtype=torch.long)]

    return (cross_entropy(of(train_words), train_counts, base),
            cross_entropy(of(test_words), test_counts, base))


@dataclass(frozen=True)
class VocabularyCoverage:
    """Data-space metrics of §4.1 (Table 1 columns ``w in V`` and ``w in V unique``)."""

    in_vocabulary: float  # generated words (with repetition) found in V, per generated word
    unique_in_vocabulary: float  # distinct generated words found in V, per generated word
    unique: float  # distinct generated words per generated word


def vocabulary_coverage(generated: Sequence[str], vocabulary: Iterable[str]) -> VocabularyCoverage:
    """Fractions of generated words in the training vocabulary (§4.1).

    ``unique_in_vocabulary`` divides by the number of generated words: this is the reading under
    which sampling from the training data (ORACLE-TRAIN) scores 1.0 and 0.27 in Table 1.
    """
    if len(generated) == 0:
        raise ValueError("need at least one generated word")
    vocab = set(vocabulary)
    n = len(generated)
    distinct = set(generated)
    return VocabularyCoverage(
        in_vocabulary=sum(w in vocab for w in generated) / n,
        unique_in_vocabulary=len(distinct & vocab) / n,
        unique=len(distinct) / n,
    )


class NoiseDrivenModel(Protocol):
    """What eq. (13) needs of a model: initial state, noise-driven transition, observation model."""

    def initial_state(self, batch_shape: Sequence[int] = ()) -> Tensor: ...

    def transition(self, h_prev: Tensor, xi: Tensor) -> Tensor: ...

    def emission_logits(self, h: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class NoiseInformation:
    """Per-step noise mutual information and symbolic entropy (§4.2, §5.4)."""

    per_step: Tensor  # [T] I(t) of eq. (13)
    emission_entropy: Tensor  # [T] H[w_t | h_t], information the model forgets at step t

    @property
    def mean(self) -> float:
        """``I_bar``: average of I(t) over steps (§5.4)."""
        return float(self.per_step.mean())


def _entropy(log_p: Tensor) -> Tensor:
    return -(log_p.exp() * log_p).sum(-1)


@torch.no_grad()
def noise_mutual_information(model: NoiseDrivenModel, steps: int, n_prefixes: int = 1000, n_noise: int = 20,
                             generator: torch.Generator | None = None) -> NoiseInformation:
    """Monte Carlo estimate of ``I(t) = E_{h_{t-1}}[H[w_t | h_{t-1}] - H[w_t | xi_t, h_{t-1}]]`` (eq. 13).

    ``n_prefixes`` prior states ``h_{t-1}``; for each, ``n_noise`` draws of ``xi_t`` (the paper uses
    20): the first term is the entropy of their averaged emission distribution, the second the
    average of their entropies (so every estimate is >= 0). The prefix then moves on with the
    first draw, which is itself a sample of ``p(h_t | h_{t-1})``. Steps run over the raw state
    process, whether or not an end-of-word symbol would have been emitted earlier.
    """
    if min(steps, n_prefixes, n_noise) < 1:
        raise ValueError("steps, n_prefixes and n_noise must be positive")
    h = model.initial_state((n_prefixes,))  # [M, d]
    info, entropy = [], []
    for _ in range(steps):
        xi = torch.randn(n_noise, *h.shape, generator=generator, device=h.device, dtype=h.dtype)
        h_next = model.transition(h, xi)  # [K, M, d]
        log_p = model.emission_logits(h_next).log_softmax(-1)  # [K, M, V]
        conditional = _entropy(log_p)  # [K, M]
        mixture = _entropy(torch.logsumexp(log_p, 0) - math.log(n_noise))  # [M]
        info.append((mixture - conditional.mean(0)).mean())
        entropy.append(conditional.mean())
        h = h_next[0]
    return NoiseInformation(torch.stack(info).cpu(), torch.stack(entropy).cpu())


def char_ngram_events(word: str, order: int) -> Iterator[tuple[tuple[str, ...], str]]:
    """``(context, target)`` pairs of a word: every letter and a final ``</s>`` predicted from the
    ``order - 1`` preceding symbols, left-padded with ``<s>``."""
    history = [BOW] * (order - 1)
    for target in [*word, EOW]:
        yield tuple(history[len(history) - (order - 1):]) if order > 1 else (), target
        history.append(target)


def fit_char_ngram(words: Sequence[str], order: int, counts: Sequence[float] | None = None) -> WittenBellInterpolated:
    """Witten–Bell interpolated character n-gram model of ``words`` (§5.1, Table 2).

    ``counts`` weights each word (e.g. its corpus frequency); ``None`` counts each word once.
    Witten–Bell is not scale invariant, so pass token counts rather than probabilities.
    The counts of all orders 1..n are filled from the same events, with weights, instead of
    repeating words in ``LanguageModel.fit``; ``<s>`` is only ever a context, never a target.
    """
    if order < 1:
        raise ValueError("order must be a positive integer")
    counts = [1.0] * len(words) if counts is None else list(counts)
    if len(counts) != len(words) or any(c < 0 for c in counts):
        raise ValueError("counts must be non-negative and match words")
    events: Counter[tuple[tuple[str, ...], str]] = Counter()
    for word, c in zip(words, counts):
        for context, target in char_ngram_events(word, order):
            events[context, target] += c
    lm = WittenBellInterpolated(order)
    lm.vocab.update([BOW, EOW, *{c for w in words for c in w}])
    for (context, target), c in events.items():
        if c == 0:
            continue
        lm.counts.unigrams[target] += c
        for k in range(1, order):
            lm.counts[k + 1][context[order - 1 - k:]][target] += c
    return lm


def char_ngram_perplexity(lm: WittenBellInterpolated, words: Sequence[str]) -> float:
    """Per-symbol perplexity ``2^(-mean log2 P)`` of ``words`` (letters and ``</s>``) under ``lm``."""
    if len(words) == 0:
        raise ValueError("need at least one word")
    scores = [lm.logscore(target, context or None)
              for word in words for context, target in char_ngram_events(word, lm.order)]
    return 2.0 ** (-sum(scores) / len(scores))


def char_ngram_perplexities(generated: Sequence[str], reference: Sequence[str],
                            reference_counts: Sequence[float] | None = None,
                            orders: Sequence[int] = (2, 3, 4, 5)) -> dict[int, float]:
    """``{n: P_n}``: perplexity of generated words under n-gram models of ``reference`` (Table 2)."""
    return {n: char_ngram_perplexity(fit_char_ngram(reference, n, reference_counts), generated) for n in orders}
