"""The benchmarks run (at toy sizes, untimed): a broken benchmark is caught here, its speed is measured by hand."""

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

RATIO = r"\d+\.\d+x?"


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], capture_output=True, text=True,
                          cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_cell_benchmark_prints_a_ratio_to_nn_lstm_for_every_cell():
    out = _run("cells.py", "--hidden", "8", "--vocab", "50", "--batch", "2", "--bptt", "3", "--warmup", "0",
               "--steps", "1", "--threads", "1")
    for label in ("torch.nn.LSTM", "lstm (capped gate, fused)", "mogrifier_lstm", "rlstm"):
        assert re.search(rf"^{re.escape(label)}.*\s{RATIO}\s+{RATIO}\s*$", out, re.M), (label, out)
    assert re.search(r"^torch\.nn\.LSTM .*1\.00x\s+1\.00x", out, re.M)


@pytest.mark.slow
def test_dyneval_benchmark_compares_dynamic_static_training_and_batched_streams():
    out = _run("dyneval.py", "--tokens", "12", "--streams", "2", "--repeats", "1", "--threads", "1")
    for label in ("static evaluation", "dynamic: global RMS + RMS decay", "dynamic: sparse", "training step, batch 1",
                  "dynamic, 2 streams batched (vmap)", "dynamic, 2 streams one by one"):
        assert len(re.findall(rf"^{re.escape(label)}.*\s\d+\s+{RATIO}\s+{RATIO}\s*$", out, re.M)) == 2, (label, out)


def test_estimator_benchmark_gives_every_objective_relative_to_its_base_step():
    out = _run("estimators.py", "--batch-size", "4", "--repeats", "1", "--samples", "2", "--threads", "1")
    for estimator in ("reparam", "stl", "dreg", "reinforce", "vimco"):
        assert re.search(rf"\s{estimator}\s+2\s+\S+ms\s+{RATIO}\s+{RATIO}\s+{RATIO}\s*$", out, re.M), (estimator, out)


def test_stacked_trials_benchmark_times_the_stack_and_the_separate_runs():
    out = _run("stacked_trials.py", "--seeds", "1", "--trials", "2", "--steps", "2", "--vocab", "30", "--hidden", "4",
               "--batch", "3")
    assert "2 trials x 2 steps" in out and "stacked / separate" in out


@pytest.mark.parametrize("flow", ["2xTRIL", "GRU"])
def test_stacked_words_benchmark_times_the_stack_and_the_separate_runs(flow):
    out = _run("stacked_words.py", "--flow", flow, "--samples", "2" if flow != "GRU" else "1", "--seeds", "2",
               "--steps", "2", "--batch", "3", "--words", "50")
    assert "2 seeds x 2 steps" in out and re.search(r"stacked / separate \d+\.\d\d$", out.strip())


def test_wallclock_benchmark_prints_each_test_perplexity_and_its_ratio_to_the_tutorial(data_root):
    out = _run("lm_wallclock.py", "--seconds", "0.5", "--models", "baseline", "lstm", "--threads", "1",
               "--profile", "smoke", "--data", str(data_root), "--eval-tokens", "5000")
    assert "validated and tested on the first 5,000 tokens of those splits" in out
    assert re.search(r"^baseline\s.*\s\d+\.\d\s+1\.00x\s*$", out, re.M), out
    assert re.search(rf"^lstm\s.*\s\d+\.\d\s+{RATIO}\s*$", out, re.M), out


def test_wallclock_benchmark_runs_a_model_with_a_recipe_studys_best_recipe(data_root, tmp_path):
    import json

    summary = tmp_path / "study.json"
    best = {"batch_size": 4, "bptt": 10, "optimizer": "adam", "lr": 1e-3, "beta1": 0.9, "schedule": "constant",
            "warmup": 0.0, "dropout_scale": 0.5, "embedding_init": "uniform", "hidden_size": 12}
    summary.write_text(json.dumps({"experiment": "lm_ptb", "model": "lstm", "best": {"recipe": best}}))
    out = _run("lm_wallclock.py", "--seconds", "0.5", "--models", "baseline", "--recipe", f"lstm={summary}",
               "--threads", "1", "--profile", "smoke", "--data", str(data_root), "--eval-tokens", "5000")
    row = re.search(rf"^lstm \(study\)\s+([\d,]+)\s.*\s\d+\.\d\s+{RATIO}\s*$", out, re.M)
    assert row, out
    # the study's hidden size replaced the profile's (smoke lstm: H=16), so the model is smaller than the profile's
    from paperlib.experiments.common.config import experiment_params
    from paperlib.models import build_lm

    spec = experiment_params("lm_ptb", "smoke").models["lstm"]
    profile_size = sum(p.numel() for p in {id(p): p for p in build_lm(
        "lstm", 10000, spec["hidden_size"], spec["num_layers"], **spec["options"]).parameters()}.values())
    assert int(row[1].replace(",", "")) < profile_size
    wrong = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lm_wallclock.py"), "--models", "baseline",
                            "--recipe", f"gru={summary}", "--profile", "smoke", "--data", str(data_root)],
                           capture_output=True, text=True, cwd=REPO, timeout=600)
    assert wrong.returncode != 0 and "--recipe wants MODEL=SUMMARY_JSON" in wrong.stderr
    short = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lm_wallclock.py"), "--eval-tokens", "100"],
                           capture_output=True, text=True, cwd=REPO, timeout=600)
    assert short.returncode != 0 and "--eval-tokens must be at least 2000" in short.stderr


