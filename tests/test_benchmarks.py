"""The benchmarks run (at toy sizes, untimed): a broken benchmark is caught here, its speed is measured by hand."""

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


def test_wallclock_benchmark_prints_each_test_perplexity_and_its_ratio_to_the_tutorial(data_root):
    out = _run("lm_wallclock.py", "--seconds", "0.5", "--models", "baseline", "lstm", "--threads", "1",
               "--profile", "smoke", "--data", str(data_root))
    assert re.search(r"^baseline\s.*\s\d+\.\d\s+1\.00x\s*$", out, re.M), out
    assert re.search(rf"^lstm\s.*\s\d+\.\d\s+{RATIO}\s*$", out, re.M), out


def test_wallclock_benchmark_runs_a_model_with_a_recipe_studys_best_recipe(data_root, tmp_path):
    import json

    summary = tmp_path / "study.json"
    best = {"batch_size": 4, "bptt": 10, "optimizer": "adam", "lr": 1e-3, "beta1": 0.9, "schedule": "constant",
            "warmup": 0.0, "dropout_scale": 0.5, "embedding_init": "uniform", "hidden_size": 12}
    summary.write_text(json.dumps({"experiment": "lm_ptb", "model": "lstm", "best": {"recipe": best}}))
    out = _run("lm_wallclock.py", "--seconds", "0.5", "--models", "baseline", "--recipe", f"lstm={summary}",
               "--threads", "1", "--profile", "smoke", "--data", str(data_root))
    row = re.search(rf"^lstm \(study\)\s+([\d,]+)\s.*\s\d+\.\d\s+{RATIO}\s*$", out, re.M)
    assert row, out
    # the study's hidden size replaced the profile's (smoke lstm: H=16), so the model is smaller than the profile's
    from paperlib.experiments.config import experiment_params
    from paperlib.models import build_lm

    spec = experiment_params("lm_ptb", "smoke").models["lstm"]
    profile_size = sum(p.numel() for p in {id(p): p for p in build_lm(
        "lstm", 10000, spec["hidden_size"], spec["num_layers"], **spec["options"]).parameters()}.values())
    assert int(row[1].replace(",", "")) < profile_size
    wrong = subprocess.run([sys.executable, str(REPO / "benchmarks" / "lm_wallclock.py"), "--models", "baseline",
                            "--recipe", f"gru={summary}", "--profile", "smoke", "--data", str(data_root)],
                           capture_output=True, text=True, cwd=REPO, timeout=600)
    assert wrong.returncode != 0 and "--recipe wants MODEL=SUMMARY_JSON" in wrong.stderr
