"""Character n-gram levels of the word-generation splits (paperlib.experiments.word_generation.char_levels) and the
index's words about them (paperlib.compendium.results_index.word_generation)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from paperlib.data.wordlist import WordList
from paperlib.experiments.word_generation.char_levels import char_ngram_levels, stage_char_levels


def test_the_unigram_level_is_the_letter_frequencies_cross_entropy():
    """Training words "ab" and "b", once each: the letters and ends a, b, </s>, b, </s> give a character unigram
    p(a) = 1/5, p(b) = p(</s>) = 2/5 (Witten–Bell at order 1 is the relative frequency), so under it "ab" has log
    probability ln(1/5) + 2 ln(2/5) and "b" 2 ln(2/5); H_train weighs both by half, H_test is that of "b" alone.
    The bigram, which sees which letter follows which, does better on the training words."""
    split = SimpleNamespace(train=WordList(["ab", "b"], np.array([1, 1])), test=WordList(["b"], np.array([3])))
    levels = char_ngram_levels(split)
    ab, b = -(math.log(1 / 5) + 2 * math.log(2 / 5)), -2 * math.log(2 / 5)
    assert levels[1]["H_train"] == pytest.approx((ab + b) / 2, abs=1e-12)
    assert levels[1]["H_test"] == pytest.approx(b, abs=1e-12)
    assert levels[2]["H_train"] < levels[1]["H_train"]
    unseen = SimpleNamespace(train=split.train, test=WordList(["c"], np.array([1])))
    assert char_ngram_levels(unseen, orders=(1,))[1]["H_test"] == math.inf  # a letter the training words never show


def test_the_stages_splits_are_rebuilt_and_other_ones_refused():
    """At the smoke profile's word list: the levels of both splits, unigram above bigram (a letter's predecessor
    tells something), and a results file whose recorded split sizes or entropies differ is refused."""
    from paperlib.experiments.common.config import experiment_params, load_params
    from paperlib.data.wordlist import english_word_list
    from paperlib.experiments.word_generation.data import entropy, make_splits

    settings = experiment_params("word_generation", "smoke", load_params())
    data = english_word_list(settings.min_len, settings.max_len, settings.min_count, settings.total_tokens,
                             settings.top_n)
    recorded = {name: {"train_types": len(s.train), "test_types": len(s.test), "train_tokens": int(s.train.counts.sum()),
                       "test_tokens": int(s.test.counts.sum()), "train_entropy": entropy(s.train.counts),
                       "test_entropy": entropy(s.test.counts)}
                for name, s in make_splits(data, settings.test_fraction, settings.split_seed).items()}
    results = {"profile": "smoke", "data": {"splits": recorded}}
    levels = stage_char_levels(results, settings)
    assert levels["profile"] == "smoke" and levels["top_n"] == settings.top_n
    for split in ("standard", "types"):
        assert levels["splits"][split]["1"]["H_test"] > levels["splits"][split]["2"]["H_test"] > 0
    assert levels["split_sizes"]["types"] == {k: v for k, v in recorded["types"].items() if "entropy" not in k}
    for key, change in (("test_types", 1), ("train_entropy", 1e-6)):  # other sizes, or other counts of the same size
        results["data"]["splits"] = {**recorded, "types": {**recorded["types"], key: recorded["types"][key] + change}}
        with pytest.raises(ValueError, match=f"the types split rebuilt .* not the one the stage scored.*{key}"):
            stage_char_levels(results, settings)


def test_the_index_places_the_trained_rows_between_the_levels():
    """DSSMs at 13.6-14.5 between a unigram of 15.6 and a bigram of 12.7, a GRU below both, and a Table 3 cell at
    the unigram's level (named); nothing without levels of the same profile and word list (its top_n and the split
    sizes the stage recorded)."""
    from paperlib.compendium.results_index.word_generation import _wg_char_level_note

    main = {"profile": "cpu", "data": {"top_n": 100},
            "table1": [{"model": "TRIL", "H_test": 14.5}, {"model": "2xTRIL", "H_test": 13.6},
                       {"model": "BASELINE-8D", "H_test": 11.0}, {"model": "ORACLE-TRAIN", "H_test": 7.0}],
            "table2": [{"model": "2xTRIL, K=10", "H_test": 16.7}, {"model": "BASELINE-8D", "H_test": 14.8}],
            "table3": {"cells": {"ID": {"ID": {"H_test": 15.59}, "DIAG": {"H_test": 14.4}}}}}
    levels = {"profile": "cpu", "top_n": 100, "orders": {"1": "character unigram", "2": "character bigram"},
              "splits": {"standard": {"1": {"H_test": 15.58}, "2": {"H_test": 12.71}},
                         "types": {"1": {"H_test": 17.95}, "2": {"H_test": 15.23}}}}
    main["data"]["splits"] = {"standard": {"train_types": 90, "test_tokens": 5}}
    levels["split_sizes"] = {"standard": {"train_types": 90, "test_tokens": 5}}
    text = _wg_char_level_note({"word_generation": main, "word_generation_char_levels": levels})
    assert ("on the standard split a character unigram of the training words scores H_test 15.58 and a character "
            "bigram 12.71 (DSSMs 13.60–14.50 between them; GRU 11.00 below both; Table 3's cells 14.40–15.59; within 1% "
            "of the unigram or above it: F_g × F_q ID × ID (15.59))") in text, text
    assert "on the type split a character unigram of the training words scores H_test 17.95 and a character bigram " \
           "15.23 (DSSM 16.70 between them; GRU 14.80 below both)" in text
    assert text.endswith(": a row above the bigram scores worse than a model of which letter follows which")
    other_list = {**levels, "split_sizes": {"standard": {"train_types": 91, "test_tokens": 5}}}
    for other in ({**levels, "profile": "smoke"}, {**levels, "top_n": 200}, other_list, None):
        assert _wg_char_level_note({"word_generation": main, "word_generation_char_levels": other}) == ""