# -- the device script's check mode -------------------------------------------------------------------------------

def _gpu_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_benchmark", REPO / "benchmarks" / "gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_device_run_that_dies_in_a_risky_phase_leaves_what_it_measured_on_disk(tmp_path, monkeypatch):
    """The graphed stacks run last and may abort the process (a capture that fails badly): the measurement is
    written before that phase, saying which phase it stopped before, and the final write drops the mark."""
    import json

    gpu = _gpu_module()

    def dies(*args, **kwargs):
        raise SystemExit("the process died in a capture")

    monkeypatch.setattr(gpu, "graphed_stack_timings", dies)
    args = ["--cpu", "--out", str(tmp_path), "--stages", "reverse_copy", "--per-stage", "1", "--concurrent",
            "--budget", "60", "--stacked", "1"]
    with pytest.raises(SystemExit, match="died in a capture"):
        gpu.main(args)
    (path,) = tmp_path.glob("cpu-check-*.json")
    left = json.loads(path.read_text())
    assert left["stopped_before"] == "the stacks' steps as CUDA graphs"
    assert [r["stage"] for r in left["workloads"]] == ["reverse_copy"] and left["stacked"][0]["status"] == "timed"
    monkeypatch.undo()
    assert _gpu_module().main(args) == 0
    assert "stopped_before" not in json.loads(path.read_text())


def test_the_device_script_runs_its_whole_path_in_check_mode(tmp_path):
    """benchmarks/gpu.py --cpu: environment, a nested pytest run read back from its JUnit report, the ceilings, one
    training step of every stage's first workload (smoke settings, 2 positions) beside the dry run's count of the
    same workload, nn.LSTM beside the LM workloads, an evaluation pass per stage that counts them, and a compile mode
    the budget cannot cover listed as not timed."""
    import json

    out = _run("gpu.py", "--cpu", "--out", str(tmp_path), "--tests", "--pytest-args",
               "tests/test_config.py::test_profile_resolution_order", "--compile", "max-autotune", "--budget", "200")
    (path,) = tmp_path.glob("cpu-check-*.json")
    result = json.loads(path.read_text())
    assert result["mode"] == "cpu check" and result["profile"] == "smoke" and result["environment"]["device"] == "cpu"
    assert result["tests"]["exit"] == 0 and result["tests"]["passed"] == 1 and result["tests"]["failed"] == 0
    assert all(result["ceilings"][f"matmul_tflops_{p}"] > 0 for p in ("fp32", "tf32", "bf16"))
    assert result["ceilings"]["copy_gbps"] > 0
    from paperlib.experiments.dryrun.dryrun import STAGES

    rows = {row["stage"]: row for row in result["workloads"]}
    assert set(rows) == set(STAGES) and not [r for r in result["not_timed"] if r["stage"] in rows
                                             and r["workload"] == rows[r["stage"]]["workload"]]
    for stage, row in rows.items():
        assert row["status"] == "timed", (stage, row)
        assert row["step_s"] > 0 and row["tokens_per_s"] > 0 and row["kernels_per_step"] > 0
        assert row["predicted_kernels"] > 0 and row["mfu"] > 0, row
        assert stage in out
    assert rows["lm_ptb"]["reference"].startswith("nn.LSTM 2x") and rows["lm_ptb"]["over_reference"] > 0
    # the first timed workload timed once more at the end (check mode: one), the others once
    first, *others = result["workloads"]
    assert first["step_s_again"] > 0 and first["step_s_again_spread"] >= 0
    assert not [r for r in others if "step_s_again" in r or "again_error" in r]
    assert "reference" not in rows["micmco_synthetic"]
    assert result["compile"] == [{"mode": "max-autotune", "stage": "lm_ptb", "workload": "lstm",
                                  "status": "not timed: budget (compiling takes >= 400 s)"}]
    assert [row["curve"] for row in result["stacked"]] == ["dreg16_renyi.shared", "dreg1.train"]
    for row in result["stacked"]:
        assert row["status"] == "timed" and row["separate_step_s"] > 0 and row["samples"] in (16, 1)
        assert [s["trials"] for s in row["stacks"]] == [1, 2] and all(s["step_s"] > 0 for s in row["stacks"])
        # the speed-up is rounded to 3 decimals: within half a unit of the last one, or 1% (small ones on a busy CPU)
        assert all(s["speedup"] == pytest.approx(s["trials"] * row["separate_step_s"] / s["step_s"], rel=1e-2,
                                                 abs=5e-4) for s in row["stacks"])
        # each stack again as a replayed graph: two eager warm-up steps, the capture, then the timed replay
        assert all(s["graph_steps"] == {"eager": 2, "replayed": 2, "captures": 1} and s["graph_step_s"] > 0
                   for s in row["stacks"])
    assert "stacked dreg16_renyi.shared" in out and "as a CUDA graph" in out
    # tuning_ptb's first workload trained by 1 and 2 processes at once: each process counted its own steps
    concurrent = result["concurrent"]
    assert concurrent["stage"] == "tuning_ptb" and [r["processes"] for r in concurrent["rows"]] == [1, 2]
    for row in concurrent["rows"]:
        assert row["status"] == "timed", row
        assert len(row["per_process_steps_per_s"]) == row["processes"] and min(row["per_process_steps_per_s"]) > 0
        assert row["steps_per_s"] == pytest.approx(sum(row["per_process_steps_per_s"]), abs=0.01)
        assert row["speedup"] == pytest.approx(row["steps_per_s"] / concurrent["rows"][0]["steps_per_s"], rel=1e-2)
    assert "concurrent processes, tuning_ptb's first workload: 1: " in out
    # one evaluation pass per stage whose evaluation the dry run counts, timed per unit beside the count's prediction
    from paperlib.experiments.dryrun.evaluation_plans import EVALUATIONS

    passes = {row["stage"]: row for row in result["evaluations"]}
    assert set(passes) == set(EVALUATIONS)
    for stage, row in passes.items():  # timed, or a difference the busy CPU's noise hides (said so, not claimed)
        assert row["status"] in ("timed", "unresolved"), (stage, row)
        assert row["predicted_unit_s"] > 0 and row["kernels_per_unit"] > 0 and row["units_timed"]
        assert (row["status"] == "timed") == (row.get("unit_s", 0) > 0)
        assert f"evaluation {stage}:{row['workload']}" in out


