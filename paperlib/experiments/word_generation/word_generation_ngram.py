"""How Table 2's n-gram perplexities depend on the word list the n-gram models are fitted on (Schmidt & Hofmann §5.1).

The paper scores generated words "under Witten-Bell discounted character n-gram models trained on either the whole
corpus or the test data only" of its alternative split (10% of the 143K word types, chosen regardless of frequency,
only in the test set). It does not say whether a word type enters the fit once or once per corpus token. Witten–Bell
is not scale invariant: a context seen N times with T distinct continuations leaves T / (N + T) of its probability
to continuations it never saw, so weighting types by token counts in the millions leaves next to nothing for letter
sequences the fitted types do not continue. The fitted word list matters as much: the ``word_generation`` stage's
``cpu`` profile keeps the 20,000 most frequent types (``top_n``), whose test-only tenth covers far fewer letter
contexts than the paper's 14,300 test types.

Table 2's oracle rows (ORACLE-TRAIN: words drawn from the training distribution; ORACLE-TEST: from the test one) need
no trained model, so they calibrate the metric: this stage fits the models of Table 2 on the alternative split of
word lists of several sizes (``vocabularies``; the ``word_generation`` stage's own ``top_n`` always among them),
each with types weighted by their token counts (``tokens``, as the stage does) and with every type counted once
(``types``), and scores the oracles' words under each. At the stage's own list with ``tokens`` the numbers are its
Table 2 oracle rows (the same split, words and models); the other lists and weightings show which of the two
choices moves the oracles onto the paper's numbers.

Everything except ``vocabularies`` and ``weightings`` (word filters, virtual corpus size, split, n-gram orders,
number of words, seed) is the ``word_generation`` section of the same profile.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from paperlib.atomic_files import write_json_atomic
from paperlib.data.wordlist import WordList, english_word_list
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.provenance import provenance
from paperlib.experiments.common.stage import results_path
from paperlib.experiments.word_generation.data import (SplitData, fit_ngram_models, make_splits, oracle_rows,
                                                      word_list_sha256)
from paperlib.experiments.word_generation.settings import WordGenerationParams
from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS, PAPER_TABLE2

NAME = "word_generation_ngram"
MAIN = "word_generation"
WEIGHTINGS = ("tokens", "types")
ORACLES = ("ORACLE-TRAIN", "ORACLE-TEST")
SOURCES = {"full": "train+test", "test": "test-only"}
PAPER_TYPES = 143_000  # the paper's filtered BooksCorpus vocabulary (§5.1)


@register_experiment(NAME)
@dataclass(frozen=True)
class NgramReferenceParams:
    """``vocabularies``: the word-list sizes (most frequent types kept; null: the whole filtered list) whose
    alternative split the n-gram models are fitted on, besides the ``word_generation`` stage's own ``top_n``;
    ``weightings``: how a type enters the fit, ``tokens`` (its token count in the virtual corpus) and/or ``types``
    (once)."""

    vocabularies: list[int | None] = field(default_factory=lambda: [PAPER_TYPES])
    weightings: list[str] = field(default_factory=lambda: list(WEIGHTINGS))

    def __post_init__(self) -> None:
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 10) for v in self.vocabularies):
            raise ValueError(f"vocabularies must be word counts >= 10 or null (the whole list), got {self.vocabularies}")
        if len(set(self.vocabularies)) != len(self.vocabularies):
            raise ValueError(f"vocabularies must not repeat, got {self.vocabularies}")
        unknown = sorted(set(self.weightings) - set(WEIGHTINGS))
        if unknown or not self.weightings or len(set(self.weightings)) != len(self.weightings):
            raise ValueError(f"weightings must be distinct values of {list(WEIGHTINGS)}, got {self.weightings}")


def counted_once(split: SplitData) -> SplitData:
    """``split`` with every type's count set to 1 (its words, vocabulary and encoded training words unchanged): what
    the n-gram fit sees when each type enters once. The alternative split's halves share no type, so the train+test
    fit also counts each type once."""
    once = {part: WordList(getattr(split, part).words, np.ones(len(getattr(split, part)), dtype=np.int64))
            for part in ("train", "test")}
    return dataclasses.replace(split, **once)


def fit_reference_models(split: SplitData, orders: list[int], weighting: str) -> dict[str, dict[int, Any]]:
    """Table 2's Witten–Bell character models of ``split`` (the alternative split), ``{"full": {n: lm}, "test": {n:
    lm}}`` (:func:`~paperlib.experiments.word_generation.data.fit_ngram_models`): fitted on train+test and on the
    test types only, each type weighted by its token count (``tokens``; the ``word_generation`` stage's models) or
    counted once (``types``, :func:`counted_once`)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    return fit_ngram_models(split if weighting == "tokens" else counted_once(split), orders)


def score_vocabulary(top_n: int | None, main: WordGenerationParams, weightings: list[str]) -> dict[str, Any]:
    """One word list: its alternative split's sizes and, per weighting, each oracle's perplexity under the
    train+test and test-only models of every order, ``{"perplexities": {weighting: {oracle: {source: {n: P}}}}}``;
    None where a word holds a letter the fitted types never show (an infinite perplexity, as the stage records it).
    The oracles' words are those of the ``word_generation`` stage's Table 2 rows
    (:func:`~paperlib.experiments.word_generation.data.oracle_rows`, drawn with the stage's first seed)."""
    data = english_word_list(main.min_len, main.max_len, main.min_count, main.total_tokens, top_n)
    split = make_splits(data, main.test_fraction, main.split_seed)["types"]
    perplexities = {}
    for weighting in weightings:
        rows = oracle_rows(split, main, min(main.seeds), fit_reference_models(split, main.ngram_orders, weighting))
        perplexities[weighting] = {oracle: {source: rows[oracle][f"ppl_{source}"] for source in SOURCES}
                                   for oracle in ORACLES}
    return {"top_n": top_n, "types": len(data), "train_types": len(split.train), "test_types": len(split.test),
            "train_tokens": int(split.train.counts.sum()), "test_tokens": int(split.test.counts.sum()),
            "word_list_sha256": word_list_sha256(data), "perplexities": perplexities}


def run_reference(settings: NgramReferenceParams, main: WordGenerationParams) -> dict[str, Any]:
    """Every word list of ``settings`` (the main stage's ``top_n`` first) scored by :func:`score_vocabulary`."""
    sizes = [main.top_n] + [v for v in settings.vocabularies if v != main.top_n]
    return {
        "experiment": NAME,
        "settings": dataclasses.asdict(settings),
        "main": {"top_n": main.top_n, "ngram_orders": list(main.ngram_orders), "ngram_words": main.ngram_words,
                 "generated_words": main.generated_words, "seed": min(main.seeds)},
        "vocabularies": [score_vocabulary(n, main, list(settings.weightings)) for n in sizes],
        "paper": {"types": PAPER_TYPES, "orders": list(PAPER_NGRAM_ORDERS),
                  "oracles": {oracle: {source: PAPER_TABLE2[oracle][source] for source in SOURCES}
                              for oracle in ORACLES}},
    }


def reference_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per (word list, weighting, oracle, fitted-on): ``types`` (the list's size), ``weighting``, ``oracle``,
    ``fitted on``, ours ``P<n>`` and the paper's ``paper P<n>`` at each order the paper reports: the notebook's
    table."""
    orders = results["main"]["ngram_orders"]
    paper = results["paper"]
    rows = []
    for vocab in results["vocabularies"]:
        for weighting, by_oracle in vocab["perplexities"].items():
            for oracle, by_source in by_oracle.items():
                for source, values in by_source.items():
                    row = {"types": vocab["types"], "weighting": weighting, "oracle": oracle,
                           "fitted on": SOURCES[source]}
                    for n in orders:
                        row[f"P{n}"] = values[str(n)]
                        theirs = paper["oracles"][oracle][source]
                        row[f"paper P{n}"] = theirs[paper["orders"].index(n)] if n in paper["orders"] else None
                    rows.append(row)
    return rows


def run_word_generation_ngram(profile: str | None = None, progress: bool = True) -> Path:
    """The DVC stage: settings from params.yaml (this block and ``word_generation``'s), results to
    ``results/word_generation_ngram.json``."""
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root

    started, root = time.time(), repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    settings: NgramReferenceParams = experiment_params(NAME, profile, params)
    main: WordGenerationParams = experiment_params(MAIN, profile, params)
    results = {"profile": profile, **run_reference(settings, main)}
    if progress:
        for vocab in results["vocabularies"]:
            print(f"{vocab['types']:,} types: ORACLE-TRAIN test-only P{main.ngram_orders[-1]} "
                  + ", ".join(f"{w} {vocab['perplexities'][w]['ORACLE-TRAIN']['test'][str(main.ngram_orders[-1])]:.1f}"
                              for w in settings.weightings), flush=True)
    out = results_path(root, NAME, profile)
    write_json_atomic(out, results)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      provenance(root, profile, {"ngram": dataclasses.asdict(settings),
                                                 MAIN: dataclasses.asdict(main)}, None, started,
                                 code=code_hash(__name__)))
    return out


__all__ = ["NgramReferenceParams", "counted_once", "fit_reference_models", "reference_rows", "run_reference",
           "run_word_generation_ngram", "score_vocabulary"]
