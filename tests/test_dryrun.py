"""The dry run of the paper profile (paperlib.experiments.dryrun.dryrun): every stage's paper config builds and takes a training step
on fake tensors, the counts agree with closed forms, and the estimate is the slower of compute and launches.

The end-to-end test caps sequence lengths at 2 to stay fast (the models are the paper's, the steps shorter); the
committed results/dryrun.json is made at full length by `paperlib dryrun --json results/dryrun.json`. The CUDA tests
at the end need a GPU: they train a tiny lm_ptb-style model at tf32 and bf16 and resume it from a checkpoint.
"""

import json
import math
from collections import Counter

import pytest
import torch
import yaml

from paperlib.experiments.dryrun import dryrun, gpu_time
from paperlib.experiments.dryrun.evaluation_plans import EVALUATIONS
from paperlib.experiments.dryrun.workloads import ADAPTERS
from paperlib.compendium.cli import main
from paperlib.experiments.common.config import experiment_params
from paperlib.device import configure, current
from paperlib.models import build_lm, multi_sample_loss
from paperlib.experiments.reverse_copy.reverse_copy import grid_points
from paperlib.train import Trainer, TrainConfig
from tests.conftest import REPO
from tests.test_train import markov_stream, tiny_model


def _checked(size: int | None) -> int | None:
    """A paper stack size as a quick check builds it (dryrun.check_stacks)."""
    return None if size is None else min(size, dryrun.CHECK_STACK)