def test_the_device_script_reads_junit_plans_round_robin_and_names_what_the_budget_left(tmp_path):
    gpu = _gpu_module()
    (tmp_path / "r.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.a" name="ok"/>'
        '<testcase classname="tests.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="tests.b" name="skip"><skipped/></testcase>'
        '<testcase classname="tests.b" name="broken"><error message="y"/></testcase></testsuite></testsuites>')
    assert gpu.junit_counts(tmp_path / "r.xml") == {"passed": 1, "failed": 1, "errors": 1, "skipped": 1,
                                                    "failing": ["tests.a::bad", "tests.b::broken"]}
    from paperlib.experiments.common.config import load_params

    order = gpu.plan(["lm_ptb", "averaging_ptb"], load_params(), "smoke", lambda n: 2, "fp32", None)
    assert [(s, w.name) for s, w in order][:3] == [("lm_ptb", "lstm"), ("averaging_ptb", "main"),
                                                   ("lm_ptb", "mogrifier_lstm")]
    import time

    import torch

    measured, left = gpu.measure_workloads(order, torch.device("cpu"), time.monotonic() - 1, 0, 1, None, "fp32", 1.0)
    assert measured == [] and [r["workload"] for r in left] == [w.name for _, w in order]
    assert {r["reason"] for r in left} == {"budget"}


