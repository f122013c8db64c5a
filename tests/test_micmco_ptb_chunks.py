"""The PTB MICMCO study in chunks under a time limit: no batch starts that the time left would not finish, and
Table 5.1 stops before a cell it would not finish, its finished cells kept (paperlib.experiments.micmco.ptb)."""

import time

import pytest

from paperlib.experiments.common.runs import TimeLimitReached
from paperlib.experiments.micmco.ptb import stacked_trials, studies
from paperlib.experiments.micmco.ptb.analysis import table_5_1
from paperlib.experiments.micmco.ptb.data import prepare_sentences
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams
from paperlib.experiments.micmco.ptb.studies import run_curve_study, study_name
from tests.test_micmco_ptb import EOS, SMOKE, UNK, V, toy_sentences

SETTINGS = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 4, "stack_size": 2})


class Clock:
    """``time`` as the study and its stacks read it, its wall clock moved on by hand (``offset`` seconds), so that
    a test of the time limit does not depend on how fast this machine trains."""

    perf_counter = staticmethod(time.perf_counter)  # durations: real ones

    def __init__(self):
        self.offset = 0.0

    def time(self):
        return time.time() + self.offset


@pytest.fixture
def slow_batches(monkeypatch):
    """Every stack's training takes 20 s longer than it does, on the clock the study reads."""
    clock, real_run = Clock(), studies.StackedTrials.run

    def slow_run(self, until=None, deadline=None):
        done = real_run(self, until=until, deadline=deadline)
        clock.offset += 20.0
        return done

    monkeypatch.setattr(studies.StackedTrials, "run", slow_run)
    monkeypatch.setattr(studies, "time", clock)
    monkeypatch.setattr(stacked_trials, "time", clock)
    return clock


@pytest.fixture(scope="module")
def data():
    splits = {"train": toy_sentences(120, 1), "valid": toy_sentences(30, 2), "test": toy_sentences(30, 3)}
    return prepare_sentences(splits, V, EOS, UNK, SETTINGS)


def test_no_batch_starts_that_the_time_left_would_not_finish(tmp_path, slow_batches, data, monkeypatch):
    """Each batch here takes over 20 s (on the study's clock); with 30 s to go, the first batch trains and the
    second does not start (it would be cut off part-way, its checkpoint of use only on this machine). The first
    batch's own training must end within the 30 s of wall time, whatever else the machine is doing."""
    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # no CUDA start-up inside the 30 s on a GPU machine
    with pytest.raises(TimeLimitReached, match="with 2 of 4 trials of .* done; the same command continues"):
        run_curve_study("dreg16_kl.shared", SETTINGS, data, tmp_path, "smoke", deadline=slow_batches.time() + 30.0)
    assert not list(tmp_path.glob("*.stack.*"))  # the second batch never began


def test_table_5_1_stops_before_a_cell_it_would_not_finish_and_keeps_the_finished_ones(tmp_path, data):
    """A study whose best model is not at hand (its checkpoint stayed on another machine) and whose test scores
    were not kept (a separate study's), so a cell would retrain it: past the deadline the table stops before it;
    given time it fills the cell and caches the test scores, which a later call past its deadline reads back."""
    settings = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 2})
    records = run_curve_study("dreg16_kl.shared", settings, data, tmp_path, "smoke")
    curves = {"dreg16_kl.shared": {"trials": records}}
    (tmp_path / f"{study_name('dreg16_kl.shared', 'smoke', settings)}.best.pt").unlink()
    with pytest.raises(TimeLimitReached, match="before Table 5.1's DReG 16 K .* the same command continues"):
        table_5_1(curves, settings, data, tmp_path, "smoke", deadline=time.time() - 1)
    rows = table_5_1(curves, settings, data, tmp_path, "smoke", deadline=time.time() + 3600)
    again = table_5_1(curves, settings, data, tmp_path, "smoke", deadline=time.time() - 1)
    filled = [r for r in rows if r.get("curve")]
    assert [r["column"] for r in filled] == ["DReG 16 K"]
    assert [r.get("test_nll") for r in again] == [r.get("test_nll") for r in rows]


def test_a_stacked_table_5_1_curve_keeps_its_best_trials_test_scores_so_the_table_needs_no_retraining(
        tmp_path, data, monkeypatch):
    """At the end of each batch of a stacked Table 5.1 curve, the study's best trial (if it is of that batch) is
    scored on the test set while its model is at hand; the table reads those scores without its checkpoint and
    past its deadline, and they are the scores of the trial's own model (the saved best model, scored again)."""
    import torch

    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # the study and the rescoring below on one device

    from paperlib.experiments.micmco.ptb.design import CURVES
    from paperlib.experiments.micmco.ptb.studies import _checkpoint_path, test_scores
    from paperlib.experiments.micmco.ptb.trials import build_model

    records = run_curve_study("dreg16_kl.shared", SETTINGS, data, tmp_path, "smoke")
    study = study_name("dreg16_kl.shared", "smoke", SETTINGS)
    cached = sorted(tmp_path.glob(f"{study}.test-*.json"))
    best = min((r for r in records if r["nll"] is not None), key=lambda r: r["nll"])
    assert f".test-{best['number']}-" in cached[-1].name and len(cached) <= 2  # at most one per batch
    saved = torch.load(_checkpoint_path(tmp_path, study), weights_only=True)
    model = build_model(CURVES["dreg16_kl.shared"], best["params"], SETTINGS, data.vocab_size)
    model.load_state_dict(saved["state"])
    expected = test_scores(model, data, SETTINGS)
    _checkpoint_path(tmp_path, study).unlink()  # as on another machine
    rows = table_5_1({"dreg16_kl.shared": {"trials": records}}, SETTINGS, data, tmp_path, "smoke",
                     deadline=time.time() - 1)
    filled = [r for r in rows if r.get("curve")]
    assert [r["column"] for r in filled] == ["DReG 16 K"] and filled[0]["trial"] == best["number"]
    assert filled[0]["test_nll"] == expected["nll"] and filled[0]["test_kl"] == expected["kl"]
    # a separate (unstacked) study keeps no test scores: its table retrains or loads the checkpoint as before
    separate = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 2})
    run_curve_study("dreg16_kl.shared", separate, data, tmp_path / "separate", "smoke")
    assert not list((tmp_path / "separate").glob("*.test-*.json"))


def test_the_pace_carries_from_one_curve_to_the_next(tmp_path, slow_batches, data):
    """The studies of one process run one after another (costliest first): the next curve's first batch is judged
    by the last batch's time too, so it does not start with less time left than that."""
    one_batch = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 2, "stack_size": 2})
    pace = {"last": 0.0}
    run_curve_study("dreg16_kl.shared", one_batch, data, tmp_path, "smoke", deadline=slow_batches.time() + 60,
                    pace=pace)
    assert pace["last"] >= 20.0
    with pytest.raises(TimeLimitReached, match="with 0 of 2 trials of .* done"):
        run_curve_study("dreg16_renyi.shared", one_batch, data, tmp_path, "smoke", deadline=slow_batches.time() + 15,
                        pace=pace)
    assert not list(tmp_path.glob("dreg16_renyi*.stack.*"))