def check_dry_run(result: dict, printed: str, stages) -> None:
    """What a dry run of ``stages`` at ``--max-length 2`` must give: every stage's workloads measured, counts that
    add up, and a printed table per stage (tests/test_pipeline.py applies it to the smoke pipeline's
    results/dryrun.json, which covers every stage)."""
    assert set(result["stages"]) == set(stages) and result["assumptions"]["max_length"] == 2
    assert result["assumptions"]["largest_stack"] == dryrun.CHECK_STACK
    for stage in stages:
        assert f"\n{stage}: " in printed, f"the CLI did not print {stage}"
        entry = result["stages"][stage]
        assert entry["workloads"], f"{stage} has no workload"
        for name, w in entry["workloads"].items():
            assert w["parameters"] > 0 and w["kernels_per_step"] > 0 and w["flops_per_step"] > 0, (stage, name)
            # at least the float32 weights; optimizers with state (Adam, SGD with momentum) add to them, plain SGD
            # (the music stage's paper recipe) adds nothing
            assert w["peak_memory_bytes"] >= w["weights_and_optimizer_bytes"] >= 4 * w["parameters"], (stage, name)
            assert w["gpu_hours"] == max(w["compute_bound_hours"], w["launch_bound_hours"]), (stage, name)
            assert w["total_flops"] == w["flops_per_step"] * w["steps_per_run"] * w["runs"]
        assert entry["training_hours"] == pytest.approx(sum(w["gpu_hours"] for w in entry["workloads"].values()),
                                                        abs=1e-3)
        assert entry["evaluation_hours"] == pytest.approx(sum(e["gpu_hours"] for e in entry["evaluations"].values()),
                                                          abs=1e-3)
        assert entry["gpu_hours"] == pytest.approx(entry["training_hours"] + entry["evaluation_hours"], abs=1e-3)
        assert bool(entry["evaluations"]) == (stage in EVALUATIONS), f"{stage}: evaluation counted or not as planned"
        for name, e in entry["evaluations"].items():
            assert e["kernels_per_unit"] > 0 and e["units_per_pass"] > 0 and e["passes"] > 0, (stage, name)
            assert e["gpu_hours"] == max(e["compute_bound_hours"], e["launch_bound_hours"]), (stage, name)
    assert "total:" in printed
    # the stages' own step counts: max_steps x seeds, trials, grid points
    if "lm_ptb" in stages:
        lm = result["stages"]["lm_ptb"]["workloads"]
        assert (lm["lstm"]["steps_per_run"], lm["lstm"]["runs"]) == (200_000, 1)
        assert (lm["mogrifier_lstm_ch4"]["steps_per_run"], lm["mogrifier_lstm_ch4"]["batch"]) == (41_500, "8x128")
    if "tuning_ptb" in stages:  # the study's trials and the probes of its best trial's neighbourhood
        tuning = experiment_params("tuning_ptb", "paper")
        assert result["stages"]["tuning_ptb"]["workloads"]["lstm"]["runs"] == \
            tuning.trials + tuning.neighbours + tuning.reruns == 313
    if "micmco_ptb_ladder" in stages:  # every curve, one run per seed and trial to the top rung, or stacks of them
        settings = experiment_params("micmco_ptb_ladder", "paper")
        ladder = result["stages"]["micmco_ptb_ladder"]["workloads"]
        runs, size = len(settings.seeds) * settings.trials, _checked(settings.stack_size)
        if size is None:
            assert set(ladder) == set(settings.curves)
            assert {(w["steps_per_run"], w["runs"], w["models_per_step"]) for w in ladder.values()} == {
                (settings.rungs[-1], runs, 1)}
        else:
            assert set(ladder) == {f"{curve} (stacks of {size})" for curve in settings.curves}
            assert {(w["steps_per_run"], w["runs"], w["models_per_step"]) for w in ladder.values()} == {
                (settings.rungs[-1], -(-runs // size), size)}
    if "word_generation" in stages:  # every planned run once: alone (Real NVP, or no stack_size) or in stacks
        from paperlib.experiments.word_generation.word_generation import plan_runs

        settings = experiment_params("word_generation", "paper")
        words = result["stages"]["word_generation"]["workloads"]
        counts = Counter(", ".join(run.labels) for run in plan_runs(settings))
        assert {name.split(" (stacks of ")[0] for name in words} == set(counts)
        for name, w in words.items():  # a last, smaller stack counted as a full one
            assert w["runs"] == -(-counts[name.split(" (stacks of ")[0]] // w["models_per_step"]), name
            assert w["models_per_step"] <= (_checked(settings.stack_size) or 1), name
            assert name.endswith(f"(stacks of {w['models_per_step']})") == (settings.stack_size is not None
                                                                           and "REAL-NVP" not in name), name
    if "word_generation_ladder" in stages:  # each row's seeds, alone or as one stack of the stage's stack_size
        ladder = experiment_params("word_generation_ladder", "paper")
        size = experiment_params("word_generation", "paper").stack_size
        rows = result["stages"]["word_generation_ladder"]["workloads"]
        assert len(rows) == 2 and all(w["models_per_step"] == min(size or 1, len(ladder.seeds)) for w in rows.values())
        assert all(w["runs"] == -(-len(ladder.seeds) // w["models_per_step"]) for w in rows.values())
    if "reverse_copy" in stages:  # every run of the grid once: alone, or in stacks of the model's stack_size
        settings = experiment_params("reverse_copy", "paper")
        copies = result["stages"]["reverse_copy"]["workloads"]
        stacked = [w["runs"] * w["models_per_step"] for w in copies.values()]  # a last stack counted in full
        spare = sum(w["models_per_step"] - 1 for w in copies.values())
        assert sum(stacked) - spare <= len(grid_points(settings)) <= sum(stacked)
        for name, w in copies.items():
            size = _checked(settings.models[name.split()[0]].get("stack_size"))
            assert w["models_per_step"] == (size or 1) and name.endswith(f"(stacks of {size})") == bool(size)


def test_a_quick_check_stacks_at_most_two_models_of_the_profile_it_counts_and_leaves_the_params_alone():
    params = {"experiments": {
        "a": {"paper": {"stack_size": 10, "models": {"m": {"stack_size": 9}, "n": {"rounds": [5]}}},
              "gpu": {"stack_size": 5}},
        "b": {"paper": {"stack_size": None, "trials": 20}}, "c": {"paper": {"stack_size": 1}}}}
    before = json.dumps(params)
    checked = dryrun.check_stacks(params, "paper")["experiments"]
    assert json.dumps(params) == before  # a copy
    assert checked["a"]["paper"]["stack_size"] == checked["a"]["paper"]["models"]["m"]["stack_size"] == 2
    assert checked["a"]["paper"]["models"]["n"] == {"rounds": [5]} and checked["a"]["gpu"] == {"stack_size": 5}
    assert checked["b"]["paper"] == {"stack_size": None, "trials": 20} and checked["c"]["paper"]["stack_size"] == 1
    # the full-length run counts the stacks the profile trains
    assert "largest_stack" not in dryrun.assumptions("tf32") and dryrun.assumptions("tf32", 2)["largest_stack"] == 2


def test_the_cli_measures_and_prints_the_stages_it_is_given(tmp_path, capsys):
    """A few cheap stages through the CLI; every stage is dry-run by the smoke pipeline (tests/test_pipeline.py),
    which checks its results/dryrun.json with the same function."""
    out = tmp_path / "dryrun.json"
    stages = ["lm_ptb", "tuning_ptb", "micmco_synthetic_ladder"]
    assert main(["dryrun", *stages, "--max-length", "2", "--quiet", "--json", str(out)]) == 0
    check_dry_run(json.loads(out.read_text()), capsys.readouterr().out, stages)


def test_every_training_stage_of_the_pipeline_has_a_dry_run():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    training = {name for name, spec in stages.items() if "compute" in spec.get("params", [])
                and any(p == f"experiments.{name}.${{profile}}" for p in spec.get("params", []))}
    assert training == set(dryrun.STAGES)
    assert "dryrun" in stages and "results/dryrun.json" in stages["results_index"]["deps"]


def test_an_unknown_stage_is_a_clear_error(capsys):
    with pytest.raises(ValueError, match="unknown stage.*lm_ptbb.*lm_ptb, lm_ptb_char"):
        dryrun.check_stages(["lm_ptb", "lm_ptbb"])
    assert main(["dryrun", "lm_ptbb"]) == 2
    assert "stages with a dry run" in capsys.readouterr().err


def test_the_estimate_is_the_slower_of_compute_and_kernel_launches():
    hour_of_compute = gpu_time.MFU * gpu_time.PEAK_FLOPS["tf32"] * 3600  # FLOPs one hour of tf32 compute does
    hour_of_launches = round(3600 / gpu_time.KERNEL_LATENCY_S)
    slow = gpu_time.estimate(hour_of_compute, hour_of_launches // 2, 1, "tf32")
    assert slow["gpu_hours"] == pytest.approx(1.0) and slow["bound"] == "compute"
    assert slow["launch_bound_hours"] == pytest.approx(0.5, rel=1e-6)
    loop = gpu_time.estimate(hour_of_compute / 4, hour_of_launches, 10, "tf32")
    assert loop["gpu_hours"] == pytest.approx(10.0) and loop["bound"] == "launch"
    assert loop["compute_bound_hours"] == pytest.approx(2.5)
    assert gpu_time.estimate(hour_of_compute, 0, 1, "bf16")["gpu_hours"] == pytest.approx(495 / 989)
    with pytest.raises(ValueError, match="unknown precision 'fp8'; valid: fp32, tf32, bf16"):
        gpu_time.estimate(1.0, 1, 1, "fp8")


def _lm_workload(vocab: int, batch: int, hidden: int, forward_only: bool = False) -> dryrun.Workload:
    def backward(model, length, device):
        tokens = torch.randint(vocab, (batch, length))
        loss, _ = multi_sample_loss(model, tokens, tokens, 1)
        if not forward_only:
            loss.backward()

    return dryrun.Workload("lstm", lambda: build_lm("lstm", vocab, hidden, 1), backward,
                           lambda model: torch.optim.Adam(model.parameters()), steps=1, length=5)


def test_the_softmax_layer_counts_2bthv_forward_and_twice_that_backward():
    batch, steps, hidden = 4, 5, 8
    counted = {}
    for vocab in (50, 90):
        counted[vocab] = (dryrun.measure(_lm_workload(vocab, batch, hidden, forward_only=True))["flops_per_step"],
                          dryrun.measure(_lm_workload(vocab, batch, hidden))["flops_per_step"])
    forward = 2 * batch * steps * hidden * (90 - 50)  # the only matmul whose size depends on V: [B*T, H] x [H, V]
    assert counted[90][0] - counted[50][0] == forward
    assert counted[90][1] - counted[50][1] == 3 * forward  # backward: dL/dh and dL/dW, one forward's worth each
    # the whole step of a 1-layer LSTM: 6 FLOPs per token per matmul weight (input, recurrent, tied softmax)
    assert counted[50][1] == 6 * batch * steps * (4 * hidden * (hidden + hidden) + hidden * 50)


@pytest.mark.parametrize("stage", dryrun.STAGES)
def test_parameter_counts_are_those_of_the_real_model(stage):
    """On each stage's smoke settings (small models): the fake model has the parameters of the one built on the CPU."""
    settings = experiment_params(stage, "smoke")
    workload = next(dryrun.ADAPTERS[stage](stage, settings, "fp32", lambda length: min(length, 2)))
    torch.manual_seed(0)
    real = workload.build()
    distinct = {id(p): p for p in real.parameters()}.values()
    assert dryrun.measure(workload)["parameters"] == sum(p.numel() for p in distinct) == dryrun.num_parameters(real)


def test_lengths_extrapolate_linearly_for_reverse_copy():
    from paperlib.experiments.reverse_copy.reverse_copy import build_model, token_cross_entropy

    def backward(model, length, device):
        source = torch.randint(30, (8, length))
        token_cross_entropy(model(source, source), source).backward()

    def workload(length, probes=None):
        return dryrun.Workload("mogrifier", lambda: build_model(30, 6, 16, 1, 3, 4), backward,
                               lambda model: torch.optim.Adam(model.parameters()), 1, length, key=("m",),
                               probes=probes)

    direct = dryrun.measure(workload(12))
    extrapolated = dryrun.measure(workload(12, probes=(4, 8)), cache={})
    for key in ("parameters", "flops_per_step", "kernels_per_step", "weights_and_optimizer_bytes"):
        assert extrapolated[key] == direct[key], key
    assert extrapolated["peak_memory_bytes"] == pytest.approx(direct["peak_memory_bytes"], rel=0.02)


def _one_and_a_stack_of_two(one, two) -> tuple[dict, dict]:
    """One step of a workload of 3 seeds trained alone and as stacks of 2 (a stack of 2 and one of 1, counted full),
    measured at length 6; a stacked model's parameters are counted per model."""
    assert (one.runs, one.models, two.runs, two.models) == (3, 1, 2, 2)
    single, pair = dryrun.measure_step(one, 6), dryrun.measure_step(two, 6)
    assert pair["parameters"] == 2 * single["parameters"]
    return single, pair


def test_a_stacked_reverse_copy_workload_does_its_models_arithmetic_in_one_sequence_of_kernels():
    from paperlib.experiments.dryrun.measure import clip_gradients
    from paperlib.experiments.reverse_copy.reverse_copy import ReverseCopyParams

    block = {"vocab_size": 20, "lengths": [4, 6], "train_examples": 64, "valid_examples": 8, "test_examples": 8,
             "parameter_budget": 4000, "steps": 10, "batch_size": 8, "learning_rates": [0.01], "l2_penalties": [0.0],
             "models": {"lstm": {"embedding_sizes": [6]}, "mogrifier": {"embedding_sizes": [4], "rounds": [3],
                                                                         "ranks": [2]}}, "seeds": [1, 2, 3]}
    def workloads(stack_size):
        block["models"]["mogrifier"]["stack_size"] = stack_size
        return {w.name: w for w in ADAPTERS["reverse_copy"]("reverse_copy", ReverseCopyParams(**block), "fp32",
                                                            lambda n: n)}

    alone, stacked = workloads(1), workloads(2)
    assert set(stacked) == {"lstm L=4 E=6", "lstm L=6 E=6", "mogrifier L=4 E=4 r=3 k=2 (stacks of 2)",
                            "mogrifier L=6 E=4 r=3 k=2 (stacks of 2)"}
    one, two = alone["mogrifier L=6 E=4 r=3 k=2 (stacks of 1)"], stacked["mogrifier L=6 E=4 r=3 k=2 (stacks of 2)"]
    single, pair = _one_and_a_stack_of_two(one, two)
    # the same matmuls, batched: twice the FLOPs in the same forward and backward kernels; the second model adds
    # only its own optimizer group's and clipping's few dozen kernels (80 of 1,231 here), not a second pass
    assert pair["flops_per_step"] == pytest.approx(2 * single["flops_per_step"], rel=0.01)
    assert single["kernels_per_step"] < pair["kernels_per_step"] < 1.1 * single["kernels_per_step"]
    # each model of a stack is clipped by its own gradient norm
    models = two.build()
    for scale, model in zip((0.01, 100.0), models):
        for p in model.parameters():
            p.grad = torch.full_like(p, scale)
    norms = [torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in m.parameters()])) for m in models]
    clip_gradients(two, models)
    after = [torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in m.parameters()])) for m in models]
    assert norms[0] < 10 and after[0] == norms[0] and after[1] == pytest.approx(10.0, rel=1e-5)


@pytest.mark.parametrize("row", ["DSSM", "GRU"])
def test_a_stacked_word_generation_workload_does_its_models_arithmetic_in_one_sequence_of_kernels(row):
    from paperlib.experiments.word_generation.word_generation import WordGenerationParams

    paper = experiment_params("word_generation", "paper").table1
    block = {**experiment_params("word_generation", "smoke").__dict__, "table2": {}, "table3_generative": [],
             "table1": {"DSSM": paper["2xTRIL, K=10, BIDI"], "GRU": paper["BASELINE-8D"]}, "figure_model": "DSSM",
             "baseline_reference": "GRU", "seeds": [0, 1, 2], "seeds_weighted": [0, 1, 2]}

    def workloads(stack_size):
        settings = WordGenerationParams(**{**block, "stack_size": stack_size})
        return {w.name: w for w in ADAPTERS["word_generation"]("word_generation", settings, "fp32", lambda n: n)}

    one, two = workloads(None)[f"table1:{row}"], workloads(2)[f"table1:{row} (stacks of 2)"]
    single, pair = _one_and_a_stack_of_two(one, two)
    # the same arithmetic, batched: about twice the FLOPs in one sequence of kernels, far fewer than two models'
    # (more than one model's: the GRUs run step by step, as vmap needs, and each model draws its own noise and has
    # its own optimizer)
    assert pair["flops_per_step"] == pytest.approx(2 * single["flops_per_step"], rel=0.05)
    assert single["kernels_per_step"] < pair["kernels_per_step"] < 1.6 * single["kernels_per_step"]
    # the device script runs the same step on real tensors: every model of the stack gets its own finite gradient
    models = two.build()
    two.backward(models, 6, torch.device("cpu"))
    grads = [torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None]) for m in models]
    assert all(g.isfinite().all() and g.abs().sum() > 0 for g in grads) and not torch.equal(grads[0], grads[1])


