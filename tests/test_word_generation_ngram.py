"""Table 2's n-gram metric calibrated on the oracle rows: at the word_generation stage's own list with token weights
it is that stage's metric (the same numbers), counting types once is a different model, and the summary counts what
it says it counts."""

import dataclasses
import math

import pytest

from paperlib.data.wordlist import english_word_list
from paperlib.experiments.common.config import experiment_params
from paperlib.experiments.word_generation.data import fit_ngram_models, make_splits, oracle_rows
from paperlib.experiments.word_generation.claims import calibration_summary
from paperlib.experiments.word_generation.word_generation_ngram import (NgramReferenceParams, counted_once,
                                                                        fit_reference_models, reference_rows,
                                                                        run_reference, score_vocabulary)
from paperlib.reference.word_generation import PAPER_NGRAM_ORDERS, PAPER_TABLE2
from paperlib.word_metrics import char_ngram_perplexity, fit_char_ngram


@pytest.fixture(scope="module")
def main():
    settings = experiment_params("word_generation", "smoke")
    return dataclasses.replace(settings, generated_words=200, ngram_words=100)


@pytest.fixture(scope="module")
def split(main):
    data = english_word_list(main.min_len, main.max_len, main.min_count, main.total_tokens, main.top_n)
    return make_splits(data, main.test_fraction, main.split_seed)["types"]


def test_settings_are_checked():
    with pytest.raises(ValueError, match="weightings"):
        NgramReferenceParams(weightings=["bytes"])
    with pytest.raises(ValueError, match="weightings"):
        NgramReferenceParams(weightings=[])
    with pytest.raises(ValueError, match="must not repeat"):
        NgramReferenceParams(vocabularies=[1000, 1000])
    with pytest.raises(ValueError, match="vocabularies"):
        NgramReferenceParams(vocabularies=[True])
    assert NgramReferenceParams(vocabularies=[None, 500]).vocabularies == [None, 500]


def test_token_weights_are_the_stage_models_and_type_counts_are_not(split, main):
    orders = [2, 4]
    stage = fit_ngram_models(split, orders)
    tokens = fit_reference_models(split, orders, "tokens")
    types = fit_reference_models(split, orders, "types")
    words = split.test.words[:40] + split.train.words[:40]
    for source in ("full", "test"):
        for n in orders:
            assert char_ngram_perplexity(tokens[source][n], words) == char_ngram_perplexity(stage[source][n], words)
    # Witten-Bell is not scale invariant: counting each type once is another model, not a rescaling
    seen = split.test.words[:40]  # letters of the test types only: finite under the test-only models
    assert math.isfinite(char_ngram_perplexity(tokens["test"][4], seen))
    assert char_ngram_perplexity(types["test"][4], seen) != pytest.approx(
        char_ngram_perplexity(tokens["test"][4], seen), rel=1e-3)
    with pytest.raises(ValueError, match="weighting"):
        fit_reference_models(split, orders, "bytes")


def test_types_counted_once_are_the_unweighted_fit(split):
    """Counting each type once is fit_char_ngram without counts, on train+test (the halves share no type) and on
    the test types alone; the split's words and the original counts are left as they were."""
    once = counted_once(split)
    assert not set(split.train.words) & set(split.test.words)
    assert once.train.words == split.train.words and once.test.words == split.test.words
    assert set(once.train.counts.tolist()) == {1} and split.train.counts.max() > 1
    models = fit_reference_models(split, [3], "types")
    words = split.test.words[:30] + split.train.words[:30]
    unweighted = {"full": fit_char_ngram(split.train.words + split.test.words, 3),
                  "test": fit_char_ngram(split.test.words, 3)}
    for source in ("full", "test"):
        assert char_ngram_perplexity(models[source][3], words) == char_ngram_perplexity(unweighted[source], words)


