"""Evaluation in the dry run (paperlib.experiments.dryrun.evaluation, .evaluation_plans): the passes a stage's settings
imply are the ones its code makes (windows, search trials, validations), and a pass's kernels and FLOPs extrapolate
exactly from its two probes."""

import dataclasses
import math

import pytest
import torch

from paperlib.data.batching import batchify, num_windows
from paperlib.dyneval import tune_dynamic_evaluation
from paperlib.experiments.common.config import experiment_params
from paperlib.experiments.dryrun.evaluation import (Evaluation, count_pass, dynamic_segments, forward_windows,
                                                    gradient_batches, mc_dropout_windows, measure_evaluation, windows)
from paperlib.experiments.averaging.tail_lengths import TailLengths
from paperlib.experiments.dryrun.evaluation_plans import (EVALUATIONS, coordinate_trials, optimal_tail_passes,
                                                          search_trials, validation)
from paperlib.models import build_lm
from paperlib.train import Trainer, TrainConfig
from tests.test_train import VOCAB, markov_stream, tiny_model


@pytest.mark.parametrize("tokens", [300, 1_001, 73_760])
@pytest.mark.parametrize("batch,length", [(1, 70), (10, 35), (64, 200)])
def test_windows_are_those_the_loaders_cut(tokens, batch, length):
    assert windows(tokens, batch, length) == num_windows(batchify(torch.arange(tokens), batch), length)


def test_the_counted_search_trials_are_the_searches_own():
    torch.manual_seed(0)
    model = build_lm("lstm", 20, 8, 1)
    tokens = torch.randint(20, (41,))
    grid = {"lr": [0.1, 1.0, 0.3], "decay": [0.0, 0.01]}
    for search, expected in (("coordinate", 3 + 1), ("grid", 3 * 2)):
        tuned = tune_dynamic_evaluation(model, tokens, grid=grid, search=search, rule="sgd", segment_len=5)
        assert len(tuned.trials) == search_trials(grid, search) == expected
    assert coordinate_trials({"lr": [1, 2, 3, 4], "decay": [1, 2, 3], "eps": [1, 2]}) == 4 + 2 + 1


@pytest.mark.parametrize("averaging,exact", [("none", True), ("2ta", False)])
def test_the_trainer_validates_as_often_and_as_long_as_counted(tmp_path, monkeypatch, averaging, exact):
    """Every ``eval_every`` steps and at the last one; 2TA scores at most three sets of weights (short, long, raw)."""
    train = dict(batch_size=4, bptt=10, lr=1e-2, max_steps=25, eval_every=10, eval_batch_size=3, seed=1,
                 averaging=averaging)
    valid = markov_stream(500, 1)
    seen = []
    original = Trainer.validate

    def counting(self):
        seen.append(num_windows(self.valid_stream, self.config.bptt))
        return original(self)

    monkeypatch.setattr(Trainer, "validate", counting)
    Trainer(tiny_model(), markov_stream(2000, 0), valid, TrainConfig(**train), tmp_path, progress=False).fit()
    spec = {"cell": "lstm", "hidden_size": 24, "num_layers": 1}
    counted = validation("tiny", spec, train, VOCAB, valid.numel(), 1, lambda n: n)
    assert set(seen) == {counted.units} == {windows(500, 3, 10)}
    assert (len(seen) == counted.passes) if exact else (3 <= len(seen) <= counted.passes == 3 * 3)


def test_the_optimal_tail_scores_as_many_tails_as_counted(tmp_path, monkeypatch):
    """averaging_ptb's optimal tail scores every tail of whole periods at every evaluation: 1 + 2 + ... + T passes."""
    train = dict(batch_size=4, bptt=10, lr=1e-2, max_steps=30, eval_every=5, eval_batch_size=3, seed=1)
    seen = []
    original = TailLengths._loss_of

    def counting(self, *args, **kwargs):
        seen.append(self.steps)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TailLengths, "_loss_of", counting)
    model = tiny_model()
    tails = TailLengths(model, train["eval_every"], tmp_path / "tails")
    Trainer(model, markov_stream(2000, 0), markov_stream(300, 1), TrainConfig(**train), tmp_path,
            progress=False, monitors={"optimal_tail": tails}).fit()
    assert len(tails.curves) == 6 and [len(c) for c in tails.curves] == [1, 2, 3, 4, 5, 6]
    assert len(seen) == 21 == optimal_tail_passes(train) * 6