def test_a_dry_run_repeats_exactly():
    first, second = (json.dumps(dryrun.dry_run(["lm_wt2_bytes"], max_length=3)) for _ in range(2))
    assert first == second


def test_the_committed_dry_run_is_at_full_length_and_covers_every_stage():
    result = json.loads((REPO / "results" / "dryrun.json").read_text())
    assert result["assumptions"]["max_length"] is None and set(result["stages"]) == set(dryrun.STAGES)
    lm = result["stages"]["lm_ptb"]["workloads"]["mogrifier_lstm"]
    assert lm["length"] == 70 and lm["batch"] == "64"
    assert result["assumptions"]["profile"] == "paper"


def test_the_gpu_profile_is_counted_at_the_thesis_sizes_within_one_h100s_memory():
    """The `gpu` profile (params.yaml, docs/gpu.md), meant for one H100-day: its committed dry run counts every stage
    at full length, within an 80 GB H100's memory, a small fraction of the paper profile's estimate (at most a
    fiftieth: a guard against a gpu block that grew to the paper's), with the PTB MICMCO curves stacked at the
    thesis' model size. Whether it fits the day is not asserted: the datasheet's constants put it at about 30 hours,
    a measured card's recalibration (docs/gpu.md) far above for eager steps."""
    result = json.loads((REPO / "results" / "dryrun_gpu.json").read_text())
    made = result["assumptions"]
    assert made["profile"] == "gpu" and made["max_length"] is None and set(result["stages"]) == set(dryrun.STAGES)
    paper_hours = sum(s["gpu_hours"] for s in json.loads((REPO / "results" / "dryrun.json").read_text())["stages"].values())
    assert sum(stage["gpu_hours"] for stage in result["stages"].values()) <= paper_hours / 50
    assert {name for name, stage in result["stages"].items() if stage["evaluations"]} == set(EVALUATIONS)
    assert max(stage["peak_memory_bytes"] for stage in result["stages"].values()) <= 80e9
    ptb = result["stages"]["micmco_ptb"]["workloads"]
    assert all(w["models_per_step"] == 10 for w in ptb.values())  # every curve trained as stacks of 10 trials
    # the thesis' sentence VAEs (hidden 128, the full vocabulary): the paper profile's models, counted the same way
    paper = json.loads((REPO / "results" / "dryrun.json").read_text())["stages"]["micmco_ptb"]["workloads"]
    assert all(w["parameters"] == paper[name]["parameters"] for name, w in ptb.items())
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert "results/dryrun_gpu.json" in stages["results_index"]["deps"]
    assert {p for p in stages["dryrun_gpu"]["params"] if p.startswith("experiments.")} == \
        {f"experiments.{name}.gpu" for name in dryrun.STAGES}


