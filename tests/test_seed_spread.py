"""The seed spread a MICMCO budget ladder measured for a gap at the main stage's budget: twice the standard deviation
of one seed's gap (closed form on constructed gaps), never below the tie, standing in for the tie only where the
ladder's rung repeated the stage's run, and saying how it did not."""

import pytest

from paperlib.experiments.micmco.seed_spread import differences, ladder_spreads

TIE = 0.02
RUN = {"profile": "cpu", "settings": {"steps": 150, "trials": 4, "startup_trials": 4, "batch_size": 16}}


def _ladder(per_seed, steps=150, **extra):
    return {"profile": "cpu", "settings": {"trials": 4}, "training": {"batch_size": 16}, **extra,
            "ladders": {"a": {"kind": "better", "curves": ["x", "y"], "rungs": [{"steps": steps, "per_seed": per_seed}]},
                        "b": {"kind": "lower", "curves": ["x", "z"], "rungs": [{"steps": steps, "per_seed": [1, 2]}]}}}


def test_twice_the_sd_of_one_seeds_gap_never_below_the_tie():
    spread = ladder_spreads(RUN, _ladder([0.0, 0.02, 0.04]), TIE)[("x", "y")]
    assert spread.two_sd == pytest.approx(0.04) and spread.margin == pytest.approx(0.04)  # sd of 0, .02, .04 is .02
    assert spread.seeds == 3 and spread.steps == 150 and spread.applies
    assert "the margin here" in spread.shown(TIE) and "raised" not in spread.shown(TIE)
    narrow = ladder_spreads(RUN, _ladder([0.029, 0.030, 0.031]), TIE)[("x", "y")]
    assert narrow.two_sd == pytest.approx(0.002) and narrow.margin == TIE
    assert "0.0020, the margin here (raised to the 0.02 tie)" in narrow.shown(TIE)
    assert set(ladder_spreads(RUN, _ladder([0.0, 0.02, 0.04]), TIE)) == {("x", "y")}  # "better" ladders only


def test_seeds_without_a_finite_gap_are_left_out_and_one_seed_measures_no_spread():
    spread = ladder_spreads(RUN, _ladder([0.0, None, float("nan"), 0.02]), TIE)[("x", "y")]
    assert spread.seeds == 2 and spread.two_sd == pytest.approx(2 * 0.02 / 2 ** 0.5)
    assert ladder_spreads(RUN, _ladder([0.01, None]), TIE) == {}
    assert ladder_spreads(RUN, _ladder([0.0, 0.02], steps=300), TIE) == {}  # no rung at the stage's budget
    assert ladder_spreads(RUN, {**_ladder([0.0, 0.02]), "profile": "smoke"}, TIE) == {}
    assert ladder_spreads(RUN, None, TIE) == {}


def test_how_the_rung_differs_from_the_stages_run():
    assert differences(RUN, _ladder([])) == []
    sampled = {**RUN, "settings": {**RUN["settings"], "trials": 6}}
    assert differences(sampled, _ladder([])) == [
        "the ladder tunes 4 trials per curve, the stage 6",
        "the ladder's trials all come from the Halton start design, the stage's last 2 of 6 from the GP sampler"]
    unrecorded = {**RUN, "settings": {"steps": 150, "trials": 4, "batch_size": 16}}
    assert differences(unrecorded, _ladder([])) == ["the stage's trial design is not recorded"]
    bare = {k: v for k, v in _ladder([]).items() if k != "settings"}
    assert differences(RUN, bare) == ["the ladder tunes an unrecorded number of trials per curve, the stage 4"]
    assert differences(RUN, _ladder([], training={"batch_size": 32})) == ["its batch_size is 32, the stage's 16"]
    spread = ladder_spreads(sampled, _ladder([0.0, 0.02, 0.04]), TIE)[("x", "y")]
    assert not spread.applies and "shown beside the 0.02 tie, not in its place: the ladder tunes 4" in spread.shown(TIE)
