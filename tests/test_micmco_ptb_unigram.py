"""The unigram level of the PTB sentence VAEs' sentences (paperlib.experiments.micmco.ptb.unigram) and the index's
words about it (paperlib.compendium.results_index.micmco_ptb)."""

import json
import math

import pytest
import torch

from paperlib.experiments.micmco.ptb.unigram import unigram_levels, unigram_nll
from tests.conftest import REPO


def test_the_unigram_nll_is_the_add_one_estimate_scored_per_token():
    """Training ids 0, 0, 1, 2 of a vocabulary of 4: add-one counts 3, 2, 2, 1 of 8, so scoring ids 0 and 3 gives
    -(ln 3/8 + ln 1/8) / 2 per token, and a sentence of one id 1 gives -ln 2/8; a smaller smoothing gives the
    unseen id less."""
    train = [torch.tensor([0, 0]), torch.tensor([1, 2])]
    nll = unigram_nll(train, {"a": [torch.tensor([0]), torch.tensor([3])], "b": [torch.tensor([1])]}, 4)
    assert nll["a"] == pytest.approx(-(math.log(3 / 8) + math.log(1 / 8)) / 2, abs=1e-12)
    assert nll["b"] == pytest.approx(-math.log(2 / 8), abs=1e-12)
    half = unigram_nll(train, {"unseen": [torch.tensor([3])]}, 4, smoothing=0.5)["unseen"]
    assert half == pytest.approx(-math.log(0.5 / 6), abs=1e-12) and half > -math.log(1 / 8)
    with pytest.raises(ValueError, match="smoothing must be positive"):
        unigram_nll(train, {}, 4, smoothing=0.0)
    with pytest.raises(ValueError, match="beyond the vocabulary of 2"):
        unigram_nll(train, {}, 2)


def test_the_levels_rebuild_the_stages_sentences_and_refuse_other_ones(mirror, data_root):
    """On the committed cpu results: the sentences rebuilt from the results' settings are the ones the stage scored
    (its recorded counts), the levels are the committed ones (`paperlib levels micmco_ptb`), and a results file whose recorded counts
    differ is refused rather than scored on other sentences."""
    results = json.loads((REPO / "results" / "micmco_ptb.json").read_text())
    levels = unigram_levels(results, data_root)
    committed = json.loads((REPO / "results" / "micmco_ptb_unigram.json").read_text())
    for key in ("nll", "perplexity"):  # float64 sums of logs: equal up to another CPU's last bits
        assert levels[key] == pytest.approx(committed[key], rel=1e-12), key
    assert {k: v for k, v in levels.items() if k not in ("nll", "perplexity")} == \
        {k: v for k, v in committed.items() if k not in ("nll", "perplexity")}
    assert levels["tokens"] == {"train": results["data"]["train_eval_tokens"],
                                "valid": results["data"]["valid_tokens"], "test": results["data"]["test_tokens"]}
    assert all(math.log(5) < v < math.log(results["settings"]["vocab_size"]) for v in levels["nll"].values())
    other = {**results, "data": {**results["data"], "valid_tokens": results["data"]["valid_tokens"] + 1}}
    with pytest.raises(ValueError, match="not the ones the stage scored"):
        unigram_levels(other, data_root)


def test_the_index_sets_each_figures_curves_beside_the_unigram_level():
    """Two validation curves, one 0.14 below the unigram level and one 0.002 above it, each with a frontier point
    above it: the row's scale says where the curves' lowest NLLs lie, names the one above the level (and, moved just
    below it, as within the frontier tie) and counts the points above it; levels of another profile or of other
    sentences (other token counts), or none, add nothing."""
    from paperlib.compendium.results_index.micmco_ptb import _unigram_level
    from paperlib.experiments.micmco.ptb.comparisons import frontier_tie

    def curve(label, best, points):
        return {"label": label, "split": "valid", "best": {"nll": best},
                "frontier": [{"kl": 0.01 * i, "nll": v} for i, v in enumerate(points)]}

    results = {"micmco_ptb": {"profile": "cpu", "data": {"valid_tokens": 100},
                              "curves": {"a": curve("DReG 16", 3.80, [3.80, 3.90, 4.2]),
                                         "b": curve("VIMCO 1", 3.942, [3.942])}},
               "micmco_ptb_unigram": {"profile": "cpu", "nll": {"train": 3.9, "valid": 3.94, "test": 4.0},
                                      "tokens": {"train": 90, "valid": 100, "test": 110}}}
    text = _unigram_level(results, ["a", "b"])
    assert text == ("a unigram model of the same sentences (no context) scores NLL 3.940 per token on validation: the "
                    "curves' lowest NLLs are from 0.002 above it to 0.140 below it; VIMCO 1 (3.942) above it: worse "
                    "than word frequencies alone; 2 of the 4 frontier points lie above it (their latent usage bought "
                    "with a fit worse than the unigram model's)")
    assert _unigram_level(results, ["a"]).startswith("a unigram model of the same sentences (no context) scores NLL "
                                                     "3.940 per token on validation: the curves' lowest NLLs are "
                                                     "0.140 below it; 1 of the 3 frontier points")
    results["micmco_ptb"]["curves"]["b"] = curve("VIMCO 1", 3.93, [3.93])
    assert (f"VIMCO 1 (3.930) below it by no more than the {frontier_tie():.4f}-nat tie: no better than word "
            "frequencies alone") in _unigram_level(results, ["a", "b"])
    results["micmco_ptb"]["curves"]["a"] = curve("DReG 16", 3.95, [3.95])
    assert "the curves' lowest NLLs are 0.010 above it" in _unigram_level(results, ["a"])
    results["micmco_ptb"]["data"]["valid_tokens"] = 101  # levels of other sentences
    assert _unigram_level(results, ["a", "b"]) == ""
    results["micmco_ptb"]["data"]["valid_tokens"] = 100
    results["micmco_ptb_unigram"]["profile"] = "smoke"
    assert _unigram_level(results, ["a", "b"]) == ""
    del results["micmco_ptb_unigram"]
    assert _unigram_level(results, ["a", "b"]) == ""
