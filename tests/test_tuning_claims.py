"""§2.B's neighbourhood claim (paperlib.experiments.language_models.claims) on constructed study records: the part flips
with the largest neighbour's excess against the thesis' 1.2 points scaled to our best (the mean of the best trial
and its reruns), ties inside twice the seed spread of the best, counts a failed neighbour as infinitely worse, and cannot be judged without neighbours;
the results index shows exactly the claim the module judges."""

import math

import pytest

from paperlib.experiments.common.claims import Unjudged
from paperlib.experiments.language_models.claims import neighbourhood_claim, neighbourhood_numbers
from paperlib.reference.tuning import TUNING


def _trial(number, ppl, probe=None, state="COMPLETE"):
    trial = {"number": number, "state": state, "value": None if ppl is None else math.log(ppl), "params": {}}
    return {**trial, "probe": probe} if probe else trial


def _results(neighbours, reruns, best=150.0, model="lstm"):
    trials = [_trial(0, best), _trial(1, 400.0)]
    trials += [_trial(2 + i, p, "neighbour", "COMPLETE" if p else "FAIL") for i, p in enumerate(neighbours)]
    trials += [_trial(2 + len(neighbours) + i, p, "rerun") for i, p in enumerate(reruns)]
    near = [0] + [t["number"] for t in trials if t.get("probe")]
    record = {"trials": trials, "best": trials[0], "neighbourhood": {"trials": near, "max_gap_ppl": None}}
    return {"profile": "cpu", "models": {model: record}}


def test_the_allowed_excess_is_the_thesis_share_of_our_best():
    allowed = TUNING["neighbourhood_max_gap_ppl"] / TUNING["best_valid_ppl"]["lstm"] * 150.0  # 3.23 ppl
    inside, beyond = 150.0 + allowed - 0.5, 150.0 + allowed + 0.5
    quiet = [150.05, 149.95]  # reruns: s.d. 0.07, margin 0.14
    assert neighbourhood_claim(_results([151.0, inside], quiet), "M-F2.5").verdict == "reproduced"
    part = neighbourhood_claim(_results([151.0, beyond], quiet), "M-F2.5").parts[0]
    assert part.verdict == "not reproduced" and f"allowed {allowed:.1f}" in part.evidence
    # the same neighbours against a noisy best: inside twice its seed spread the gap is a tie
    noisy = [152.0, 148.0]  # s.d. 2.0 -> margin 4.0 > the 0.5 gap
    assert neighbourhood_claim(_results([151.0, inside], noisy), "M-F2.5").verdict == "within noise"
    assert neighbourhood_claim(_results([151.0, inside], []), "M-F2.5").verdict == "within noise"  # no margin
    # the Mogrifier's row reads the Mogrifier's study against its own thesis best
    mog = neighbourhood_claim(_results([151.0], quiet, model="mogrifier"), "M-F2.6").parts[0]
    assert f"{TUNING['best_valid_ppl']['mogrifier']}" in mog.rule


def test_a_failed_neighbour_is_infinitely_worse_and_no_neighbour_is_unjudged():
    found = neighbourhood_numbers(_results([151.0, None], [150.0])["models"]["lstm"])
    assert found["excess"][0] == pytest.approx(1.0) and found["excess"][1] == math.inf
    assert found["reruns"] == [pytest.approx(150.0), pytest.approx(150.0)]
    # the best hyperparameters' perplexity is the mean over their seeds: the best trial alone is the search's minimum
    lucky = neighbourhood_numbers(_results([151.0], [154.0])["models"]["lstm"])
    assert lucky["reference"] == pytest.approx(152.0) and lucky["excess"] == [pytest.approx(-1.0)]
    part = neighbourhood_claim(_results([151.0, None], [150.0]), "M-F2.5").parts[0]
    assert part.verdict == "not reproduced" and "failed" in part.evidence
    with pytest.raises(Unjudged, match="no trial but the best"):
        neighbourhood_claim(_results([], [150.0]), "M-F2.5")
    with pytest.raises(Unjudged, match="no complete trial"):
        neighbourhood_claim(_results([151.0], [], model="lstm"), "M-F2.6")


def test_the_index_rows_show_the_claims_of_the_committed_results():
    from paperlib.compendium import results_index as ri
    from tests.conftest import REPO
    from tests.test_results_index import _items

    results = ri.load_results(REPO)
    table = {row["id"]: row for row in ri.build_index(_items(), results)}
    for item in ("M-F2.5", "M-F2.6"):
        try:
            claim = neighbourhood_claim(results["tuning_ptb"], item)
        except Unjudged:
            assert table[item]["status"] == "not attempted"
        else:
            assert table[item]["verdict"].startswith(claim.text()) and table[item]["status"] == claim.verdict