# -- on a GPU only ----------------------------------------------------------------------------------------------

needs_cuda = pytest.mark.cuda


@pytest.fixture
def restore_precision():
    before = current()
    yield
    configure(before.precision, before.sync_every)


def _cuda_trainer(tmp_path, max_steps: int, cell: str = "mogrifier_lstm") -> Trainer:
    config = TrainConfig(batch_size=4, bptt=8, max_steps=max_steps, eval_every=3, eval_batch_size=2, num_samples=2,
                         averaging="2ta", seed=1)
    return Trainer(tiny_model(cell=cell), markov_stream(600, 0), markov_stream(120, 1), config, tmp_path,
                   device="cuda", progress=False)


@needs_cuda
@pytest.mark.parametrize("precision", ["tf32", "bf16"])
def test_a_tiny_lm_ptb_model_trains_on_cuda_with_a_finite_loss(tmp_path, precision, restore_precision):
    configure(precision)
    trainer = _cuda_trainer(tmp_path, 6)
    result = trainer.fit()
    assert next(trainer.model.parameters()).device.type == "cuda"
    assert result.steps == 6 and math.isfinite(result.best_valid_nll) and result.rollbacks == 0
    assert all(math.isfinite(h["valid_nll"]) for h in result.history if "valid_nll" in h)


