"""The seed spread a MICMCO budget ladder measured for a gap at the main stage's budget: twice the standard deviation
of one seed's gap (closed form on constructed gaps), never below the tie, standing in for the tie only where the
ladder's rung repeated the stage's run, and saying how it did not."""

import pytest

from paperlib.experiments.micmco.seed_spread import differences, ladder_spreads, perplexity_spread, tie_floored

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


def _shared(stage_nlls, ladder_nlls, trials=6, startup=4, ladder_trials=4):
    """A stage whose curve "x" ran ``stage_nlls`` (trial by trial) and a ladder whose seed 0 ran ``ladder_nlls`` at
    the stage's budget, as the synthetic results record them (the PTB ones name the curve ``curve``)."""
    run = {"profile": "cpu", "settings": {"steps": 150, "trials": trials, "startup_trials": startup, "seed": 0,
                                          "batch_size": 16},
           "configurations": {"x": {"trials": [{"number": i, "nll": v} for i, v in enumerate(stage_nlls)]}}}
    ladder = {**_ladder([0.0, 0.02, 0.04]), "settings": {"trials": ladder_trials},
              "runs": [{"configuration": "x", "seed": 0, "trial": i, "scores": [{"step": 150, "nll": v}]}
                       for i, v in enumerate(ladder_nlls)]
              + [{"configuration": "x", "seed": 1, "trial": 0, "scores": [{"step": 150, "nll": 9.0}]}]}
    return run, ladder


def test_a_start_design_shared_trial_for_trial_lets_the_spread_stand_in():
    """The stage's first trials are the ladder's seed 0 with the same results (the stage adding GP draws): one
    seed's gap is the same draw but for those trials, so the spread is the margin, and says how the runs differ; a
    shared trial with another result (or none recorded) keeps the spread beside the tie."""
    from paperlib.experiments.micmco.seed_spread import design_shared, shared_start

    run, ladder = _shared([5.0, 4.0, 4.5, float("inf"), 3.0, 3.5], [5.0, 4.0, 4.5, float("inf")])
    assert shared_start(run, ladder) == 4 and differences(run, ladder) == []
    spread = ladder_spreads(run, ladder, TIE)[("x", "y")]
    assert spread.applies and "the margin here (the stage's first 4 trials of each curve are the ladder's seed 0" \
        in spread.shown(TIE) and "its last 2 of 6 come from the GP sampler, which the ladder does not run" \
        in spread.shown(TIE)
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5, 4.1, 4.4, 4.6], trials=6, ladder_trials=6)
    assert "the ladder's last 2 from the Halton design" in design_shared(run, ladder)
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1000001, 3.0, 3.5], [5.0, 4.0, 4.5, 4.1])
    assert shared_start(run, ladder) is None and not ladder_spreads(run, ladder, TIE)[("x", "y")].applies
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5])  # the ladder's trial 3 not recorded
    assert shared_start(run, ladder) is None


def test_sharing_needs_every_curve_alike_and_something_finite_and_the_ladder_as_many_trials():
    """Trials that are all missing or diverged on both sides share nothing; a curve the stage did not run, other
    hyperparameters behind equal NLLs, or a ladder tuning fewer trials than the stage's start design keep the spread
    beside the tie. The PTB ladder names its runs' curve ``curve``."""
    from paperlib.experiments.micmco.seed_spread import shared_start

    run, ladder = _shared([None, float("inf"), None, None, 3.0, 3.5], [None, float("inf"), None, None])
    assert shared_start(run, ladder) is None  # nothing finite to be alike
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5, 4.1])
    ladder["runs"].append({"configuration": "z", "seed": 0, "trial": 0, "scores": [{"step": 150, "nll": 5.0}]})
    assert shared_start(run, ladder) is None  # the rung trained a curve the stage did not
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5, 4.1])
    run["configurations"]["x"]["trials"][1]["params"] = {"lr": 0.1}
    ladder["runs"][1]["params"] = {"lr": 0.2}
    assert shared_start(run, ladder) is None  # the same NLL from other hyperparameters
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5], startup=4, ladder_trials=3)
    assert shared_start(run, ladder) is None and not ladder_spreads(run, ladder, TIE)[("x", "y")].applies
    run, ladder = _shared([5.0, 4.0, 4.5, 4.1, 3.0, 3.5], [5.0, 4.0, 4.5, 4.1])
    ptb = {**ladder, "runs": [{("curve" if k == "configuration" else k): v for k, v in r.items()}
                              for r in ladder["runs"]]}
    ptb_run = {**run, "curves": run["configurations"]}
    del ptb_run["configurations"]
    assert shared_start(ptb_run, ptb) == 4


def _rungs(*gap_margin):
    return [{"steps": 150 * 2 ** i, "gap": g, "margin": m} for i, (g, m) in enumerate(gap_margin)]


def test_a_ladders_margins_are_raised_to_the_tie_and_its_reading_follows():
    """+0.014 ± 0.010 at the top rung clears 2 SE but not the 0.02 tie: no longer reproduced; a top gap beyond the
    tie stays so; the change from the first rung is read against the raised margins (√(0.01² + 0.01²)·2 ≈ 0.028)."""
    entry = {"kind": "better", "rungs": _rungs((0.009, 0.003), (0.014, 0.010)), "reading": "reproduced"}
    floored = tie_floored(entry, TIE)
    assert [r["margin"] for r in floored["rungs"]] == [TIE, TIE] and floored["reading"] == "no trend"
    assert entry["rungs"][1]["margin"] == 0.010  # the stage's record is left as it was
    assert tie_floored({**entry, "rungs": _rungs((0.0, 0.01), (0.026, 0.004))}, TIE)["reading"] == "reproduced"
    assert tie_floored({**entry, "rungs": _rungs((-0.02, 0.01), (0.015, 0.01))}, TIE)["reading"] == \
        "trend toward the claim"  # a change of 0.035 beyond 0.028
    wide = tie_floored({**entry, "rungs": _rungs((0.0, 0.03), (0.05, 0.04))}, TIE)
    assert [r["margin"] for r in wide["rungs"]] == [0.03, 0.04] and wide["reading"] == "reproduced"


def test_the_perplexity_spread_of_the_ladder_at_the_cells_budget_stands_beside_a_one_seed_cell():
    results = {"profile": "cpu", "settings": {"steps": 150}, "curves": {"c": {"steps_factor": 2}},
               "table_5_1": [{"curve": "c"}, {"curve": None}]}
    ladder = {"profile": "cpu", "ladders": {"T5.1-perplexity": {"labels": ["A", "B"], "rungs": [
        {"steps": 150, "per_seed": [0.5, -0.5]}, {"steps": 300, "per_seed": [-0.063, -0.026, 0.068]}]}}}
    text = perplexity_spread(results, ladder)  # the cells train 2 × 150 = 300 steps: that rung, not the first
    assert text.startswith("one seed per cell: on the budget ladder A against B changes the best validation "
                           "perplexity by -6.3% / -2.6% / +6.8% over its 3 seeds at 300 steps, the cells' budget (sd 6.8%)")
    assert perplexity_spread(results, {**ladder, "profile": "paper"}) == ""  # another profile's ladder
    assert perplexity_spread({**results, "curves": {"c": {}}}, {**ladder, "ladders": {"T5.1-perplexity": {
        "rungs": [{"steps": 150, "per_seed": [0.1]}]}}}) == ""  # one seed: no spread
