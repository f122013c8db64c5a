"""The 2TA comparison's bookkeeping: tuned baselines, claims computed from curves, the CLI runner."""

import pytest

from paperlib.experiments.averaging_ptb import summarise, tuned


def curve(losses, **extra):
    return {"step": [10 * (i + 1) for i in range(len(losses))], "valid_nll": list(losses), **extra}


def make(two, ta, ema, raw, overfit_raw, actions, periods=None):
    curves = {"2ta": curve(two), "raw": curve(raw), "ta_0.5": curve(ta), "ta_0.25": curve([x + 1 for x in ta]),
              "ema_0.99": curve(ema), "2ta_E0.25": curve(periods or two)}
    overfit = {"curves": {"raw": curve(overfit_raw), "2ta": curve(overfit_raw, action=actions)}}
    return {"curves": curves, "period": 10}, overfit


def test_tuned_baseline_is_the_grid_member_with_the_lowest_final_loss():
    main, _ = make([3, 2], [3, 2.5], [3, 2.2], [3, 3], [1, 2], ["keep", "keep"])
    assert tuned(main["curves"], "ta_") == "ta_0.5"
    assert tuned(main["curves"], "ema_") == "ema_0.99"


def test_claims_follow_from_the_curves():
    main, overfit = make(two=[4.0, 3.0, 2.000], ta=[5.0, 4.0, 2.002], ema=[4.5, 3.5, 1.997], raw=[4.1, 3.2, 2.5],
                         overfit_raw=[3.0, 2.0, 2.5], actions=["keep", "switch", "reset_long"])
    s = summarise(main, overfit, early_fraction=0.34, tolerance=0.005)
    claims = s["claims"]
    assert claims["2TA on par with or better than tuned TA (best loss)"]
    assert claims["2TA on par with or better than tuned EMA (best loss)"]
    assert s["gaps"]["2ta - tuned ta"] == pytest.approx(-0.002)
    assert claims["2TA early losses better than tuned TA and EMA"]
    assert claims["2TA beats the raw weights"]
    assert claims["raw loss rises in the overfitting run"] and claims["reset heuristic fires in the overfitting run"]
    assert s["overfit_resets"] == [30]
    assert s["methods"]["ta (tuned)"]["best"] == pytest.approx(2.002)


def test_unknown_experiment_for_run_is_a_clear_error(capsys):
    from paperlib.compendium.cli import main

    assert main(["run", "averaging_ptbb", "--profile", "smoke"]) == 2
    assert "runnable experiments: averaging_ptb" in capsys.readouterr().err


def test_2ta_worse_than_a_tuned_baseline_beyond_tolerance_is_not_on_par():
    main, overfit = make(two=[3.0, 2.1], ta=[3.0, 2.0], ema=[3.0, 2.1], raw=[3.0, 2.2], overfit_raw=[2, 1],
                         actions=["keep", "keep"])
    claims = summarise(main, overfit, tolerance=0.005)["claims"]
    assert not claims["2TA on par with or better than tuned TA (best loss)"]
    assert claims["2TA on par with or better than tuned EMA (best loss)"]
    assert not claims["reset heuristic fires in the overfitting run"]