@needs_cuda
def test_a_cuda_run_resumes_from_its_checkpoint(tmp_path, restore_precision):
    configure("tf32")
    _cuda_trainer(tmp_path, 3).fit()
    resumed = _cuda_trainer(tmp_path, 6)
    result = resumed.fit(resume=True)  # the RNG states stay CPU tensors; weights and optimizer go to the GPU
    assert resumed.step == 6 and result.steps == 6 and math.isfinite(result.best_valid_nll)
    assert [h["step"] for h in result.history if "valid_nll" in h] == [3, 6]
    assert all(s["exp_avg_sq"].device.type == "cuda" for s in resumed.optimizer.state.values())


# -- estimates for another profile, and constants fitted to a GPU measurement -------------------------------------

def _measurement(mfu: float, latency: float, peaks=(50.0, 380.0, 760.0), precision="tf32", skew=None):
    """A benchmarks/gpu.py result whose steps follow the time model exactly (``skew`` scales one row's step)."""
    peak = dict(zip(("fp32", "tf32", "bf16"), peaks))[precision] * 1e12
    rows = []
    for i, (flops, kernels) in enumerate([(5e11, 6000), (9e12, 20000), (4e11, 300), (2e10, 150), (1.5e12, 70)]):
        step = max(flops / (mfu * peak), kernels * latency) * (skew if skew and i == 0 else 1.0)
        rows.append({"stage": "s", "workload": f"w{i}", "status": "timed", "step_s": step, "flops_per_step": flops,
                     "predicted_kernels": kernels})
    rows.append({"stage": "s", "workload": "oom", "status": "out of memory"})
    return {"environment": {"card": "NVIDIA H200"}, "precision": precision, "workloads": rows,
            "ceilings": {f"matmul_tflops_{p}": v for p, v in zip(("fp32", "tf32", "bf16"), peaks)}}