def test_the_readme_shows_the_newest_gpu_measurement_or_says_there_is_none(tmp_path):
    """paperlib index --readme fills docs/gpu.md's GPU block from the newest benchmarks/results/gpu-*.json (by the
    date in its name): the card, the ceilings, the test outcome and one row per workload, a workload that was not
    timed named as such; with no measurement the block says every GPU number is the dry run's estimate."""
    import json

    from paperlib.compendium.gpu_measurements import (END, ESTIMATE_END, ESTIMATE_START, GPU_ESTIMATE_END,
                                                      GPU_ESTIMATE_START, START, newest, readme_with_measurements)

    readme = (f"# x\n{ESTIMATE_START}\nold table\n{ESTIMATE_END}\n{GPU_ESTIMATE_START}\nold gpu table\n"
              f"{GPU_ESTIMATE_END}\n{START}\nold text\n{END}\nrest\n")
    workload = {"parameters": 21_400_000, "flops_per_step": 9.21e12, "kernels_per_step": 21_372, "steps_per_run": 100,
                "runs": 3, "bound": "launch", "peak_memory_bytes": 2**30}
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "dryrun.json").write_text(json.dumps({"assumptions": {"precision": "tf32", "profile": "paper", "max_length": None}, "stages": {
        "lm_ptb": {"gpu_hours": 9.4, "training_hours": 8.1, "evaluation_hours": 1.3, "peak_memory_bytes": 19.7 * 2**30,
                   "workloads": {"lstm": workload, "big": {**workload, "parameters": 23_100_000, "bound": "compute",
                                                           "flops_per_step": 1e9, "steps_per_run": 283_000, "runs": 1}},
                   "evaluations": {"lstm: validation": {"flops_per_pass": 1e9, "kernels_per_pass": 100,
                                                        "passes": 10}}},
        "music": {"gpu_hours": 1_200.04, "training_hours": 1_200.04, "evaluation_hours": 0.0,
                  "peak_memory_bytes": 2**29, "workloads": {"nade": workload}, "evaluations": {}}}}))
    (tmp_path / "results" / "dryrun_gpu.json").write_text(json.dumps({"assumptions": {"precision": "tf32", "profile": "paper", "max_length": None}, "stages": {  # the gpu profile's, its own table
        "music": {"gpu_hours": 0.25, "training_hours": 0.25, "evaluation_hours": 0.0, "peak_memory_bytes": 2**29,
                  "workloads": {"nade": workload}, "evaluations": {}}}}))
    assert "the dry run's estimate" in readme_with_measurements(readme, tmp_path) and newest(tmp_path) is None
    table = readme_with_measurements(readme, tmp_path)
    assert "old table" not in table and "| **total** | | | | | | | | **1,208** | **1** | **1,209** |" in table
    gpu_table = table.split(GPU_ESTIMATE_START)[1].split(GPU_ESTIMATE_END)[0]
    assert "old gpu table" not in table and "| music | 1 |" in gpu_table
    assert "| **total** | | | | | | | | **0.2** | **0.0** | **0.2** |" in gpu_table
    assert "| lm_ptb | 2 | 21.4M–23.1M | 19.7 GiB | 9.21T | 21,372 | 0.283M | compute, launch | 8.1 | 1.3 | 9.4 |" in table
    # a stage whose evaluation the dry run does not count says so rather than showing zero hours
    assert "| music | 1 | 21.4M | 0.50 GiB | 9.21T | 21,372 | 0.0003M | launch | 1,200.0 | not counted | 1,200.0 |" in table
    assert "The largest step needs 19.7 GiB (lm_ptb)." in table
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    row = {"stage": "lm_ptb", "workload": "lstm", "batch": "64", "length": 70, "status": "timed", "step_s": 0.0123,
           "predicted_step_s": 0.0307, "measured_over_predicted": 0.4, "tokens_per_s": 364_000.0, "mfu": 0.21,
           "kernels_per_step": 5000, "predicted_kernels": 6135, "over_reference": 0.85, "peak_memory_gib": 3.2}
    result = {"environment": {"card": "NVIDIA H200", "driver": "580.1", "torch": "2.11.0", "cuda": "13.0"},
              "ceilings": {"matmul_tflops_fp32": 51.0, "matmul_tflops_tf32": 370.0, "matmul_tflops_bf16": 760.0,
                           "copy_gbps": 4300.0}, "profile": "paper", "precision": "tf32",
              "tests": {"passed": 950, "failed": 1, "errors": 0, "skipped": 12},
              "workloads": [row, {**row, "workload": "mogrifier_lstm", "status": "out of memory"}],
              "evaluations": [{"stage": "dyneval", "workload": "ptb: sgd, validation", "unit": "segment 1x5",
                               "status": "timed", "unit_s": 0.0004, "predicted_unit_s": 0.000225,
                               "measured_over_predicted": 1.778, "kernels_per_unit": 45},
                              {"stage": "dyneval_char", "workload": "transformer: sgd, validation",
                               "unit": "segment 1x20", "status": "out of memory"}],
              "not_timed": [{"stage": "reverse_copy", "workload": "lstm L=50", "reason": "budget"}],
              "stacked": [{"curve": "dreg16_renyi.shared", "hidden": 128, "vocab": 10000, "batch": 64, "samples": 16,
                           "status": "timed", "separate_step_s": 0.05,
                           "stacks": [{"trials": 4, "status": "timed", "step_s": 0.08, "speedup": 2.5,
                                       "peak_memory_gib": 9.5},
                                      {"trials": 12, "status": "out of memory"}]}],
              "concurrent": {"stage": "tuning_ptb", "seconds": 4.0, "rows": [
                  {"processes": 1, "status": "timed", "steps_per_s": 30.0, "speedup": 1.0},
                  {"processes": 2, "status": "timed", "steps_per_s": 51.0, "speedup": 1.7},
                  {"processes": 4, "status": "not timed: budget"}]}}
    (folder / "gpu-nvidia-h200-2026-11-01.json").write_text(json.dumps({**result, "precision": "bf16"}))
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(result))
    text = readme_with_measurements(readme, tmp_path)
    assert "old text" not in text and text.endswith(f"{END}\nrest\n")
    assert "GPU-hours on the NVIDIA H200, calibrated |" in text  # its FLOPs from the dry run's counts of lm_ptb lstm
    assert "(../benchmarks/results/gpu-nvidia-h200-2026-12-01.json)" in text and "at tf32" in text and "NVIDIA H200" in text
    assert "950 passed, 1 failed" in text and "370 (tf32)" in text
    assert "| dyneval | ptb: sgd, validation | segment 1x5 | 0.400 | 0.225 | 1.78 | 45 |" in text
    assert "| dyneval_char | transformer: sgd, validation | segment 1x20 | out of memory | | | |" in text
    assert "| lm_ptb | lstm | 64 × 70 | 12.30 | 30.70 | 0.40 | 364,000 | 0.210 | 5,000 (6,135) | 0.85 | 3.20 |" in text
    assert "| lm_ptb | mogrifier_lstm | 64 × 70 | out of memory |" in text
    assert "Not timed within the run's budget: 1 workloads (reverse_copy)" in text
    assert "| dreg16_renyi.shared | 128 × 10,000 × 64 × 16 | 50.00 | 4 | 80.00 | 2.50× | 9.50 |" in text
    assert "| dreg16_renyi.shared | 128 × 10,000 × 64 × 16 | 50.00 | 12 | out of memory | | |" in text
    assert "Processes training tuning_ptb's first workload at once on the one card (each for 4 s)" in text
    assert "| 2 | 51.00 | 1.70× |" in text and "| 4 | not timed: budget | |" in text
    # a repeat on the same card at the same precision: how far the step times of the workloads timed in both moved
    assert "Against the earlier measurement" not in text  # the earlier one of this card ran at bf16
    (folder / "gpu-nvidia-h200-2026-10-01.json").write_text(json.dumps(result))
    text = readme_with_measurements(readme, tmp_path)
    assert ("Against the earlier measurement of this card at tf32 (`gpu-nvidia-h200-2026-10-01.json`): 1 workloads "
            "timed in both, step times within 0.0% (largest change +0.0%, lm_ptb lstm); they repeat within 10%.") in text
    slower = {**result, "workloads": [{**row, "step_s": 0.0100}]}
    (folder / "gpu-nvidia-h200-2026-11-01.json").write_text(json.dumps(slower))
    (folder / "gpu-nvidia-h100-2026-11-20.json").write_text(json.dumps(result))  # another card: not compared
    text = readme_with_measurements(readme, tmp_path)
    assert "(`gpu-nvidia-h200-2026-11-01.json`): 1 workloads timed in both, step times within 23.0% (largest change " \
           "+23.0%, lm_ptb lstm); not within 10%." in text


