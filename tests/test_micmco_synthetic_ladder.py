"""The synthetic MICMCO budget ladder: a rung of one run is the run of that budget bit for bit, finished
runs are read back and changed settings train anew, and the summary's gaps, margins and readings are the closed
forms they claim to be on constructed frontiers."""

import dataclasses
import math
import statistics

import pytest

from paperlib.experiments.micmco.synthetic.micmco_synthetic import (CONFIGURATIONS, HV_TIE, NEAR_OPTIMAL_NATS,
                                                   MicmcoSyntheticParams, run_trial, start_design)
from paperlib.experiments.micmco.synthetic import ladder as ladder_module
from paperlib.experiments.micmco.synthetic.ladder import (MicmcoSyntheticLadderParams, main_stage_check, run_folder,
                                                          run_ladder, summarise)

MAIN = MicmcoSyntheticParams(configurations=["all"], trials=2, startup_trials=2, steps=12, batch_size=8,
                             vocab_size=30, eval_symbols=16, eval_samples=5, hidden_size=16, latent_dim=4,
                             num_categorical=2, categories=3, seed=0, workers=1)


def _ladder(**changes):
    values = dict(figures=["5.3", "5.6"], rungs=[4, 8], seeds=[1, 2], trials=2, workers=1)
    return MicmcoSyntheticLadderParams(**{**values, **changes})


def test_settings_are_checked():
    with pytest.raises(ValueError, match="figures must be some of"):
        _ladder(figures=["5.4"])
    with pytest.raises(ValueError, match="increasing step counts"):
        _ladder(rungs=[8, 8])
    with pytest.raises(ValueError, match="at least two increasing"):
        _ladder(rungs=[8])  # one rung has no trend to read
    with pytest.raises(ValueError, match="at least two distinct seeds"):
        _ladder(seeds=[3, 3])
    with pytest.raises(ValueError, match="trials must be >= 2"):
        _ladder(trials=1)
    assert _ladder().curves == ["dreg16_kl", "dreg1_kl", "vimco16_kl", "vimco16_renyi"]


def test_each_rung_is_the_run_of_that_budget_and_finished_runs_are_read_back(tmp_path, monkeypatch):
    """One run per (curve, seed, trial), scored at 3, 4, 6 and 8 steps on its way, equals separate runs of the main
    stage's run_trial with that many steps (same data stream, design point, trial seed and evaluation seed)."""
    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # run_trial too: a GPU machine's CUDA draws other numbers
    ladder = _ladder(figures=["5.3"], seeds=[1, 2])
    records = run_ladder(ladder, MAIN, tmp_path)
    assert [(r["configuration"], r["seed"], r["trial"]) for r in records] == [
        (c, s, i) for c in ("dreg16_kl", "dreg1_kl") for s in (1, 2) for i in (0, 1)]
    for record in records[::3]:
        config = CONFIGURATIONS[record["configuration"]]
        params = start_design(config, ladder.trials, record["seed"])[record["trial"]]
        assert record["params"] == params
        for steps in (3, 8):
            settings = dataclasses.replace(MAIN, seed=record["seed"], steps=steps)
            alone = run_trial(config, params, settings, record["seed"] + 1000 * record["trial"])
            score = next(s for s in record["scores"] if s["step"] == steps)
            assert (score["nll"], score["mi"]) == (alone["nll"], alone["mi"])

    trained = []
    real_train = ladder_module.train

    def counting(model, config, params, *args, **kwargs):
        trained.append(config.label)
        return real_train(model, config, params, *args, **kwargs)

    monkeypatch.setattr(ladder_module, "train", counting)
    assert run_ladder(ladder, MAIN, tmp_path) == records and not trained  # read back
    more = run_ladder(dataclasses.replace(ladder, seeds=[1, 2, 3]), MAIN, tmp_path)
    assert len(more) == 12 and len(trained) == 4  # a third seed adds its own runs only (2 curves x 2 trials)
    wider = dataclasses.replace(ladder, figures=["5.2", "5.3"], seeds=[4, 5], trials=9, workers=2)
    assert run_folder(wider, MAIN, tmp_path) == run_folder(ladder, MAIN, tmp_path)
    assert run_folder(dataclasses.replace(ladder, rungs=[4, 16]), MAIN, tmp_path) != run_folder(ladder, MAIN, tmp_path)
    trained.clear()
    run_ladder(ladder, dataclasses.replace(MAIN, batch_size=4), tmp_path)  # other data: every run trains anew
    assert len(trained) == 8


def _front(hv, nll_at_level=None):
    return {"normalised_hypervolume": hv, "nll_at_mi": [nll_at_level]}