def test_calibration_recovers_the_mfu_and_time_per_kernel_a_measurement_follows():
    from paperlib.experiments.dryrun.gpu_time import calibrate

    constants, fit = calibrate(_measurement(0.2, 8e-6), "gpu.json")
    grid = 10 ** 0.02  # the fit's grid step, both axes
    assert 0.2 / grid <= constants.mfu <= 0.2 * grid and 8e-6 / grid <= constants.kernel_latency_s <= 8e-6 * grid
    assert constants.peak_flops["tf32"] == 380e12 and constants.gpu == "NVIDIA H200" and constants.source == "gpu.json"
    assert fit["workloads"] == 5 and fit["max_ratio"] <= grid  # the out-of-memory row is left out
    _, skewed = calibrate(_measurement(0.2, 8e-6, skew=3.0))
    assert skewed["max_ratio"] > 1.5  # a step the model cannot follow shows as a worse fit, never hidden
    with pytest.raises(ValueError, match="no timed workload"):
        calibrate({**_measurement(0.2, 8e-6), "workloads": []})
    # evaluation passes are fitted too, per unit: one the model follows keeps the fit, one it cannot follow shows
    measured = _measurement(0.2, 8e-6)
    unit = {"stage": "e", "workload": "dynamic", "status": "timed", "flops_per_unit": 1e9, "kernels_per_unit": 700,
            "precision": "tf32", "unit_s": 700 * 8e-6}
    _, with_pass = calibrate({**measured, "evaluations": [unit, {**unit, "status": "error"}]})
    assert with_pass["workloads"] == 6 and with_pass["max_ratio"] <= grid and "e:dynamic" in with_pass["ratios"]
    assert fit["evaluation_max_ratio"] is None and with_pass["evaluation_max_ratio"] <= grid
    _, off = calibrate({**measured, "evaluations": [{**unit, "unit_s": 3 * 700 * 8e-6}]})
    assert off["max_ratio"] > 1.5 and off["max_ratio"] == max(off["training_max_ratio"], off["evaluation_max_ratio"])