@pytest.mark.cuda
def test_a_training_step_captured_as_a_cuda_graph_trains_like_eager_steps():
    """benchmarks/gpu.py --graphs: the warm-up steps and then graph replays update a model as the same number of
    eager steps do, on fixed tokens without dropout. Not bitwise: the capturable optimizer computes Adam's bias
    corrections with device tensors instead of Python floats (a few ulps per step); 7 steps of a 16-unit LSTM stay
    far inside rtol 1e-4."""
    import torch

    from paperlib.experiments.dryrun.dryrun import Workload
    from paperlib.models import build_lm, multi_sample_loss

    gpu = _gpu_module()
    device = torch.device("cuda")
    tokens = torch.randint(50, (4, 9), generator=torch.Generator().manual_seed(0)).to(device)

    def backward(model, length, device):
        loss, _ = multi_sample_loss(model, tokens[:, :-1], tokens[:, 1:], 1)
        loss.backward()

    def make():
        torch.manual_seed(0)
        return build_lm("lstm", 50, 16, 1)

    workload = Workload("tiny", make, backward, lambda m: torch.optim.Adam(m.parameters(), lr=1e-2), 1, 8,
                        clip_norm=1.0)
    eager = gpu.build(workload, device)
    step = gpu.step_of(workload, eager, device)
    for _ in range(3 + 4):
        step()
    graphed = gpu.build(workload, device)
    replay = gpu.graphed_step(workload, graphed, device, warmup=3)
    for _ in range(4):
        replay()
    torch.cuda.synchronize()
    for a, b in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_a_cut_off_device_test_run_still_names_its_failures_and_leaves_no_process_behind(tmp_path):
    """The unit suite on a GPU runs inside a time limit; a run killed there writes no JUnit report, so each failure
    is logged as it happens, and the whole process group (pytest-xdist's workers there; here a child process the
    test starts) is ended at the limit."""
    from pathlib import Path

    gpu = _gpu_module()
    pid_file = tmp_path / "pid"
    (tmp_path / "test_cut.py").write_text(
        "import subprocess, time\n\n"
        "def test_a_failure():\n    assert 1 + 1 == 3, 'a marked failure'\n\n"
        "def test_that_outlives_the_limit():\n    child = subprocess.Popen(['sleep', '300'])\n"
        f"    open({str(pid_file)!r}, 'w').write(str(child.pid))\n    time.sleep(300)\n")
    out = tmp_path / "out"
    out.mkdir()
    result = gpu.run_tests(out, 15.0, [str(tmp_path / "test_cut.py")], gpu.torch.device("cpu"))
    assert result["exit"] == "timed out" and result["limit_s"] == 15.0 and result["seconds"] < 45, result
    assert [t.rsplit("::", 1)[1] for t in result["failing"]] == ["test_a_failure"], result
    (failure,) = result["failures"]
    assert failure["when"] == "call" and "a marked failure" in failure["message"], failure
    assert not (out / "pytest-junit.xml").exists()
    from paperlib.compendium.gpu_measurements import _tests_sentence

    assert _tests_sentence(result).startswith("Unit suite on CUDA: cut off at its 15 s limit before the end; 1 test had "
                                              "failed by then. Failing: `"), _tests_sentence(result)
    child = int(pid_file.read_text())
    stat = Path(f"/proc/{child}/stat")  # gone, or a zombie its new parent has not reaped yet: not running
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X"), stat.read_text()


