"""The PTB MICMCO study in chunks under a time limit: no batch starts that the time left would not finish, and
Table 5.1 stops before a cell it would not finish, its finished cells kept (paperlib.experiments.micmco.ptb)."""

import time

import pytest

from paperlib.experiments.common.runs import TimeLimitReached
from paperlib.experiments.micmco.ptb import studies
from paperlib.experiments.micmco.ptb.analysis import table_5_1
from paperlib.experiments.micmco.ptb.data import prepare_sentences
from paperlib.experiments.micmco.ptb.design import MicmcoPtbParams
from paperlib.experiments.micmco.ptb.studies import run_curve_study, study_name
from tests.test_micmco_ptb import EOS, SMOKE, UNK, V, toy_sentences

SETTINGS = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "trials": 4, "stack_size": 2})


@pytest.fixture(scope="module")
def data():
    splits = {"train": toy_sentences(120, 1), "valid": toy_sentences(30, 2), "test": toy_sentences(30, 3)}
    return prepare_sentences(splits, V, EOS, UNK, SETTINGS)


def test_no_batch_starts_that_the_time_left_would_not_finish(tmp_path, monkeypatch, data):
    """Each batch here takes over 2 s (its training made slow); with 3 s to go, the first batch trains and the
    second does not start (it would be cut off part-way, its checkpoint of use only on this machine)."""
    real_run = studies.StackedTrials.run

    def slow_run(self, until=None, deadline=None):
        done = real_run(self, until=until, deadline=deadline)
        time.sleep(2.0)
        return done

    monkeypatch.setattr(studies.StackedTrials, "run", slow_run)
    with pytest.raises(TimeLimitReached, match="with 2 of 4 trials of .* done; the same command continues"):
        run_curve_study("dreg16_kl.shared", SETTINGS, data, tmp_path, "smoke", deadline=time.time() + 3.0)
    assert not list(tmp_path.glob("*.stack.*"))  # the second batch never began


def test_table_5_1_stops_before_a_cell_it_would_not_finish_and_keeps_the_finished_ones(tmp_path, data):
    """The study's best model is not at hand (as on another machine: checkpoints do not travel), so a cell would
    retrain it: past the deadline the table stops before it; given time it fills the cell and caches the test
    scores, which a later call past its deadline reads back instead of stopping."""
    records = run_curve_study("dreg16_kl.shared", SETTINGS, data, tmp_path, "smoke")
    curves = {"dreg16_kl.shared": {"trials": records}}
    (tmp_path / f"{study_name('dreg16_kl.shared', 'smoke', SETTINGS)}.best.pt").unlink()
    with pytest.raises(TimeLimitReached, match="before Table 5.1's DReG 16 K .* the same command continues"):
        table_5_1(curves, SETTINGS, data, tmp_path, "smoke", deadline=time.time() - 1)
    rows = table_5_1(curves, SETTINGS, data, tmp_path, "smoke", deadline=time.time() + 3600)
    again = table_5_1(curves, SETTINGS, data, tmp_path, "smoke", deadline=time.time() - 1)
    filled = [r for r in rows if r.get("curve")]
    assert [r["column"] for r in filled] == ["DReG 16 K"]
    assert [r.get("test_nll") for r in again] == [r.get("test_nll") for r in rows]