def test_the_dry_run_counts_another_profiles_settings_and_estimates_with_fitted_constants():
    from paperlib.experiments.dryrun.gpu_time import Constants, estimate

    smoke = dryrun.dry_run(["micmco_synthetic_ladder"], max_length=2, profile="smoke")
    paper = dryrun.dry_run(["micmco_synthetic_ladder"], max_length=2)
    smoke_w, paper_w = (next(iter(r["stages"]["micmco_synthetic_ladder"]["workloads"].values())) for r in (smoke, paper))
    assert smoke_w["parameters"] < paper_w["parameters"]  # the ladder reads micmco_synthetic's smoke model too
    slow = Constants("card", {"fp32": 1e12, "tf32": 1e12, "bf16": 1e12}, 0.5, 1e-3, "m.json")
    assert estimate(1e12, 10_000, 3600, "tf32", slow)["gpu_hours"] == pytest.approx(10.0)  # launch: 10k x 1 ms
    assert estimate(1e12, 1, 3600, "tf32", slow)["gpu_hours"] == pytest.approx(2.0)  # compute: 1 TFLOP at 0.5 TFLOP/s
    assert estimate(1e12, 1, 3600, "tf32", slow)["bound"] == "compute"
    calibrated = dryrun.dry_run(["micmco_synthetic_ladder"], max_length=2, constants=slow)
    assert calibrated["assumptions"]["constants"] == "m.json" and calibrated["assumptions"]["mfu"] == 0.5
    assert "Constants fitted to m.json" in gpu_time.render_tables(calibrated)