def test_the_device_script_makes_a_mirror_of_the_carried_corpora_that_fetching_verifies(data_root, tmp_path,
                                                                                       monkeypatch):
    """A GPU machine gets the corpora as the data stage's folders (data/raw/); the device script links them into a
    mirror laid out as the tests expect, holding only corpora fetched whole, and fetching from it verifies every
    checksum as from the project's mirror."""
    import json
    import shutil

    from paperlib.data import fetch_corpus, load_corpus
    from tests.conftest import find_mirror

    gpu = _gpu_module()
    mirror = tmp_path / "mirror"
    assert gpu.data_mirror(data_root, mirror) == ["ptb", "ptb_char", "wikitext2"]
    assert (mirror / "ptb" / "ptb.char.valid.txt").is_symlink() and (mirror / "wikitext-2").is_dir()
    assert json.loads((mirror / "MANIFEST.json").read_text())["corpora"] == ["ptb", "ptb_char", "wikitext2"]
    monkeypatch.setenv("PAPERLIB_DATA_MIRROR", str(mirror))
    assert find_mirror() == mirror
    fetched = tmp_path / "fetched"
    fetch_corpus("ptb", fetched, mirror=mirror)
    assert len(load_corpus("ptb", fetched).vocab) == 10_000
    partial = tmp_path / "partial"
    shutil.copytree(data_root / "ptb", partial / "ptb")
    (partial / "ptb" / "ptb.test.txt").unlink()
    assert gpu.data_mirror(partial, tmp_path / "none") == [] and not (tmp_path / "none").exists()
    # the tests that check the registry against the project mirror's own record of its files skip on it
    checks = ["tests/test_data_fetch.py::test_registry_pins_the_manifest_checksums",
              "tests/test_data_fetch.py::test_registry_pins_the_manifest_music_checksums"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *checks],
                          capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "PAPERLIB_DATA_MIRROR": str(mirror)})
    assert done.returncode == 0 and "2 skipped" in done.stdout and "records no files" in done.stdout, done.stdout


def test_the_device_measurements_say_whether_the_tests_that_need_corpora_ran():
    from paperlib.compendium.gpu_measurements import _tests_sentence

    counts = {"exit": 0, "passed": 3, "failed": 0, "errors": 0, "skipped": 1}
    assert _tests_sentence({**counts, "mirror": ["ptb", "wikitext2"]}).endswith(
        "The tests that need corpora read ptb, wikitext2 (carried as `data/raw/`).")
    assert _tests_sentence({**counts, "mirror": None}).endswith("skipped (no data mirror there).")
    assert _tests_sentence({**counts, "mirror": "given"}) == _tests_sentence(counts) == \
        "Unit suite on CUDA: 3 passed, 0 failed, 0 errors, 1 skipped."


def test_the_dry_run_tables_gain_a_column_recalibrated_on_the_newest_measurement(tmp_path):
    """With a GPU measurement committed, each dry-run table gets the stages' GPU-hours at the constants fitted to it:
    a compute-bound step (1 TFLOP in 0.1 s at a 100 TFLOP/s peak: MFU 0.1) and a launch-bound one (10,000 kernels in
    0.1 s: 10 us each) pin both constants on calibrate's grid, so the hours follow exactly."""
    import json

    from paperlib.compendium.gpu_measurements import (END, ESTIMATE_END, ESTIMATE_START, GPU_ESTIMATE_END,
                                                      GPU_ESTIMATE_START, START, readme_with_measurements)

    big = {"parameters": 10**7, "flops_per_step": 1e12, "kernels_per_step": 1000, "steps_per_run": 36_000, "runs": 1,
           "bound": "compute", "peak_memory_bytes": 2**30}
    small = {**big, "flops_per_step": 1e9, "kernels_per_step": 10_000, "steps_per_run": 18_000, "runs": 2,
             "bound": "launch"}
    dry = {"assumptions": {"precision": "tf32", "profile": "paper", "max_length": None}, "stages": {"lm_ptb": {
        "gpu_hours": 0.5, "training_hours": 0.5, "evaluation_hours": 0.0, "peak_memory_bytes": 2**30,
        "workloads": {"big": big, "small": small},
        "evaluations": {"validation": {"flops_per_pass": 0, "kernels_per_pass": 36_000, "passes": 10}}}}}
    (tmp_path / "results").mkdir()
    for name in ("dryrun.json", "dryrun_gpu.json"):
        (tmp_path / "results" / name).write_text(json.dumps(dry))
    timed = {"stage": "lm_ptb", "status": "timed", "batch": "64", "length": 70, "step_s": 0.1, "tokens_per_s": 44_800.0}
    measurement = {
        "environment": {"card": "NVIDIA H200", "driver": "1", "torch": "2.11.0", "cuda": "13.0"}, "profile": "paper",
        "precision": "tf32", "ceilings": {"matmul_tflops_fp32": 50.0, "matmul_tflops_tf32": 100.0,
                                          "matmul_tflops_bf16": 200.0, "copy_gbps": 1000.0},
        "workloads": [{**timed, "workload": "big", "flops_per_step": 1e12, "predicted_kernels": 1000,
                       "kernels_per_step": 1000, "predicted_bound": "compute"},
                      {**timed, "workload": "small", "flops_per_step": 1e9, "predicted_kernels": 10_000,
                       "kernels_per_step": 10_000, "predicted_bound": "launch"}]}
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(measurement))
    readme = f"{ESTIMATE_START}\nold\n{ESTIMATE_END}\n{GPU_ESTIMATE_START}\nold\n{GPU_ESTIMATE_END}\n{START}\n{END}\n"
    text = readme_with_measurements(readme, tmp_path)
    for table in (text.split(ESTIMATE_START)[1].split(ESTIMATE_END)[0],
                  text.split(GPU_ESTIMATE_START)[1].split(GPU_ESTIMATE_END)[0]):
        assert "| GPU-hours | GPU-hours on the NVIDIA H200, calibrated |" in table
        # 36,000 steps x 0.1 s twice, plus 10 passes of 36,000 kernels x 10 us (0.001 h)
        assert "| 0.5 | 2.0 |" in table and "| **total** | | | | | | | | **0.5** | **0.0** | **0.5** | **2.0** |" in table
        assert "MFU (0.1) and the time per counted kernel (10 µs)" in table
        assert "comes within 1× of every one of them (training steps 1×; the goal is 1.5×)." in table
    # the dry run's current counts replace those the measurement recorded: a measurement that recorded none still
    # calibrates on the workloads the dry run has; one that matches none of them recalibrates nothing
    bare = {**measurement, "workloads": [{k: v for k, v in r.items() if k not in ("flops_per_step", "predicted_kernels")}
                                         for r in measurement["workloads"]]}
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(bare))
    assert "MFU (0.1) and the time per counted kernel (10 µs)" in readme_with_measurements(readme, tmp_path)
    cut = {**dry, "assumptions": {**dry["assumptions"], "max_length": 2}}  # counts of cut sequences are not used
    (tmp_path / "results" / "dryrun.json").write_text(json.dumps(cut))
    assert "nothing recalibrates these estimates" in readme_with_measurements(readme, tmp_path)
    (tmp_path / "results" / "dryrun.json").write_text(json.dumps(dry))
    bare["workloads"] = [{**r, "stage": "music"} for r in bare["workloads"]]
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(bare))
    assert "timed no step with a dry-run prediction, so nothing recalibrates these estimates" in \
        readme_with_measurements(readme, tmp_path)
    # two launch-bound steps at 10 and 40 us per counted kernel (the second launched twice what the dry run counts):
    # no one time fits both (the best is 2x off each), and the paragraph says so, with both ends per launched kernel
    # and the step that launched most beyond the count
    measurement["workloads"].append({**measurement["workloads"][1], "workload": "tiny", "flops_per_step": 1e6,
                                     "step_s": 0.2, "kernels_per_step": 10_000, "predicted_kernels": 5_000})
    dry["stages"]["lm_ptb"]["workloads"]["tiny"] = {**small, "flops_per_step": 1e6, "kernels_per_step": 5_000}
    (tmp_path / "results" / "dryrun.json").write_text(json.dumps(dry))
    measurement["workloads"][1]["predicted_bound"] = "compute"  # recorded so then; the current counts say launch
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(measurement))
    text = readme_with_measurements(readme, tmp_path)
    assert re.search(r"comes within 2(\.\d+)?× of every one of them \(training steps 2(\.\d+)?×; the goal is 1\.5×\): "
                     r"one time per kernel cannot fit them all, since a launch-bound step measured 10 µs per launched "
                     r"kernel \(lm_ptb small\) to 20 µs \(lm_ptb tiny\), and the dry run's kernel counts are off by up to "
                     r"2× \(lm_ptb tiny: 10,000 launched, 5,000 counted\)\.", text), text