def _tiny(units: int, run) -> Evaluation:
    return Evaluation("tiny", lambda: build_lm("lstm", 30, 16, 2), run, units, 1, "unit")


@pytest.mark.parametrize("run", [
    forward_windows(30, 4, 6), mc_dropout_windows(30, 2, 5, 3), gradient_batches(30, 4, 6),
    dynamic_segments(30, 5, rule="sgd"), dynamic_segments(30, 5, rule="sgd", momentum=0.5),
    dynamic_segments(30, 5, rule="rmsprop"), dynamic_segments(30, 5, rule="adam"),
    dynamic_segments(30, 5, rule="global_rms", decay=0.01),
    dynamic_segments(30, 5, rule="global_rms", sparse_units=8), dynamic_segments(30, 5, rule="nonlocal_rmsprop"),
    dynamic_segments(30, 5, streams=3, rule="global_rms")],
    ids=["forward", "mc dropout", "gradients", "sgd", "momentum", "rmsprop", "adam", "global rms", "sparse", "non-local",
         "three streams"])
def test_a_pass_extrapolates_exactly_from_its_two_probes(run):
    """One unit (window, batch, segment) launches the same kernels and does the same arithmetic as the next: a pass of
    five units counted outright equals the one extrapolated from one and two."""
    counted, measured = count_pass(_tiny(5, run), 5), measure_evaluation(_tiny(5, run))
    assert measured["kernels_per_pass"] == counted["kernels"] and measured["flops_per_pass"] == counted["flops"]
    assert measured["kernels_per_unit"] > 0 and measured["flops_per_unit"] > 0


@pytest.mark.parametrize("run", [
    forward_windows(30, 4, 6), mc_dropout_windows(30, 2, 5, 3), gradient_batches(30, 4, 6),
    gradient_batches(30, 4, 6, sparse_units=8, sparse_mode="output"), dynamic_segments(30, 5, rule="adam"),
    dynamic_segments(30, 5, rule="global_rms", decay=0.01), dynamic_segments(30, 5, rule="global_rms", sparse_units=8),
    dynamic_segments(30, 5, rule="nonlocal_rmsprop"), dynamic_segments(30, 5, streams=3, rule="global_rms")],
    ids=["forward", "mc dropout", "gradients", "sparse gradients", "adam", "global rms", "sparse", "non-local",
         "three streams"])
def test_every_pass_runs_on_real_tensors_as_the_device_script_times_it(run):
    """benchmarks/gpu.py runs these passes for real (its check mode times only each stage's heaviest one): each
    leaves the model's weights as it found them (dynamic evaluation adapts copies, gradient statistics only read)."""
    torch.manual_seed(0)
    model = build_lm("lstm", 30, 16, 2, input_dropout=0.1).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run(model, 3, torch.device("cpu"))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_transformer_is_counted_once_its_memory_is_full():
    """Its attention grows with the memory until the memory is full: counted from there on, a long pass equals the
    pass counted outright (the first two segments would undercount the FLOPs, not the kernels)."""
    from paperlib.experiments.dryrun.evaluation_plans import _probes

    spec = {"cell": "transformer", "hidden_size": 16, "num_layers": 1,
            "options": {"num_heads": 2, "positions": "relative", "memory_length": 10, "tie_embeddings": False}}
    assert _probes(spec, 5) == (3, 4) and _probes({"cell": "lstm"}, 5) == (1, 2)
    build = lambda: build_lm("transformer", 30, 16, 1, **spec["options"])  # noqa: E731
    for run in (forward_windows(30, 2, 5), dynamic_segments(30, 5, rule="sgd")):
        counted = count_pass(Evaluation("t", build, run, 9, 1, "unit"), 9)
        measured = measure_evaluation(Evaluation("t", build, run, 9, 1, "unit", probes=_probes(spec, 5)))
        early = measure_evaluation(Evaluation("t", build, run, 9, 1, "unit"))
        assert (measured["kernels_per_pass"], measured["flops_per_pass"]) == (counted["kernels"], counted["flops"])
        assert early["kernels_per_pass"] == counted["kernels"] and early["flops_per_pass"] < counted["flops"]