def test_the_cli_estimates_with_a_measurements_constants(tmp_path, capsys):
    measured = tmp_path / "gpu-nvidia-h200-2026-12-01.json"
    measured.write_text(json.dumps(_measurement(0.25, 6e-6)))
    out = tmp_path / "dry.json"
    assert main(["dryrun", "micmco_synthetic_ladder", "--max-length", "2", "--quiet", "--profile", "smoke",
                 "--calibration", str(measured), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["calibration"]["workloads"] == 5 and result["assumptions"]["profile"] == "smoke"
    printed = capsys.readouterr().out
    assert "calibrated on 5 measured workloads" in printed and "of every measured step (training steps " in printed


def test_a_fused_lstm_layer_counts_the_kernels_cudnn_launches_per_time_step():
    """nn.LSTM runs as one fused operator per layer on the CPU, but cuDNN launches kernels per time step: the count
    grows by FUSED_RNN_KERNELS_PER_STEP (forward and backward) per layer and step, in either batch layout (measured:
    the music stage's 2-layer LSTM-NADE launched 1,456 kernels at 129 frames on an H200, counted 1,416)."""
    from torch import nn
    from torch._subclasses.fake_tensor import FakeTensorMode

    from paperlib.experiments.dryrun.measure import FUSED_RNN_KERNELS_PER_STEP, StepCounter

    per_step = sum(FUSED_RNN_KERNELS_PER_STEP.values())

    def kernels(steps: int, layers: int, batch_first: bool) -> int:
        with FakeTensorMode():
            lstm = nn.LSTM(8, 16, num_layers=layers, batch_first=batch_first)
            x = torch.randn(3, steps, 8) if batch_first else torch.randn(steps, 3, 8)
            with StepCounter(list(lstm.parameters())) as counter:
                out, _ = lstm(x)
                out.sum().backward()
        return counter.kernels

    for layers in (1, 2):
        for batch_first in (False, True):
            assert kernels(10, layers, batch_first) - kernels(5, layers, batch_first) == 5 * layers * per_step


def test_reestimating_a_dry_run_equals_running_it_with_those_constants_and_calibration_takes_current_counts():
    """gpu_time.reestimate turns a dry run's counts into hours at other constants exactly as dry_run does with them;
    calibrate reads the dry run's current counts for the measured workloads when given them."""
    from paperlib.experiments.dryrun.evaluation import evaluation_precision
    from paperlib.experiments.dryrun.gpu_time import DATASHEET, Constants, calibrate, reestimate

    other = Constants("a card", {"fp32": 2e13, "tf32": 1e14, "bf16": 2e14}, 0.1, 2e-5, "test")
    base = dryrun.dry_run(["lm_ptb"], max_length=2)
    direct = dryrun.dry_run(["lm_ptb"], max_length=2, constants=other)
    again = reestimate(base, other, evaluation_precision(base["assumptions"]["precision"]))
    for stage, entry in direct["stages"].items():
        assert again[stage]["gpu_hours"] == pytest.approx(entry["gpu_hours"], rel=1e-3, abs=1e-4)
    assert reestimate(base, DATASHEET, "tf32")["lm_ptb"]["training_hours"] == pytest.approx(
        base["stages"]["lm_ptb"]["training_hours"], rel=1e-3, abs=1e-4)
    name, workload = next(iter(base["stages"]["lm_ptb"]["workloads"].items()))
    measurement = {"precision": base["assumptions"]["precision"], "environment": {"card": "a card"},
                   "ceilings": {"matmul_tflops_fp32": 20.0, "matmul_tflops_tf32": 100.0, "matmul_tflops_bf16": 200.0},
                   "workloads": [{"stage": "lm_ptb", "workload": name, "status": "timed",
                                  "step_s": workload["kernels_per_step"] * 1e-5,  # 10 us per counted kernel
                                  "flops_per_step": 1.0, "predicted_kernels": 1}]}  # stale counts: one kernel
    _, stale = calibrate(measurement)
    constants, fresh = calibrate(measurement, counts=base)
    # a step of one kernel taking milliseconds needs a latency past the grid's end (1 ms); the current counts fit
    assert workload["kernels_per_step"] * 1e-5 > 2e-3 and stale["max_ratio"] > 2
    assert fresh["max_ratio"] == pytest.approx(1.0, abs=1e-6) and constants.kernel_latency_s == pytest.approx(1e-5)
