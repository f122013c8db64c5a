"""Recipe search: the sampled space, dropout scaling, and a study whose seconds become calibrated step budgets."""

import json
import math

import optuna
import pytest
import yaml

from paperlib.experiments.common.config import PROFILES
from paperlib.experiments.language_models.recipe_search import MAX_DROPOUT, apply_recipe, sample_recipe
from tests.conftest import REPO

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_conditional_choices_appear_only_where_they_mean_something():
    sgd = sample_recipe(optuna.trial.FixedTrial({"batch_size": 20, "bptt": 35, "optimizer": "sgd", "lr_sgd": 20.0,
                                                 "schedule": "constant", "dropout_scale": 1.0,
                                                 "embedding_init": "normal"}))
    assert sgd["beta1"] == 0.0 and sgd["lr"] == 20.0 and sgd["warmup"] == 0.0
    adam = sample_recipe(optuna.trial.FixedTrial({"batch_size": 32, "bptt": 70, "optimizer": "adam", "lr_adam": 2e-3,
                                                  "beta1": 0.9, "schedule": "cosine", "warmup": 0.05,
                                                  "dropout_scale": 0.5, "embedding_init": "uniform",
                                                  "hidden_size": 192}), hidden_sizes=(192, 256))
    assert adam == {"batch_size": 32, "bptt": 70, "optimizer": "adam", "lr": 2e-3, "beta1": 0.9,
                    "schedule": "cosine", "warmup": 0.05, "dropout_scale": 0.5, "embedding_init": "uniform",
                    "hidden_size": 192}


def test_a_recipe_scales_every_dropout_caps_it_and_replaces_the_training_fields():
    spec = {"cell": "lstm", "hidden_size": 256, "num_layers": 2,
            "options": {"input_dropout": 0.2, "state_dropout": 0.6, "chrono_t_max": 70.0}}
    train = {"batch_size": 32, "bptt": 70, "optimizer": "radam", "lr": 3e-3, "eval_every": 75}
    recipe = {"batch_size": 20, "bptt": 35, "optimizer": "adam", "lr": 2e-3, "beta1": 0.9, "schedule": "linear",
              "warmup": 0.0, "dropout_scale": 2.0, "embedding_init": "uniform"}
    new_spec, new_train = apply_recipe(spec, train, recipe)
    assert new_spec["options"] == {"input_dropout": 0.4, "state_dropout": MAX_DROPOUT, "chrono_t_max": 70.0,
                                   "embedding_init": "uniform"}
    assert new_spec["hidden_size"] == 256 and spec["options"]["input_dropout"] == 0.2  # the input is not changed
    assert new_train == {"batch_size": 20, "bptt": 35, "optimizer": "adam", "lr": 2e-3, "beta1": 0.9,
                         "schedule": "linear", "warmup": 0.0, "eval_every": 75}