def test_steps_of_the_same_work_set_a_floor_under_the_calibrations_fit():
    """Two timed steps that launched the same kernels at the same FLOPs (within 1%) but took 0.1 and 0.2 s: no model
    of counts predicts them apart, so the best it can do is sqrt(2) off each; the paragraph on the fit names them.
    Steps of other work, untimed ones and a lone step set no floor; a step timed twice does."""
    from paperlib.compendium.gpu_measurements import _fit_sentence, same_work_spread

    def step(name, seconds, kernels=1000, flops=1e9, status="timed"):
        return {"stage": "lm_ptb", "workload": name, "status": status, "step_s": seconds,
                "kernels_per_step": kernels, "flops_per_step": flops, "predicted_bound": "launch"}

    rows = [step("a", 0.1), step("b", 0.2, kernels=1005, flops=1.005e9), step("c", 0.5, kernels=2000),
            step("d", 0.9, status="failed"), step("e", 0.4, flops=2e9)]
    spread = same_work_spread({"workloads": rows})
    assert spread["ratio"] == pytest.approx(2.0) and spread["floor"] == pytest.approx(2 ** 0.5)
    assert spread["fast"] == ("lm_ptb a", 0.1) and spread["slow"] == ("lm_ptb b", 0.2) and spread["steps"] == 2
    assert same_work_spread({"workloads": [rows[0], rows[2], rows[3], rows[4]]}) is None
    assert same_work_spread({"workloads": [rows[0], {**rows[1], "kernels_per_step": 1020}]}) is None  # 2% apart
    calibrated = {"card": "NVIDIA H200", "source": "gpu.json", "mfu": 0.1, "kernel_latency_us": 150.0, "kernels": {},
                  "fit": {"workloads": 3, "max_ratio": 1.6, "training_max_ratio": 1.6}}
    text = _fit_sentence(calibrated, {"workloads": rows})
    assert ("Steps the counts cannot tell apart (the same kernels launched, the same FLOPs) took 100 ms (lm_ptb a) "
            "and 200 ms (lm_ptb b) in one run, 2× apart: no model of these counts comes closer than 1.41× to "
            "both.") in text
    # a workload timed twice is the same work too, and here the farther pair
    again = [{**rows[0], "step_s_again": 0.3}, *rows[1:]]
    assert same_work_spread({"workloads": again})["ratio"] == pytest.approx(3.0)
    assert ("One step timed twice in the same run (lm_ptb a) took 100 and 300 ms, 3× apart: no model of the counts "
            "comes closer than 1.73× to both.") in _fit_sentence(calibrated, {"workloads": again})
    assert same_work_spread({"workloads": [rows[2], {**rows[4], "step_s_again": 0.5}]})["steps"] == 1
    assert "apart" not in _fit_sentence({**calibrated, "fit": {**calibrated["fit"], "max_ratio": 1.4}},
                                        {"workloads": rows})  # within the goal: no miss to explain