def test_summary_gaps_margins_and_readings_on_constructed_frontiers():
    ladder = _ladder(figures=["5.3", "5.6"], rungs=[4, 8], seeds=[1, 2, 3])
    ln_v = 3.0
    hv16 = {4: [0.30, 0.32, 0.28], 8: [0.50, 0.54, 0.49]}  # at each rung and three quarters into it (3, 6)
    hv1 = {4: [0.29, 0.33, 0.27], 8: [0.30, 0.31, 0.29]}
    excess = {4: [2.0, None, 1.6], 8: [0.05, 0.10, 0.0]}  # seed 2's frontier misses the MI level at rung 4
    fronts = {"dreg16_kl": {}, "dreg1_kl": {}, "vimco16_kl": {}, "vimco16_renyi": {}}
    for i, seed in enumerate(("1", "2", "3")):
        for step, rung in ((3, 4), (4, 4), (6, 8), (8, 8)):
            late = step == rung
            fronts["dreg16_kl"].setdefault(seed, {})[str(step)] = _front(hv16[rung][i] - (0 if late else 0.1))
            fronts["dreg1_kl"].setdefault(seed, {})[str(step)] = _front(hv1[rung][i])
            e = excess[rung][i]
            fronts["vimco16_kl"].setdefault(seed, {})[str(step)] = _front(0.2, None if e is None else ln_v + e)
            fronts["vimco16_renyi"].setdefault(seed, {})[str(step)] = _front(0.2, None if e is None else ln_v + e + 1)
    out = summarise(fronts, ladder, ln_v)
    better = out["5.3"]["rungs"]
    diffs = [a - b for a, b in zip(hv16[8], hv1[8])]
    assert better[1]["gap"] == pytest.approx(statistics.fmean(diffs))
    assert better[1]["se"] == pytest.approx(statistics.stdev(diffs) / math.sqrt(3))
    assert better[1]["margin"] == pytest.approx(max(2 * better[1]["se"], HV_TIE))  # never inside the figure's tie
    assert better[1]["curves"]["dreg16_kl"]["converged"] is False  # rose by 0.1 on every seed
    assert better[1]["curves"]["dreg1_kl"]["converged"] is True and better[1]["converged"] is False
    assert out["5.3"]["reading"] == "reproduced"  # 0.21 against an SE near 0.01
    optimum = out["5.6"]["rungs"]
    # seed 2 misses the MI level at the first rung: that rung has no gap; the top rung alone, beyond its margin
    assert optimum[0]["reached"] == 2 and "gap" not in optimum[0] and out["5.6"]["reading"] == "reproduced"
    from paperlib.experiments.common.ladder import reading
    assert reading([*optimum[:1], {k: v for k, v in optimum[1].items() if k != "gap"}]) is None  # top not judged
    assert reading([optimum[0], {**optimum[1], "gap": 0.01}]) is None  # a lone top rung inside its margin
    assert optimum[1]["gap"] == pytest.approx(NEAR_OPTIMAL_NATS - statistics.fmean([0.05, 0.10, 0.0]))
    for step in ("3", "4"):  # now every seed reaches it: the better (KL) curve's excess counts
        fronts["vimco16_kl"]["2"][step] = _front(0.2, ln_v + 1.8)
    optimum = summarise(fronts, ladder, ln_v)["5.6"]
    assert optimum["rungs"][0]["per_seed"] == pytest.approx([NEAR_OPTIMAL_NATS - e for e in (2.0, 1.8, 1.6)])
    assert optimum["reading"] == "reproduced"
    # equal curves: no gap at any rung
    flat = summarise({**fronts, "dreg16_kl": fronts["dreg1_kl"]}, ladder, ln_v)
    assert flat["5.3"]["rungs"][0]["gap"] == 0 and flat["5.3"]["reading"] == "no trend"


def test_the_main_stage_check_compares_the_shared_trials():
    run = {"configuration": "dreg1_kl", "seed": 0, "trial": 1,
           "scores": [{"step": 12, "nll": 3.5, "mi": 4.0}]}  # MI above ln 30 = 3.40 is capped, as in the stage
    # the stage's records leave out an interrupted trial, whose number Optuna skips: matched by place, not number
    trials = [{"number": 0, "nll": 9.0, "mi": 0.0}, {"number": 2, "nll": 3.25, "mi": math.log(30)}]
    main = {"settings": {"steps": 12, "seed": 0, "startup_trials": 2}, "optimum_nll": math.log(30),
            "configurations": {"dreg1_kl": {"trials": trials}}}
    ladder = {"settings": {"rungs": [6, 12], "seeds": [0, 1]}, "runs": [run, {**run, "seed": 1}]}
    assert main_stage_check(ladder, main) == {"steps": 12, "seed": 0, "trials": 1, "max_difference": 0.25}
    diverged = {**run, "scores": [{"step": 12, "nll": None, "mi": None}]}  # non-finite scores, as the JSON holds them
    assert main_stage_check({**ladder, "runs": [diverged]}, main)["max_difference"] == math.inf
    assert main_stage_check({**ladder, "settings": {"rungs": [6, 24], "seeds": [0, 1]}}, main) is None


def test_the_ladder_is_one_part_of_its_figures_claim_in_the_index_and_the_notebook():
    from paperlib.compendium import results_index
    from paperlib.experiments.micmco.synthetic.claims import ladder_claim_part
    from paperlib.experiments.micmco.synthetic.ladder import LADDERS

    assert results_index.micmco_synthetic._MICMCO_LADDERS == tuple(LADDERS)
    rungs = [{"steps": 150, "gap": -0.02, "se": 0.01, "margin": 0.02, "converged": False},
             {"steps": 600, "gap": 0.01, "se": 0.01, "margin": 0.02, "converged": True}]
    ladder = {"near_optimal_nats": 0.25, "ladders": {
        "5.2": {"claim": "IWAE 16 better than IWAE 1", "kind": "better", "labels": ["IWAE 16 KL", "IWAE 1 KL"],
                "rungs": rungs, "reading": "trend toward the claim"},
        "5.6": {"claim": "VIMCO 16 reaches near-optimal NLL at high MI", "kind": "optimum", "labels": [],
                "rungs": [{**rungs[0], "reached": 3, "excess": [1, 1, 1]}, {"steps": 600, "reached": 1,
                                                                           "excess": [1, None, None]}],
                "reading": None}}}
    part = ladder_claim_part(ladder, "5.2")
    assert part.verdict == "partly reproduced"  # a trend toward the claim, not yet beyond the top rung's margin
    assert "HV(IWAE 16 KL) − HV(IWAE 1 KL) -0.020 ± 0.020 → +0.010 ± 0.020" in part.evidence
    assert "still improving flat" in part.evidence
    assert ladder_claim_part(ladder, "5.6") is None  # one seed reaches the MI level at the top: not judged
    assert ladder_claim_part(ladder, "5.3") is None