def test_a_language_models_final_scores_make_the_counted_windows():
    """lm_ptb's evaluate_run: the temperature's logits, validation and test deterministic and at the temperature
    (windows of eval_batch_size rows), then Monte Carlo dropout in chunks of 8 masks (batches of 8 x rows)."""
    from paperlib.experiments.dryrun.evaluation_plans import final_evaluation
    from paperlib.experiments.language_models.lm_ptb import evaluate_run

    model, batches = tiny_model(), []
    forward = model.forward

    def counting(inputs, *args, **kwargs):
        batches.append(inputs.shape[0])
        return forward(inputs, *args, **kwargs)

    model.forward = counting
    train = dict(batch_size=4, bptt=10, eval_batch_size=3, max_steps=1, eval_every=1)
    valid, test = markov_stream(700, 1)[:650], markov_stream(500, 2)  # an eval_tokens prefix: ids[:650]
    evaluate_run(model, valid, test, TrainConfig(**train), 10, 0)
    spec = {"cell": "lstm", "hidden_size": 24, "num_layers": 1}
    deterministic, mc = final_evaluation("tiny", spec, train, VOCAB, valid.numel(), test.numel(), 10, 1,
                                         lambda n: n)
    assert batches.count(3) == deterministic.units and deterministic.passes == 1
    assert len(batches) - batches.count(3) == mc.units == 2 * (windows(650, 3, 10) + windows(500, 3, 10))


def test_a_segment_of_dynamic_evaluation_costs_a_forward_pass_and_more():
    """Per segment: the forward pass, its gradient and the update; non-local RMSprop adds a second model's forward
    and backward pass on its statistics stream."""
    unit = {name: measure_evaluation(_tiny(2, run)) for name, run in {
        "forward": forward_windows(30, 1, 5), "sgd": dynamic_segments(30, 5, rule="sgd"),
        "rmsprop": dynamic_segments(30, 5, rule="rmsprop"),
        "nonlocal": dynamic_segments(30, 5, rule="nonlocal_rmsprop")}.items()}
    flops = {name: u["flops_per_unit"] for name, u in unit.items()}
    assert flops["sgd"] >= 2 * flops["forward"]  # forward + backward (at least as much again)
    assert flops["nonlocal"] >= flops["rmsprop"] + flops["sgd"] - flops["forward"]  # a second forward + backward
    assert unit["rmsprop"]["kernels_per_unit"] > unit["sgd"]["kernels_per_unit"]  # the optimizer's state updates


def _plan(stage: str, profile: str, settings=None) -> dict[str, Evaluation]:
    settings = settings or experiment_params(stage, profile)
    return {e.name: e for e in EVALUATIONS[stage](stage, settings, "tf32", lambda n: n, profile)}


