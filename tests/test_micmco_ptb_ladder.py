"""The PTB MICMCO budget ladder: one run scored at each rung is the main stage's trial of that budget bit
for bit (checked through main_stage_check against run_experiment), finished runs are read back and other rungs
train anew, and the summary's gaps and margins are the closed forms they claim to be on constructed trials."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time

import pytest

from paperlib.experiments.micmco.ptb import ladder as ladder_module
from paperlib.experiments.micmco.ptb.micmco_ptb import (LOW_KL, PPL_TOLERANCE, MicmcoPtbParams, compare_hypervolumes,
                                            prepare_sentences, run_experiment)
from paperlib.experiments.micmco.ptb.ladder import (MicmcoPtbLadderParams, ladder_claim_part, main_stage_check,
                                                   run_folder, run_ladder, summarise, trials_at)
from paperlib.experiments.micmco.synthetic.micmco_synthetic import HV_TIE
from tests.test_micmco_ptb import EOS, SMOKE, UNK, V, toy_sentences

MAIN = MicmcoPtbParams(figures=["5.12"], **{**SMOKE, "steps": 8}, table_5_1=False)


def _ladder(**changes):
    values = dict(figures=["5.12"], rungs=[4, 8], seeds=[0, 1], trials=2, workers=1)
    return MicmcoPtbLadderParams(**{**values, **changes})


@pytest.fixture(scope="module")
def data():
    splits = {"train": toy_sentences(120, 1), "valid": toy_sentences(30, 2), "test": toy_sentences(30, 3)}
    return prepare_sentences(splits, V, EOS, UNK, MAIN)


def test_settings_are_checked():
    with pytest.raises(ValueError, match="figures must be some of"):
        _ladder(figures=["5.13"])
    with pytest.raises(ValueError, match="increasing step counts"):
        _ladder(rungs=[8, 4])
    with pytest.raises(ValueError, match="at least two distinct seeds"):
        _ladder(seeds=[0])
    with pytest.raises(ValueError, match="trials must be >= 2"):
        _ladder(trials=1)
    with pytest.raises(ValueError, match="stack_size must be"):
        _ladder(stack_size=0)
    assert _ladder(figures=["5.10", "5.12", "T5.1-latents"]).curves == [
        "dreg16_renyi.shared", "dreg16_renyi.naive", "dreg1.shared"]
    with pytest.raises(ValueError, match="not both"):
        run_ladder(_ladder(), MAIN, "unused")


def test_a_rung_repeats_the_main_stages_trial_and_finished_runs_are_read_back(tmp_path, data, monkeypatch):
    """Seed 0 at 8 steps: both curves' trials equal the main stage's (run_experiment at 8 steps, its Halton
    trials) to the last bit; a second call trains nothing; other rungs are other runs."""
    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # the main stage's trials too: CUDA draws other numbers
    ladder = _ladder()
    records = run_ladder(ladder, MAIN, tmp_path, data=data)
    assert [(r["curve"], r["seed"], r["trial"]) for r in records] == [
        (c, s, i) for c in ("dreg16_renyi.shared", "dreg1.shared") for s in (0, 1) for i in (0, 1)]
    assert [s["step"] for s in records[0]["scores"]] == [3, 4, 6, 8]
    main_results, _ = run_experiment(MAIN, tmp_path / "main", "smoke", data=data)
    trials = trials_at(records, ladder, MAIN, data.vocab_size)
    ours = {"settings": dataclasses.asdict(ladder), "trials": trials}
    check = main_stage_check(ours, main_results)
    assert check == {"steps": 8, "seed": 0, "trials": 4, "max_difference": 0.0}
    moved = {**main_results, "curves": {**main_results["curves"]}}
    moved["curves"]["dreg1.shared"] = {"trials": [{**t, "nll": t["nll"] + 0.5} for t in
                                                  main_results["curves"]["dreg1.shared"]["trials"]]}
    assert main_stage_check(ours, moved)["max_difference"] == pytest.approx(0.5)
    assert main_stage_check({**ours, "settings": {**ours["settings"], "rungs": [4, 16]}}, main_results) is None

    trained = []
    real_train = ladder_module.train

    def counting(*args, **kwargs):
        trained.append(args[1])
        return real_train(*args, **kwargs)

    monkeypatch.setattr(ladder_module, "train", counting)
    assert run_ladder(ladder, MAIN, tmp_path, data=data) == records and trained == []
    longer = _ladder(rungs=[4, 12], seeds=[0, 1], trials=2)
    assert run_folder(longer, MAIN, tmp_path) != run_folder(ladder, MAIN, tmp_path)
    assert run_folder(ladder, dataclasses.replace(MAIN, hidden_size=9), tmp_path) != run_folder(ladder, MAIN, tmp_path)
    assert run_folder(_ladder(trials=3, seeds=[0, 1, 2]), MAIN, tmp_path) == run_folder(ladder, MAIN, tmp_path)


def test_a_stacked_ladder_scores_the_runs_of_separate_training_and_resumes_from_its_checkpoint(tmp_path, data,
                                                                                                monkeypatch):
    """With ``stack_size`` 3 each curve's four runs (2 seeds x 2 trials) train as two stacks (3 runs and 1): every score equals the
    separate run's up to float32 rounding in differently shaped matmuls (the stacked-trials tests bound the
    weights to 1e-10 in float64; scores of order 1 agree to ~1e-6 here, 1e-4 leaves room). An interruption after
    the first scoring step resumes from the curve's checkpoint and ends with the same records; records are read
    back afterwards and the checkpoint is gone."""
    separate = run_ladder(_ladder(), MAIN, tmp_path / "separate", data=data)
    stacked_ladder = _ladder(stack_size=3)
    assert run_folder(stacked_ladder, MAIN, tmp_path) != run_folder(_ladder(), MAIN, tmp_path)

    class Interrupted(Exception):
        pass

    real_save, saves = ladder_module.StackedTrials.save, []

    def interrupting_save(self, path, extra=None):
        real_save(self, path, extra)
        saves.append(self.step_count)
        if len(saves) == 1:
            raise Interrupted

    monkeypatch.setattr(ladder_module.StackedTrials, "save", interrupting_save)
    with pytest.raises(Interrupted):
        run_ladder(stacked_ladder, MAIN, tmp_path / "stacked", data=data)
    folder = run_folder(stacked_ladder, MAIN, tmp_path / "stacked")
    assert (folder / "dreg16_renyi.shared.stack0.pt").is_file() and saves == [3]
    stacked = run_ladder(stacked_ladder, MAIN, tmp_path / "stacked", data=data)
    assert saves == [3, 4, 6, 8] * 4 and not list(folder.glob("*.pt"))
    assert [(r["curve"], r["seed"], r["trial"]) for r in stacked] == [(r["curve"], r["seed"], r["trial"])
                                                                      for r in separate]
    for ours, theirs in zip(stacked, separate):
        assert ours["stacked_with"] == (3 if ours["seed"] == 0 or ours["trial"] == 0 else 1)
        assert ours["diverged_at"] == theirs["diverged_at"]
        assert [s["step"] for s in ours["scores"]] == [s["step"] for s in theirs["scores"]] == [3, 4, 6, 8]
        for a, b in zip(ours["scores"], theirs["scores"]):
            assert a["nll"] == pytest.approx(b["nll"], rel=1e-4) and a["kl"] == pytest.approx(b["kl"], abs=1e-4)
    assert run_ladder(stacked_ladder, MAIN, tmp_path / "stacked", data=data) == stacked and saves[-1] == 8


def test_a_time_limit_stops_a_stacked_ladder_with_its_stack_checkpointed_and_a_later_call_continues(tmp_path, data,
                                                                                                      monkeypatch):
    """Past a deadline no stack starts; one that passes mid-stack leaves it checkpointed; a later call with other
    stacks (stack_size 3: the checkpoint now holds another stack) replaces it and finishes; seconds are shares."""
    from paperlib.experiments.common.runs import TIME_LIMIT_ENV, TimeLimitReached, stop_time

    ladder = _ladder(stack_size=4)
    with pytest.raises(TimeLimitReached, match="0 of 8 runs done; the same"):  # past it, no stack starts
        run_ladder(ladder, MAIN, tmp_path, data=data, deadline=time.time() - 1)
    folder = run_folder(ladder, MAIN, tmp_path)
    assert not list(folder.glob("*.pt"))
    real_run = ladder_module.StackedTrials.run

    def deadline_after_two_steps(self, until=None, deadline=None):  # as if the deadline passed at step 2
        return real_run(self, until=min(until, self.step_count + 2), deadline=deadline)

    monkeypatch.setattr(ladder_module.StackedTrials, "run", deadline_after_two_steps)
    with pytest.raises(TimeLimitReached, match="stack 0 is checkpointed"):
        run_ladder(ladder, MAIN, tmp_path, data=data, deadline=time.time() + 3600)
    monkeypatch.setattr(ladder_module.StackedTrials, "run", real_run)
    assert [p.name for p in folder.glob("*.pt")] == ["dreg16_renyi.shared.stack0.pt"]
    records = run_ladder(_ladder(stack_size=3), MAIN, tmp_path, data=data)  # stack 0 is now another: replaced
    assert len(records) == 8 and not list(folder.glob("*.pt"))
    assert [c["from_step"] for c in records[0]["chunks"]] == [0, 3, 4, 6]  # a fresh stack: the old one replaced
    stack_seconds = sum(c["seconds"] for c in records[0]["chunks"])
    assert records[0]["seconds"] == pytest.approx(stack_seconds / records[0]["stacked_with"], abs=0.05)
    with pytest.raises(ValueError, match="needs stacks"):
        run_ladder(_ladder(), MAIN, tmp_path, data=data, deadline=time.time() + 60)
    monkeypatch.setenv(TIME_LIMIT_ENV, "90")
    assert stop_time() == pytest.approx(time.time() + 90, abs=5)
    for bad in ("0", "-3", "soon", "inf"):
        monkeypatch.setenv(TIME_LIMIT_ENV, bad)
        with pytest.raises(ValueError, match="positive number of seconds"):
            stop_time()
    monkeypatch.delenv(TIME_LIMIT_ENV)
    assert stop_time() is None


def _trial(number, nll, kl):
    return {"number": number, "nll": nll, "kl": kl}


def test_the_summary_is_the_closed_form_of_its_gaps():
    ladder = _ladder(figures=["5.12", "T5.1-perplexity", "T5.1-latents"], seeds=[0, 1, 2])
    a, b = "dreg16_renyi.shared", "dreg1.shared"
    trials = {a: {}, b: {}}
    for k, s in enumerate("012"):
        shift = 0.01 * k  # the seeds differ a little
        trials[a][s] = {"3": [_trial(0, 4.2, 0.1), _trial(1, 4.5, 0.4)], "4": [_trial(0, 4.0, 0.1 + shift),
                                                                             _trial(1, 4.3, 0.5)],
                        "6": [_trial(0, 3.9, 0.1), _trial(1, 4.2, 0.5)], "8": [_trial(0, 3.9 - shift, 0.12),
                                                                              _trial(1, 4.1, 0.6)]}
        trials[b][s] = {"3": [_trial(0, 4.1, 0.0), _trial(1, 4.6, 0.01)], "4": [_trial(0, 4.0, 0.0),
                                                                              _trial(1, 4.4, 0.02)],
                        "6": [_trial(0, 3.95, 0.0), _trial(1, 4.4, 0.02)], "8": [_trial(0, 3.95, 0.01),
                                                                               _trial(1, math.nan, math.nan)]}
    out = summarise(trials, ladder, MAIN)
    top = out["5.12"]["rungs"][1]
    per_seed = []
    for s in "012":
        hv = compare_hypervolumes({n: {"trials": trials[n][s]["8"]} for n in (a, b)}, (a, b), MAIN.hv_margin,
                                  MAIN.kl_cap)["hypervolume"]
        per_seed.append(hv[a] - hv[b])
    assert top["per_seed"] == pytest.approx(per_seed) and top["gap"] == pytest.approx(statistics.fmean(per_seed))
    assert top["margin"] == pytest.approx(2 * statistics.stdev(per_seed) / math.sqrt(3))  # the measured spread only
    assert top["curves"][a]["best_nll"] == pytest.approx(3.9 - 0.01)
    # a's best NLL fell 0.0 / 0.01 / 0.02 over the last quarter (3.9 -> 3.9 - shift): mean 0.01 = 2 SE exactly
    assert top["curves"][a]["converged"] is True and top["curves"][b]["converged"] is True
    first = out["5.12"]["rungs"][0]["curves"][a]
    assert first["fall"] == pytest.approx(0.2) and first["converged"] is False
    assert out["5.12"]["rungs"][0]["converged"] is False
    change = [math.exp((3.9 - 0.01 * k) - 3.95) - 1 for k in range(3)]  # signed, per seed: 16 ahead on each
    perplexity = out["T5.1-perplexity"]["rungs"][1]
    assert perplexity["per_seed"] == pytest.approx(change)
    assert perplexity["gap"] == pytest.approx(PPL_TOLERANCE - abs(statistics.fmean(change)))
    assert perplexity["margin"] == pytest.approx(2 * statistics.stdev(change) / math.sqrt(3))
    kl = [LOW_KL - max(0.12, 0.01)] * 3
    assert out["T5.1-latents"]["rungs"][1]["per_seed"] == pytest.approx(kl)
    assert out["T5.1-latents"]["rungs"][1]["margin"] == 0.0 and out["T5.1-latents"]["reading"] == "reproduced"
    # every trial of one seed diverged at the top rung: that curve has no area (the stage's rule), so the
    # hypervolume gap stands; Table 5.1 has no best model there to judge, hence no gap and no reading
    trials[b]["2"]["8"] = [_trial(0, math.nan, math.nan), _trial(1, math.nan, math.nan)]
    out = summarise(trials, ladder, MAIN)
    alone = compare_hypervolumes({a: {"trials": trials[a]["2"]["8"]}}, (a,), MAIN.hv_margin, MAIN.kl_cap)
    assert out["5.12"]["rungs"][1]["per_seed"][2] == pytest.approx(alone["hypervolume"][a])
    assert "gap" not in out["T5.1-perplexity"]["rungs"][1] and out["T5.1-perplexity"]["reading"] is None
    assert out["5.12"]["rungs"][1]["curves"][b] == {"best_nll": None, "converged": None}
    assert out["5.12"]["rungs"][1]["converged"] is None  # unknown, not "still improving"


def test_the_dropout_ladder_is_the_seed_mean_of_the_best_nll_gap():
    """Fig. 5.11's second claim: per seed, the best L2 trial's NLL minus the best shared-mask trial's (diverged
    trials left out), positive when dropout is ahead; a seed where dropout is behind pulls the mean down."""
    ladder = _ladder(figures=["5.11-dropout"], seeds=[0, 1, 2])
    a, b = "dreg16_renyi.shared", "dreg16_renyi.l2"
    best_shared, best_l2 = (4.0, 3.9, 4.2), (4.1, 4.05, 4.15)
    trials = {a: {}, b: {}}
    for k, s in enumerate("012"):
        trials[a][s] = {str(t): [_trial(0, best_shared[k] + 0.1, 0.1), _trial(1, best_shared[k], 0.2)]
                        for t in (3, 4, 6, 8)}
        trials[b][s] = {str(t): [_trial(0, best_l2[k], 0.05), _trial(1, math.nan, math.nan)] for t in (3, 4, 6, 8)}
    out = summarise(trials, ladder, MAIN)["5.11-dropout"]
    gaps = [l2 - shared for shared, l2 in zip(best_shared, best_l2)]  # +0.1, +0.15, -0.05
    top = out["rungs"][1]
    assert top["per_seed"] == pytest.approx(gaps) and top["gap"] == pytest.approx(statistics.fmean(gaps))
    assert top["margin"] == pytest.approx(2 * statistics.stdev(gaps) / math.sqrt(3))
    assert out["labels"] == ["DReG 16 Rényi (shared masks)", "DReG 16 Rényi (L2, no dropout)"]
    assert out["reading"] == "no trend"  # +0.067 ± 0.12 at both rungs
    part = ladder_claim_part({"ladders": {"5.11-dropout": out}}, "5.11-dropout")
    assert part.verdict == "within noise"  # no trend, its top rung the thesis' way inside its margin
    assert ("best validation NLL, DReG 16 Rényi (L2, no dropout) − DReG 16 Rényi (shared masks): "
            f"+{statistics.fmean(gaps):.3f} ± ") in part.evidence


def test_a_score_past_the_divergence_line_counts_as_diverged():
    record = {"curve": "dreg1.shared", "seed": 0, "trial": 0, "scores": [
        {"step": 4, "nll": 11 * math.log(V), "kl": 0.3}, {"step": 8, "nll": 3.0, "kl": 5.0}]}
    ladder = _ladder(figures=["T5.1-latents"])
    got = trials_at([record, {**record, "curve": "dreg16_renyi.shared"}], ladder, MAIN, V)["dreg1.shared"]["0"]
    assert math.isnan(got["4"][0]["nll"]) and math.isnan(got["4"][0]["kl"])
    assert got["8"][0] == {"number": 0, "nll": 3.0, "kl": MAIN.kl_cap}  # KL capped as the stage caps it
    assert math.isnan(got["3"][0]["nll"])  # never scored there
    nan_kl = {**record, "scores": [{"step": 8, "nll": 3.0, "kl": None}]}  # the JSON's NaN: Optuna fails the trial
    got = trials_at([nan_kl, {**nan_kl, "curve": "dreg16_renyi.shared"}], ladder, MAIN, V)["dreg1.shared"]["0"]
    assert math.isnan(got["8"][0]["nll"]) and math.isnan(got["8"][0]["kl"])
    with pytest.raises(ValueError, match="must train for the profile's steps"):
        ladder_module.Ladder("longer", "better", ("dreg1.train.T16", "dreg1.train"))


def test_the_ladder_is_one_part_of_its_rows_claim_in_the_index():
    from paperlib.compendium import results_index
    from paperlib.experiments.micmco.ptb.ladder import ITEMS, LADDERS, ladder_claim_part

    # every ladder is a part of a row; the shared-against-naive-masks ladder judges Fig. 5.12's claim, not Fig. 5.10's
    assert results_index.micmco_ptb._MICMCO_PTB_LADDER_ITEMS == tuple(i for i in ITEMS if i != "M-F5.10")
    assert sorted({k for keys in ITEMS.values() for k in keys}) == sorted(LADDERS)
    rungs = [{"steps": 150, "gap": -0.02, "se": 0.01, "margin": 0.02, "converged": False},
             {"steps": 300, "gap": 0.01, "se": 0.01, "margin": 0.02, "converged": True}]
    ladder = {"hv_tie": HV_TIE, "ppl_tolerance": PPL_TOLERANCE, "low_kl": LOW_KL, "ladders": {
        "5.8": {"claim": "DReG 16 improves on DReG 1", "kind": "better", "labels": ["DReG 16 R", "DReG 1"],
                "rungs": rungs, "reading": "trend toward the claim"},
        "T5.1-perplexity": {"claim": "best perplexity barely changes", "kind": "perplexity", "labels": [],
                            "rungs": [{**rungs[0], "gap": 0.02, "margin": 0.004}, {"steps": 300, "converged": False}],
                            "reading": None},
        "T5.1-latents": {"claim": "optima at low KL", "kind": "latents", "labels": [],
                         "rungs": [{**rungs[0], "gap": 0.15}, {**rungs[1], "gap": 0.1, "margin": 0.01}],
                         "reading": "reproduced"}}}
    part = ladder_claim_part(ladder, "5.8")
    assert part.verdict == "partly reproduced"  # a trend toward the claim, not yet beyond the top rung's margin
    assert "HV(DReG 16 R) − HV(DReG 1) -0.020 ± 0.020 → +0.010 ± 0.020 at 150 / 300 steps" in part.evidence
    assert "still improving flat" in part.evidence
    assert ladder_claim_part(ladder, "T5.1-perplexity") is None  # no gap at the top rung: not read
    latents = ladder_claim_part(ladder, "T5.1-latents")
    assert latents.verdict == "reproduced"
    assert f"{LOW_KL - 0.15:.3f} ± 0.020 → {LOW_KL - 0.1:.3f} ± 0.010" in latents.evidence
    assert ladder_claim_part(ladder, "5.9") is None
    unread = {**ladder["ladders"]["5.8"], "rungs": [rungs[0], {"steps": 300, "converged": None}]}
    part = ladder_claim_part({**ladder, "ladders": {"5.8": {**unread, "reading": "no trend"}}}, "5.8")
    assert "-0.020 ± 0.020 → no gap at 150 / 300 steps" in part.evidence
    assert "still improving unknown" in part.evidence
    # a row whose ladder went unjudged names it as not run (its claim is "partly" at best)
    from paperlib.experiments.micmco.ptb.claims import LADDER_ITEMS, ladder_parts

    assert LADDER_ITEMS == {item: keys for item, keys in ITEMS.items() if item != "M-F5.10"}
    parts, unjudged = ladder_parts({"profile": "cpu"}, {**ladder, "profile": "cpu"}, "M-T5.1")
    assert [p.verdict for p in parts] == ["reproduced"] and unjudged == [
        "the budget ladder T5.1-perplexity (no gap at the top rung, or a lone judged rung inside its margin)"]
    assert set(results_index.micmco_ptb._PTB_LADDER_SUBJECTS) == set(LADDERS)
