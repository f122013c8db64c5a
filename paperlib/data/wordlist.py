"""A word list with frequencies for unconditional word generation (Schmidt & Hofmann §5.1).

The paper uses BooksCorpus words of length 2..12 made only of letters with at least 10
occurrences (143K types). BooksCorpus is not available offline, so we substitute the English
frequency list shipped with the `wordfreq` package, filtered by the same rules. Its frequencies
are turned into counts of a virtual corpus of `total_tokens` tokens (BooksCorpus has almost 1B),
which is what the `min_count` rule and the token-level train/test split act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_LETTERS = re.compile(r"^[a-z]+$")
END_OF_WORD = "</w>"


@dataclass
class WordList:
    """Word types with counts; `probs` is the unigram distribution P(w) of the data."""

    words: list[str]
    counts: np.ndarray  # [V] int64

    def __post_init__(self) -> None:
        if len(self.words) != len(self.counts):
            raise ValueError("words and counts must have the same length")

    def __len__(self) -> int:
        return len(self.words)

    @property
    def probs(self) -> np.ndarray:
        return self.counts / self.counts.sum()

    def alphabet(self) -> list[str]:
        """Sorted characters of the words, plus the end-of-word symbol last."""
        return sorted({c for w in self.words for c in w}) + [END_OF_WORD]


def english_word_list(
    min_len: int = 2,
    max_len: int = 12,
    min_count: int = 10,
    total_tokens: float = 1e9,
    top_n: int | None = None,
    wordlist: str = "large",
) -> WordList:
    """Letters-only English words of length `min_len..max_len` from `wordfreq`, as virtual counts.

    `top_n` keeps only the most frequent words after filtering (for small profiles).
    """
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    import wordfreq

    freqs = wordfreq.get_frequency_dict("en", wordlist=wordlist)
    kept = [
        (w, round(f * total_tokens))
        for w, f in freqs.items()
        if min_len <= len(w) <= max_len and _LETTERS.match(w)
    ]
    kept = [(w, c) for w, c in kept if c >= min_count]
    kept.sort(key=lambda wc: (-wc[1], wc[0]))
    if top_n is not None:
        kept = kept[:top_n]
    words, counts = zip(*kept) if kept else ((), ())
    return WordList(list(words), np.asarray(counts, dtype=np.int64))


def split_tokens(data: WordList, test_fraction: float = 0.1, seed: int = 0) -> tuple[WordList, WordList]:
    """The paper's standard split "at the word level": each token goes to test with probability p.

    Types whose every token went to one side are absent from the other side's list.
    """
    _check_fraction(test_fraction)
    rng = np.random.default_rng(seed)
    test_counts = rng.binomial(data.counts, test_fraction)
    return _nonzero(data.words, data.counts - test_counts), _nonzero(data.words, test_counts)


def split_types(data: WordList, test_fraction: float = 0.1, seed: int = 0) -> tuple[WordList, WordList]:
    """The paper's alternative split: a random `test_fraction` of word types, regardless of frequency,
    appear only in the test set."""
    _check_fraction(test_fraction)
    rng = np.random.default_rng(seed)
    is_test = np.zeros(len(data), dtype=bool)
    is_test[rng.permutation(len(data))[: round(test_fraction * len(data))]] = True
    train = WordList([w for w, t in zip(data.words, is_test) if not t], data.counts[~is_test])
    test = WordList([w for w, t in zip(data.words, is_test) if t], data.counts[is_test])
    return train, test


def _nonzero(words: list[str], counts: np.ndarray) -> WordList:
    keep = counts > 0
    return WordList([w for w, k in zip(words, keep) if k], counts[keep])


def _check_fraction(p: float) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {p}")