def test_dynamic_evaluation_is_counted_row_by_row_from_the_settings():
    """Tables 4.1/4.2 per corpus: each row's search on the validation text and one test pass; the sweeps of the
    studies at their cap, and said to be a cap."""
    settings = experiment_params("dyneval", "gpu")
    plan = _plan("dyneval", "gpu", settings)
    segments = math.ceil((73_760 - 1) / settings.segment_len)
    assert plan["ptb: global_rms_decay, validation"].passes == search_trials(settings.grids["global_rms"],
                                                                            "coordinate") == 6 + 3 + 2
    assert plan["ptb: sparse, validation"].units == segments and plan["ptb: sparse, test"].passes == 1
    assert plan["ptb: traditional_sgd, validation"].units == 73_760 - 1  # one token per segment
    opt = settings.optimizers
    rmsprop = plan["optimizers: RMSprop sweeps"]
    assert rmsprop.upto and rmsprop.passes == (len(opt["rmsprop_alpha"]) + len(opt["rmsprop_eps"])) * opt["max_evals"]
    assert not plan["ptb: sgd, validation"].upto
    paper = _plan("dyneval", "paper")  # a grid search: every combination
    assert paper["wikitext2: global_rms_rms_decay, validation"].passes == 6 * 4 * 3


def test_character_level_dynamic_evaluation_counts_each_models_rows_and_the_out_of_domain_text():
    settings = experiment_params("dyneval_char", "paper")
    plan = _plan("dyneval_char", "paper", settings)
    assert plan["mlstm: global_rms, validation"].passes == 7 * 5 * 2
    assert plan["transformer: sgd, out of domain"].units == math.ceil((1_177_707 - 1) / settings.segment_len)
    assert "transformer: sparse_recurrent, validation" not in plan  # the Transformer's rows have no sparse row
    assert {"mlstm: gradient statistics, sparse_output", "scaling: mlstm_h800", "recovery: mogrifier_lstm"} <= set(plan)
    shorter = dataclasses.replace(settings, valid_chars=999)
    assert _plan("dyneval_char", "paper", shorter)["mlstm: sgd, validation"].units == math.ceil(999 / 20)


def test_the_fig_3_2_sweep_trains_and_scores_every_seed_and_reuses_the_main_models_first_seed():
    from paperlib.experiments.dryrun.workloads import ADAPTERS

    base = experiment_params("dyneval_char", "paper")
    lstm = base.models["lstm"]["hidden_size"]
    settings = dataclasses.replace(base, scaling={**base.scaling, "seeds": 3,
                                                  "hidden_sizes": {"lstm": [550, lstm]}})
    plan, once = _plan("dyneval_char", "paper", settings), _plan("dyneval_char", "paper", base)
    assert plan["scaling: lstm_h550"].passes == plan["scaling: lstm"].passes == 3
    assert plan["lstm_h550: validation"].passes == 3 * once["lstm_h550: validation"].passes
    assert plan[f"lstm_h{lstm}: validation"].passes == 2 * once["lstm_h550: validation"].passes
    runs = {w.name: w.runs for w in ADAPTERS["dyneval_char"]("dyneval_char", settings, "fp32", lambda n: n)}
    assert runs["lstm_h550"] == 3 and runs[f"lstm_h{lstm}"] == 2 and runs["lstm"] == 1


def test_sentence_vaes_are_scored_once_per_trial_and_per_ladder_score():
    from paperlib.experiments.common.claims import scoring_steps
    from paperlib.experiments.micmco.ptb.design import TABLE_5_1_CURVES

    settings = experiment_params("micmco_ptb", "gpu")
    plan = _plan("micmco_ptb", "gpu", settings)
    trials = {name: e for name, e in plan.items() if name.endswith(": trials")}
    assert len(trials) == len(settings.selected) and {e.passes for e in trials.values()} == {settings.trials}
    tests = {name: e for name, e in plan.items() if name.endswith("Table 5.1 test")}
    assert tests and all(name.split(":")[0] in TABLE_5_1_CURVES for name in tests)
    assert {(e.passes, e.upto) for e in tests.values()} == {(-(-settings.trials // settings.stack_size), True)}
    ladder = experiment_params("micmco_ptb_ladder", "gpu")
    runs = _plan("micmco_ptb_ladder", "gpu", ladder)
    assert {e.passes for e in runs.values()} == {len(ladder.seeds) * ladder.trials * len(scoring_steps(ladder.rungs))}
    assert len(runs) == len(ladder.curves)
