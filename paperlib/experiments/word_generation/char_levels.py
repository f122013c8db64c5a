"""The level of a word model that keeps no state: character n-gram models of the training words, scored by the same
cross-entropies as Tables 1 and 2 (Schmidt & Hofmann §4.1).

A model of words that has learned only which letters are common (a character unigram) or which letter follows which
(a bigram) already assigns every string a probability, so ``H[P_test, P̂]`` of such a model is the level a DSSM or a
GRU must get below before its rows say anything about state. Both are Witten–Bell character models of the split's
training words weighted by their token counts (:func:`paperlib.word_metrics.fit_char_ngram`, the models Table 2's
perplexities use), a word's probability the product over its letters and its end, scored on the split's training
and test distributions (:func:`paperlib.word_metrics.train_test_cross_entropy`). The paper reports no such rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ORDERS = (1, 2)  # letters alone; each letter from the one before
ORDER_NAMES = {1: "character unigram", 2: "character bigram"}


def char_ngram_levels(split: Any, orders: Sequence[int] = ORDERS) -> dict[int, dict[str, float]]:
    """``{n: {"H_train", "H_test"}}`` (nats) of the Witten–Bell character n-gram model of ``split``'s training words
    (a :class:`~paperlib.experiments.word_generation.data.SplitData`), per order ``n``; a test word with a letter the
    training words never show has probability zero, and H_test is then infinite."""
    import torch

    from paperlib.word_metrics import char_ngram_events, fit_char_ngram, train_test_cross_entropy

    out = {}
    for n in orders:
        lm = fit_char_ngram(split.train.words, n, split.train.counts.tolist())

        def log_probs(words: list[str], lm=lm, n=n) -> torch.Tensor:  # nltk's scores are log2
            return torch.tensor([math.log(2) * sum(lm.logscore(target, context or None)
                                                   for context, target in char_ngram_events(word, n))
                                 for word in words], dtype=torch.float64)

        h_train, h_test = train_test_cross_entropy(log_probs, split.train.words, split.train.counts.tolist(),
                                                   split.test.words, split.test.counts.tolist())
        out[n] = {"H_train": h_train, "H_test": h_test}
    return out


def stage_char_levels(results: Mapping[str, Any], settings: Any) -> dict[str, Any]:
    """The character n-gram levels of both splits of the ``word_generation`` stage whose ``results`` were made with
    ``settings`` (its :class:`~paperlib.experiments.word_generation.settings.WordGenerationParams`): the word list and
    splits rebuilt as the stage builds them, checked against the sizes and entropies it recorded. Returns
    ``{"profile", "top_n", "split_sizes", "orders": {n: name}, "splits": {split: {n: {"H_train", "H_test"}}}}``
    (orders as strings, as JSON keeps them; ``split_sizes`` the checked sizes, for readers to match)."""
    from paperlib.data.wordlist import english_word_list
    from paperlib.experiments.word_generation.data import entropy, make_splits

    data = english_word_list(settings.min_len, settings.max_len, settings.min_count, settings.total_tokens,
                             settings.top_n)
    splits = make_splits(data, settings.test_fraction, settings.split_seed)
    recorded = results["data"]["splits"]
    sizes = {}
    for name, split in splits.items():
        sizes[name] = {"train_types": len(split.train), "test_types": len(split.test),
                       "train_tokens": int(split.train.counts.sum()), "test_tokens": int(split.test.counts.sum())}
        now = {**sizes[name], "train_entropy": entropy(split.train.counts), "test_entropy": entropy(split.test.counts)}
        differ = {k: (recorded[name].get(k), v) for k, v in now.items()
                  if recorded[name].get(k) is None or not math.isclose(recorded[name][k], v, rel_tol=1e-9)}
        if differ:
            raise ValueError(f"the {name} split rebuilt from the settings is not the one the stage scored (recorded, "
                             f"now: {differ})")
    return {"profile": results.get("profile"), "top_n": settings.top_n, "split_sizes": sizes,
            "orders": {str(n): ORDER_NAMES[n] for n in ORDERS},
            "splits": {name: {str(n): v for n, v in char_ngram_levels(split).items()} for name, split in splits.items()}}


def write_levels(profile: str | None = None) -> Path:
    """``paperlib levels word_generation``: the character n-gram levels of the stage's results at ``profile``
    (default: the active one), with that profile's ``word_generation`` settings, written beside them as
    ``word_generation_char_levels.json`` (the DVC stage ``word_generation_char_levels``; the notebook shows and the
    results index quotes them)."""
    import json

    from paperlib.atomic_files import write_json_atomic
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root
    from paperlib.experiments.common.stage import results_path

    root = repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    results = json.loads(results_path(root, "word_generation", profile).read_text())
    out = results_path(root, "word_generation_char_levels", profile)
    write_json_atomic(out, stage_char_levels(results, experiment_params("word_generation", profile, params)))
    return out


__all__ = ["ORDERS", "ORDER_NAMES", "char_ngram_levels", "stage_char_levels", "write_levels"]
