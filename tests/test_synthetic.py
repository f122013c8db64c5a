"""Synthetic data sets of the seeds and the word list for word generation."""

import math

import numpy as np
import pytest
import torch

from paperlib.data import END_OF_WORD, WordList, english_word_list, reverse_copy, split_tokens, split_types, uniform_symbols


def test_uniform_symbols_are_reproducible_and_near_uniform():
    a, b = uniform_symbols(200_000, 10_000, seed=3), uniform_symbols(200_000, 10_000, seed=3)
    assert torch.equal(a, b)
    assert int(a.min()) >= 0 and int(a.max()) < 10_000
    counts = torch.bincount(a, minlength=10_000).double()
    probs = counts / counts.sum()
    entropy = -(probs[probs > 0] * probs[probs > 0].log()).sum().item()
    assert abs(entropy - math.log(10_000)) < 0.03  # plug-in entropy is ln 10000 ≈ 9.210 up to sampling bias


def test_reverse_copy_targets_are_the_source_reversed_behind_a_marker():
    data = reverse_copy(5, 7, vocab_size=13, seed=1)
    assert data.source.shape == data.targets.shape == data.decoder_inputs.shape == (5, 7)
    assert torch.equal(data.targets, data.source.flip(1))
    assert (data.decoder_inputs[:, 0] == data.marker).all() and data.marker == 13
    assert torch.equal(data.decoder_inputs[:, 1:], data.targets[:, :-1])
    assert int(data.source.max()) < 13
    with pytest.raises(ValueError):
        reverse_copy(5, 0)


def test_english_word_list_follows_the_papers_filters():
    words = english_word_list(min_len=2, max_len=12, min_count=10, total_tokens=1e9)
    assert len(words) > 50_000
    assert all(2 <= len(w) <= 12 and w.isascii() and w.isalpha() and w.islower() for w in words.words)
    assert int(words.counts.min()) >= 10
    assert all(a >= b for a, b in zip(words.counts, words.counts[1:]))
    assert words.words[0] == "the"
    assert words.alphabet() == [chr(c) for c in range(ord("a"), ord("z") + 1)] + [END_OF_WORD]
    assert abs(words.probs.sum() - 1) < 1e-12


def test_token_split_keeps_counts_and_sends_about_ten_percent_to_test():
    data = english_word_list(top_n=5_000)
    train, test = split_tokens(data, 0.1, seed=0)
    total = data.counts.sum()
    assert train.counts.sum() + test.counts.sum() == total
    assert abs(test.counts.sum() / total - 0.1) < 1e-3
    assert set(test.words) <= set(data.words)


def test_type_split_holds_out_ten_percent_of_types_entirely():
    data = WordList([f"w{i}" for i in range(1000)], np.arange(1000, 0, -1))
    train, test = split_types(data, 0.1, seed=0)
    assert len(test) == 100 and len(train) == 900
    assert not set(train.words) & set(test.words)
    with pytest.raises(ValueError, match="test_fraction"):
        split_types(data, 1.5)
