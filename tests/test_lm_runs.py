"""A language model's training run done once (paperlib/experiments/common/lm_runs.py)."""

import json
from types import SimpleNamespace

import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.lm_runs import count_parameters, train_or_load
from paperlib.models import build_lm
from paperlib.train import TrainConfig


def test_train_or_load_trains_once_reads_the_run_back_and_retrains_for_other_settings(tmp_path):
    tokens = torch.Generator().manual_seed(0)
    corpus = SimpleNamespace(train=torch.randint(9, (400,), generator=tokens),
                             valid=torch.randint(9, (60,), generator=tokens), vocab=[str(i) for i in range(9)])
    spec = {"cell": "lstm", "hidden_size": 8, "num_layers": 1}

    def build():
        torch.manual_seed(0)
        return build_lm(spec["cell"], 9, spec["hidden_size"], spec["num_layers"])

    def run(config):
        return train_or_load(build(), corpus, "toy", spec, config, tmp_path / "run", torch.device("cpu"), False,
                             logs.append, stage="toy", name="model", summarize=lambda result: {"tokens": result.tokens})

    logs: list[str] = []
    config = TrainConfig(batch_size=4, bptt=5, max_steps=4, eval_every=2, eval_batch_size=2, seed=0)
    model, info = run(config)
    assert logs == [f"toy: training model ({info['parameters']:,} parameters)"]
    assert set(info) == {"parameters", "train_steps", "tokens", "rollbacks", "train_seconds"}
    assert info["parameters"] == count_parameters(model)
    identity = json.loads((tmp_path / "run" / "spec.json").read_text())  # what a later call must match to reuse
    assert {k: identity[k] for k in ("model", "corpus", "vocab_size", "code")} == {
        "model": spec, "corpus": "toy", "vocab_size": 9, "code": code_hash("paperlib.train", "paperlib.models")}
    assert identity["train"]["max_steps"] == 4 and identity["train"]["seed"] == 0
    assert info["train_steps"] == 4 and info["tokens"] == 4 * 4 * 5 and not model.training
    assert json.loads((tmp_path / "run" / "done.json").read_text()) == info
    loaded, again = run(config)  # the same settings: read back, not trained
    assert again == info and logs[-1].startswith("toy: model loaded from") and not loaded.training
    trained, read = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(trained[name], read[name]) for name in trained)
    initial = build().state_dict()
    assert not all(torch.equal(trained[name], initial[name]) for name in trained)  # the loaded weights are trained
    _, fresh = run(TrainConfig(**{**vars(config), "max_steps": 2}))  # other settings: the folder is redone
    assert fresh["train_steps"] == 2 and logs[-1].startswith("toy: training model")


def test_count_parameters_counts_tied_weights_once():
    tied = build_lm("lstm", 9, 8, 1, tie_embeddings=True)
    untied = build_lm("lstm", 9, 8, 1, tie_embeddings=False)
    assert count_parameters(untied) - count_parameters(tied) == 9 * 8  # the decoder's own matrix
    assert count_parameters(untied) == sum(p.numel() for p in untied.parameters())