def test_the_device_script_times_the_trainer_against_the_graphed_trainer_at_a_workloads_shapes():
    """benchmarks/gpu.py --graphs, the stage's own loop: both trainers run at the workload's batch, length, dropout
    samples and optimizer, and after the warm-up the graphed trainer replays every timed step (on a CPU a replay
    is a call, so no speed is claimed here)."""
    import torch

    from paperlib.experiments.dryrun.dryrun import Workload
    from paperlib.models import build_lm

    gpu = _gpu_module()
    workload = Workload("tiny", lambda: build_lm("lstm", 50, 16, 1, input_dropout=0.1), lambda *a: None,
                        lambda m: torch.optim.RAdam(m.parameters(), lr=1e-3, betas=(0.0, 0.999)), 1, 8,
                        clip_norm=1.0, batch="2x4")
    row = gpu.time_trainers(workload, torch.device("cpu"), steps=5, warmup=6)
    assert row["trainer_step_s"] > 0 and row["graphed_trainer_step_s"] > 0
    assert row["graphed_trainer_steps"] == {"eager": 4, "replayed": 7, "captures": 1}  # 5 timed, 2 of the warm-up
    not_an_lm = Workload("vae", lambda: torch.nn.Linear(2, 2), lambda *a: None,
                         lambda m: torch.optim.Adam(m.parameters()), 1, 8)
    assert gpu.time_trainers(not_an_lm, torch.device("cpu")) == {}


def test_the_dry_run_tables_gain_a_column_with_the_language_model_steps_replayed_as_cuda_graphs(tmp_path):
    """When the measurement also replayed a stage's steps as CUDA graphs, one more column re-prices that stage's
    training at constants fitted to the replays (here 10,000 kernels in 0.01 s: 1 us each, pinned on calibrate's
    grid), its evaluation and the other stages as in the calibrated column."""
    import json

    from paperlib.compendium.gpu_measurements import (END, ESTIMATE_END, ESTIMATE_START, GPU_ESTIMATE_END,
                                                      GPU_ESTIMATE_START, START, readme_with_measurements)

    readme = f"{ESTIMATE_START}\nold\n{ESTIMATE_END}\n{GPU_ESTIMATE_START}\nold\n{GPU_ESTIMATE_END}\n{START}\n{END}\n"

    small = {"parameters": 10**7, "flops_per_step": 1e9, "kernels_per_step": 10_000, "steps_per_run": 36_000,
             "runs": 1, "bound": "launch", "peak_memory_bytes": 2**30}
    stage = {"gpu_hours": 0.5, "training_hours": 0.5, "evaluation_hours": 0.0, "peak_memory_bytes": 2**30,
             "workloads": {"small": small}, "evaluations": {}}
    dry = {"assumptions": {"precision": "tf32", "profile": "paper", "max_length": None},
           "stages": {"lm_ptb": stage, "music": stage}}
    (tmp_path / "results").mkdir()
    for name in ("dryrun.json", "dryrun_gpu.json"):
        (tmp_path / "results" / name).write_text(json.dumps(dry))
    timed = {"status": "timed", "batch": "64", "length": 70, "workload": "small", "flops_per_step": 1e9,
             "predicted_kernels": 10_000, "kernels_per_step": 10_000, "predicted_bound": "launch", "step_s": 0.1,
             "tokens_per_s": 44_800.0}
    measurement = {
        "environment": {"card": "NVIDIA H200", "driver": "1", "torch": "2.11.0", "cuda": "13.0"}, "profile": "paper",
        "precision": "tf32", "ceilings": {"matmul_tflops_fp32": 50.0, "matmul_tflops_tf32": 100.0,
                                          "matmul_tflops_bf16": 200.0, "copy_gbps": 1000.0},
        "workloads": [{**timed, "stage": "lm_ptb", "graph_step_s": 0.01}, {**timed, "stage": "music"}]}
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(measurement))
    table = readme_with_measurements(readme, tmp_path).split(ESTIMATE_START)[1].split(ESTIMATE_END)[0]
    assert "calibrated | GPU-hours on the NVIDIA H200, language-model training steps as CUDA graphs (estimate) |" \
        in table
    # 36,000 steps x 0.1 s eager = 1 h; replayed: 36,000 x 10,000 x 1 us = 0.1 h; music keeps its hour
    assert "| lm_ptb |" in table and "| 0.5 | 1.0 | 0.1 |" in table and "| 0.5 | 1.0 | 1.0 |" in table
    assert "| **1.0** | **2.0** | **1.1** |" in table
    assert "every training step of lm_ptb is replayed as one CUDA graph" in table
    assert ("fitted to those 1 replays (within 1× of each; 1 µs per counted kernel" in table
            and "every other stage as before: 1.0 → 0.1 GPU-hours for those stages" in table)
    measurement["workloads"][0].pop("graph_step_s")  # nothing replayed: no such column
    (folder / "gpu-nvidia-h200-2026-12-01.json").write_text(json.dumps(measurement))
    assert "as CUDA graphs" not in readme_with_measurements(readme, tmp_path)