def test_the_stage_list_with_token_weights_reproduces_the_oracle_rows(split, main):
    """The same split, oracle words and models as the word_generation stage: the same perplexities, exactly."""
    ngram = fit_ngram_models(split, main.ngram_orders)
    rows = oracle_rows(split, main, min(main.seeds), ngram)
    scored = score_vocabulary(main.top_n, main, ["tokens", "types"])
    assert scored["types"] == len(split.train) + len(split.test) and scored["test_types"] == len(split.test)
    for oracle in ("ORACLE-TRAIN", "ORACLE-TEST"):
        for source in ("full", "test"):
            ours = scored["perplexities"]["tokens"][oracle][source]
            assert ours == {str(n): rows[oracle][f"ppl_{source}"][str(n)] for n in main.ngram_orders}
    assert scored["perplexities"]["types"] != scored["perplexities"]["tokens"]
    assert scored["perplexities"]["types"]["ORACLE-TEST"]["test"]["2"] is not None  # test words under test models


def test_the_stage_list_comes_first_and_is_not_repeated(main):
    small = dataclasses.replace(main, ngram_words=20, generated_words=20)
    results = run_reference(NgramReferenceParams(vocabularies=[main.top_n, 100], weightings=["types"]), small)
    assert [v["top_n"] for v in results["vocabularies"]] == [main.top_n, 100]
    assert [v["types"] for v in results["vocabularies"]] == [main.top_n, 100]
    assert set(results["vocabularies"][0]["perplexities"]) == {"types"}


def _results(scale: float, far: float = 1.0):
    """Fake results whose every oracle cell is the paper's times ``scale``, the training oracle's test-only top
    order times ``far`` more."""
    orders = list(PAPER_NGRAM_ORDERS)
    oracles = {o: {s: PAPER_TABLE2[o][s] for s in ("full", "test")} for o in ("ORACLE-TRAIN", "ORACLE-TEST")}
    perplexities = {o: {s: {str(n): v * scale * (far if (o, s, n) == ("ORACLE-TRAIN", "test", orders[-1]) else 1)
                            for n, v in zip(orders, values)} for s, values in by_source.items()}
                    for o, by_source in oracles.items()}
    return {"main": {"ngram_orders": orders},
            "paper": {"types": 143_000, "orders": orders, "oracles": oracles},
            "vocabularies": [{"types": 500, "top_n": 500, "perplexities": {"tokens": perplexities}}]}


def test_the_summary_counts_cells_near_the_paper_and_names_the_farthest():
    (exact,) = calibration_summary(_results(1.0))
    assert exact["near"] == exact["cells"] == 16
    (off,) = calibration_summary(_results(1.2, far=3.0))
    assert off["near"] == 15  # 1.2 is within 1.25 either way; 3.6 is not
    assert off["farthest"] == {"oracle": "ORACLE-TRAIN", "fitted on": "test-only", "order": 5,
                               "ours": pytest.approx(26.4 * 3.6), "paper": 26.4}
    (below,) = calibration_summary(_results(1 / 1.3))
    assert below["near"] == 0 and math.isclose(below["farthest"]["ours"] / below["farthest"]["paper"], 1 / 1.3)
    with pytest.raises(ValueError, match="exceed 1"):
        calibration_summary(_results(1.0), near=1.0)


def test_rows_join_the_paper_by_order_not_position():
    results = _results(2.0)
    results["main"]["ngram_orders"] = [3, 5]  # a profile may score fewer orders than the paper reports
    for source in ("full", "test"):
        for oracle in ("ORACLE-TRAIN", "ORACLE-TEST"):
            cells = results["vocabularies"][0]["perplexities"]["tokens"][oracle][source]
            for n in ("2", "4"):
                del cells[n]
    rows = reference_rows(results)
    assert len(rows) == 4
    train_test = next(r for r in rows if r["oracle"] == "ORACLE-TRAIN" and r["fitted on"] == "test-only")
    assert train_test["paper P3"] == 15.7 and train_test["paper P5"] == 26.4
    assert train_test["P3"] == pytest.approx(31.4) and "P2" not in train_test


def test_an_infinite_perplexity_is_the_farthest_cell_and_not_near():
    results = _results(1.0)
    results["vocabularies"][0]["perplexities"]["tokens"]["ORACLE-TEST"]["full"]["3"] = None  # a letter never seen
    (summary,) = calibration_summary(results)
    assert summary["near"] == 15
    assert summary["farthest"] == {"oracle": "ORACLE-TEST", "fitted on": "train+test", "order": 3, "ours": None,
                                   "paper": 6.0}