def test_a_study_times_each_shape_once_gives_every_trial_its_step_budget_and_resumes(data_root, tmp_path, monkeypatch):
    from paperlib.compendium.cli import main

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    tiny = {"corpus": "ptb", "seeds": [1], "mc_samples": 2, "threads": 1, "eval_tokens": 2000,
            "models": {"lstm": {"cell": "lstm", "hidden_size": 8, "num_layers": 1, "options": {"input_dropout": 0.1}}},
            "train": {"batch_size": 8, "bptt": 10, "max_steps": 2, "eval_every": 50, "eval_batch_size": 4,
                      "eval_max_windows": 2}}
    params["experiments"]["lm_ptb"] = {p: tiny for p in PROFILES}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(data_root)
    monkeypatch.setenv("PAPERLIB_ROOT", str(tmp_path))
    timing_file = tmp_path / "timing.json"
    assert main(["recipes", "time", "lm_ptb", "lstm", "--profile", "smoke", "--out", str(timing_file)]) == 0
    out = tmp_path / "summary.json"
    first = {"batch_size": 16, "bptt": 35, "optimizer": "adam", "lr_adam": 3e-3, "beta1": 0.9, "schedule": "cosine",
             "warmup": 0.0, "dropout_scale": 1.0, "embedding_init": "uniform"}
    argv = ["recipes", "search", "lm_ptb", "lstm", "--seconds", "0.3", "--profile", "smoke", "--out", str(out),
            "--enqueue", json.dumps(first), "--enqueue", json.dumps(first), "--timing", str(timing_file), "--quiet"]
    assert main([*argv, "--trials", "2"]) == 0
    summary = json.loads(out.read_text())
    timing = summary["step_seconds"]
    assert sorted(timing) == sorted(f"8/{b}/{t}" for b in (16, 20, 32, 64) for t in (35, 70))
    assert timing == json.loads(timing_file.read_text())["step_seconds"]  # the table made apart from the search
    trials = summary["trials"]
    assert [t["recipe"]["batch_size"] for t in trials] == [16, 16]
    # seconds became steps through the timing table, so the same recipe gives the same score however busy the machine
    assert trials[0]["steps"] == trials[1]["steps"] == max(1, round(0.3 / timing["8/16/35"]))
    assert trials[0]["valid_ppl"] == trials[1]["valid_ppl"]
    assert summary["best"] == trials[0] and summary["unit"] == "valid_ppl"
    # resuming adds a sampled trial and keeps the timing
    assert main([*argv, "--trials", "3"]) == 0
    again = json.loads(out.read_text())
    assert len(again["trials"]) == 3 and again["step_seconds"] == timing
    assert again["best"]["valid_ppl"] == min(t["valid_ppl"] for t in again["trials"] if t["valid_ppl"] is not None)
    # each call of the one-trial loop reseeds its sampler by the trials so far: a fourth call samples anew instead of
    # repeating the third trial's random recipe
    assert main([*argv, "--trials", "4"]) == 0
    sampled = [t["recipe"] for t in sorted(json.loads(out.read_text())["trials"], key=lambda t: t["number"])][2:]
    assert len(sampled) == 2 and sampled[0] != sampled[1]
    # a budget in tokens: steps = tokens / (batch x BPTT), nothing timed
    tokens = tmp_path / "tokens.json"
    assert main(["recipes", "search", "lm_ptb", "lstm", "--tokens", "11200", "--profile", "smoke", "--trials", "1",
                 "--out", str(tokens), "--enqueue", json.dumps(first), "--quiet"]) == 0
    by_tokens = json.loads(tokens.read_text())
    assert by_tokens["step_seconds"] is None and by_tokens["trials"][0]["steps"] == 11200 // (16 * 35)
    # a second worker joins while another holds a running trial: one_more runs exactly one trial of its own
    # (the CLI's loop), instead of waiting for the other worker's trial to finish
    from paperlib.experiments.language_models.recipe_search import search
    from paperlib.experiments.common.config import repo_root
    from paperlib.tuning import default_storage, open_study, trial_counts

    name = by_tokens["study"]
    open_study(name, default_storage(name, repo_root())).ask()  # the trial another worker is running
    study = search("lm_ptb", "lstm", None, 10, profile="smoke", tokens=11200, study_name=by_tokens["study"],
                   one_more=True, progress=False)
    assert trial_counts(study) == {"COMPLETE": 2, "RUNNING": 1}


def test_searching_a_model_the_experiment_lacks_or_without_its_timings_is_a_clear_error():
    from paperlib.experiments.language_models.recipe_search import search

    with pytest.raises(ValueError, match="has no model 'gpt'; it has lstm"):
        search("lm_ptb", "gpt", 1.0, 1, profile="smoke")
    with pytest.raises(ValueError, match="either in seconds or in tokens"):
        search("lm_ptb", "lstm", 1.0, 1, profile="smoke", tokens=1000)
    with pytest.raises(ValueError, match="the timing table lacks shapes"):
        search("lm_ptb", "lstm", 1.0, 1, profile="smoke", step_seconds={"16/16/35": 0.1}, study_name="never-made")


def test_the_byte_experiment_is_searched_on_its_bytes_and_scored_in_bits_per_byte(data_root, tmp_path, monkeypatch):
    """lm_wt2_bytes trains on raw UTF-8 bytes (vocabulary 256), not WikiText-2's words: a study of it must see the
    stage's byte streams, score the stage's validation prefix, and report bits per byte."""
    from paperlib.experiments.common.config import experiment_params
    from paperlib.experiments.language_models.lm_wt2_bytes import load_bytes
    from paperlib.experiments.language_models.recipe_search import level_of, search_data, summarise

    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(data_root)
    monkeypatch.setenv("PAPERLIB_ROOT", str(tmp_path))
    settings = experiment_params("lm_wt2_bytes", "smoke")
    data = search_data("lm_wt2_bytes", settings, tmp_path)
    corpus = load_bytes("wikitext2", data_root)
    assert data.level == "byte" and data.vocab_size == 256
    assert data.train.equal(corpus.split("train")) and data.valid.equal(corpus.split("valid")[: settings.eval_tokens])
    assert int(data.train.max()) < 256 and data.train.numel() == len(corpus.raw["train"])
    # the word-level experiments keep their tokenised corpus and levels
    assert level_of("lm_ptb", "ptb") == "word" and level_of("lm_ptb_char", "ptb_char") == "char"
    words = search_data("lm_ptb", experiment_params("lm_ptb", "smoke"), tmp_path)
    assert words.level == "word" and words.vocab_size == 10000

    study = optuna.create_study()
    study.enqueue_trial({"x": 0.0})
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1) + 2.0, n_trials=1)
    summary = summarise(study, "lm_wt2_bytes", "mlstm", "byte")
    assert summary["unit"] == "valid_bpb"
    assert summary["best"]["valid_bpb"] == pytest.approx(2.0 / math.log(2))
    with pytest.raises(ValueError, match="level must be one of word, char, byte"):
        summarise(study, "lm_wt2_bytes", "mlstm", "bytes")
