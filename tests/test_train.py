"""The trainer: it learns, rolls back on divergence, and resumes exactly after a kill."""

import json
import math
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from paperlib.data import bptt_windows
from paperlib.models import build_lm
from paperlib.train import Trainer, TrainConfig, TrainingDiverged, CheckpointMismatch, schedule_factor
from tests.conftest import REPO
from tests.numerics import assert_bitwise

VOCAB = 17


def markov_stream(n: int, seed: int) -> torch.Tensor:
    """A first-order chain where each token has two likely successors: learnable, not trivial."""
    gen = torch.Generator().manual_seed(seed)
    ids = [0]
    for _ in range(n - 1):
        jump = 1 if torch.rand(1, generator=gen).item() < 0.7 else 5
        ids.append((ids[-1] * 3 + jump) % VOCAB)
    return torch.tensor(ids)


def tiny_model(seed=0, cell="lstm"):
    torch.manual_seed(seed)
    return build_lm(cell, VOCAB, 24, 1, input_dropout=0.1, state_dropout=0.1)


def test_training_lowers_validation_loss_and_writes_metrics(tmp_path):
    config = TrainConfig(batch_size=8, bptt=12, lr=1e-2, max_steps=60, eval_every=20, eval_batch_size=4,
                         num_samples=2, seed=1)
    trainer = Trainer(tiny_model(), markov_stream(4000, 0), markov_stream(800, 1), config, tmp_path, progress=False)
    before = trainer.validate()
    result = trainer.fit()
    assert before > math.log(VOCAB) - 0.3  # an untrained model is near uniform
    assert result.best_valid_nll < before - 0.5
    assert result.steps == 60 and result.tokens == 60 * 8 * 12
    metrics = json.loads(trainer.write_metrics().read_text())
    assert metrics["best_valid_nll"] == result.best_valid_nll
    assert [h["step"] for h in metrics["history"]] == [20, 40, 60]


def test_divergence_rolls_back_to_the_best_weights_and_lowers_the_learning_rate(tmp_path, monkeypatch):
    config = TrainConfig(batch_size=4, bptt=8, lr=1e-2, max_steps=4, eval_every=1, eval_batch_size=2,
                         divergence_threshold=0.5)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    losses = iter([2.0, 1.8, 9.0, 1.7])
    snapshots = {}
    real_evaluate = trainer._evaluate_and_checkpoint

    def scripted_evaluate():
        snapshots[trainer.step] = {k: v.clone() for k, v in trainer.model.state_dict().items()}
        real_evaluate()

    restored = {}
    real_rollback = trainer._rollback

    def spy_rollback(reason):
        real_rollback(reason)
        restored.update({k: v.clone() for k, v in trainer.model.state_dict().items()})

    monkeypatch.setattr(trainer, "validate", lambda: next(losses))
    monkeypatch.setattr(trainer, "_evaluate_and_checkpoint", scripted_evaluate)
    monkeypatch.setattr(trainer, "_rollback", spy_rollback)
    result = trainer.fit()
    assert result.rollbacks == 1
    assert result.final_lr == pytest.approx(1e-2 * 0.9)
    assert result.best_valid_nll == 1.7
    rollback = [h for h in result.history if h.get("event") == "rollback"]
    assert len(rollback) == 1 and rollback[0]["step"] == 3
    # the rollback at step 3 restored the weights evaluated at step 2, the best until then
    for k in snapshots[2]:
        assert_bitwise(restored[k], snapshots[2][k], why="a rollback copies the checkpointed weights back")
    assert not all(torch.equal(snapshots[3][k], snapshots[2][k]) for k in snapshots[2])


def test_persistent_divergence_stops_with_a_clear_message(tmp_path, monkeypatch):
    config = TrainConfig(batch_size=4, bptt=8, max_steps=50, eval_every=1, eval_batch_size=2, max_rollbacks=3)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    monkeypatch.setattr(trainer, "validate", lambda: float("nan"))
    with pytest.raises(TrainingDiverged, match=r"diverged 4 times .* lower `lr`"):
        trainer.fit()


def test_non_finite_training_loss_rolls_back_to_the_saved_best(tmp_path):
    config = TrainConfig(batch_size=4, bptt=8, lr=1e-2, max_steps=1, eval_every=10, eval_batch_size=2)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    trainer.save(trainer.best_path)  # healthy weights to roll back to
    with torch.no_grad():
        trainer.model.embedding.weight.fill_(float("nan"))
    inputs, targets = next(bptt_windows(trainer.train_stream, 8))
    loss = trainer._train_step(inputs, targets)
    assert math.isnan(loss) and trainer.rollbacks == 1
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(0.9e-2)


def test_bad_settings_are_value_errors():
    with pytest.raises(ValueError, match="valid optimizers: radam, adam, sgd"):
        TrainConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="valid schedules: constant, cosine, linear, plateau"):
        TrainConfig(schedule="step")
    with pytest.raises(ValueError, match="warmup"):
        TrainConfig(schedule="cosine", warmup=1.0)
    with pytest.raises(ValueError, match="max_seconds"):
        TrainConfig(max_seconds=0)
    with pytest.raises(ValueError, match="plain SGD takes none"):
        TrainConfig(optimizer="sgd", beta1=0.9)
    with pytest.raises(ValueError, match="bptt"):
        TrainConfig(bptt=0)


RUN = textwrap.dedent(
    """
    import json, sys, torch
    sys.path.insert(0, {repo!r})
    torch.set_num_threads(1)
    from tests.test_train import markov_stream, tiny_model
    from paperlib.averaging import build_averager
    from paperlib.train import Trainer, TrainConfig
    config = TrainConfig(batch_size=8, bptt=10, lr=5e-3, max_steps={steps}, eval_every=15, eval_batch_size=4,
                         num_samples=2, seed=3, averaging="2ta")
    model = tiny_model(7)
    monitors = {{"ema": build_averager("ema", model, 10, decay=0.9)}}
    trainer = Trainer(model, markov_stream(6000, 0), markov_stream(600, 1), config, sys.argv[1], progress=False,
                      monitors=monitors)
    result = trainer.fit(resume=len(sys.argv) > 2)
    print(json.dumps({{"best": result.best_valid_nll, "history": trainer.history,
                      "weights": sum(float(p.double().sum()) for p in trainer.model.parameters())}}))
    """
)


def _run(script, out_dir, *extra):
    return subprocess.run([sys.executable, "-c", script, str(out_dir), *extra], capture_output=True, text=True,
                          check=True, timeout=600, cwd=REPO)


def test_resume_after_kill_reaches_the_same_numbers(tmp_path):
    steps = 300
    script = RUN.format(repo=str(REPO), steps=steps)
    reference = json.loads(_run(script, tmp_path / "ref").stdout)

    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", script, str(out)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    last = out / "last.pt"
    deadline = time.time() + 300
    while not last.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed; make it longer"
    killed_at = torch.load(last, weights_only=False)["position"]["step"]
    assert 0 < killed_at < steps

    resumed = json.loads(_run(script, out, "--resume").stdout)
    assert resumed["history"] == reference["history"]
    assert resumed["best"] == reference["best"]
    assert resumed["weights"] == reference["weights"]


def test_resume_refuses_a_checkpoint_with_other_settings(tmp_path):
    config = TrainConfig(batch_size=4, bptt=8, max_steps=2, eval_every=2, eval_batch_size=2)
    Trainer(tiny_model(), markov_stream(500, 0), markov_stream(100, 1), config, tmp_path, progress=False).fit()
    other = TrainConfig(batch_size=4, bptt=8, max_steps=4, eval_every=2, eval_batch_size=2, lr=1e-4)
    trainer = Trainer(tiny_model(), markov_stream(500, 0), markov_stream(100, 1), other, tmp_path, progress=False)
    with pytest.raises(CheckpointMismatch, match="lr"):
        trainer.fit(resume=True)


def test_two_tailed_averaging_drives_evaluation_and_monitors_run_at_their_own_period(tmp_path):
    from paperlib.averaging import build_averager

    # Algorithm 1 alone (no fallback to the raw weights), so that the averages are what gets evaluated
    config = TrainConfig(batch_size=8, bptt=12, lr=1e-2, max_steps=40, eval_every=10, eval_batch_size=4,
                         averaging="2ta", averaging_options={"extensions": False})
    model = tiny_model()
    monitors = {"ta": build_averager("ta", model, 5, start=10), "2ta_fast": build_averager("2ta", model, 4)}
    trainer = Trainer(model, markov_stream(4000, 0), markov_stream(800, 1), config, tmp_path, progress=False,
                      monitors=monitors, eval_raw=True)
    trainer.fit()
    main = [h for h in trainer.history if "monitor" not in h]
    assert [h["step"] for h in main] == [10, 20, 30, 40]
    assert all(h["averaged_length"] >= 1 and "raw_valid_nll" in h for h in main)
    assert any(h["averaged_length"] > 1 for h in main)  # the average, not the raw weights, was evaluated
    assert [h["step"] for h in trainer.history if h.get("monitor") == "ta"] == [5, 10, 15, 20, 25, 30, 35, 40]
    fast = [h for h in trainer.history if h.get("monitor") == "2ta_fast"]
    assert [h["step"] for h in fast] == list(range(4, 41, 4))
    assert all(h["short_len"] <= h["long_len"] for h in fast)
    # the reported loss is the loss of the weights the averager recommends after that evaluation
    with trainer.recommended_weights():
        swapped = trainer.validate()
    # the same validation of the same weights again; abs=1e-6 (a few float32 eps of this loss) is only a margin
    assert swapped == pytest.approx(main[-1]["valid_nll"], abs=1e-6)
    assert trainer.validate() == pytest.approx(main[-1]["raw_valid_nll"], abs=1e-6)
    assert trainer.validate() != pytest.approx(swapped, abs=1e-6)


def test_early_stopping_ends_training_after_evaluations_without_improvement(tmp_path, monkeypatch):
    config = TrainConfig(batch_size=4, bptt=8, max_steps=100, eval_every=2, eval_batch_size=2, early_stopping=3)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    losses = iter([3.0, 2.0, 2.5, 2.4, 2.1, 1.0])
    monkeypatch.setattr(trainer, "validate", lambda: next(losses))
    result = trainer.fit()
    assert result.steps == 10 and result.best_valid_nll == 2.0
    with pytest.raises(ValueError, match="valid choices: none, 2ta"):
        TrainConfig(averaging="swag")


@pytest.mark.parametrize("name, cls", [("radam", torch.optim.RAdam), ("adam", torch.optim.Adam)])
def test_optimizers_are_torch_radam_and_adam_with_beta1_zero_and_l2(tmp_path, name, cls):
    config = TrainConfig(optimizer=name, lr=3e-3, weight_decay=1e-4, max_steps=1, eval_every=1, seed=0)
    trainer = Trainer(tiny_model(), markov_stream(500, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    group = trainer.optimizer.param_groups[0]
    assert type(trainer.optimizer) is cls and group["betas"] == (0.0, 0.999)  # Melis §4.4: β1 = 0
    assert group["lr"] == 3e-3 and group["weight_decay"] == 1e-4
    with pytest.raises(ValueError, match="valid optimizers: .*adam"):
        TrainConfig(optimizer="adagrad")


@pytest.mark.parametrize("clip_norm", [1e-3, 0.0])
def test_gradients_are_clipped_to_the_configured_norm(tmp_path, clip_norm):
    config = TrainConfig(batch_size=4, bptt=8, clip_norm=clip_norm, max_steps=1, eval_every=1, seed=0)
    trainer = Trainer(tiny_model(), markov_stream(500, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    inputs, targets = next(bptt_windows(trainer.train_stream, 8))  # on the trainer's device (CUDA there is one)
    trainer._train_step(inputs, targets)
    norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in trainer.model.parameters()
                                                 if p.grad is not None]))
    if clip_norm > 0:
        # the raw gradient of an untrained LM is far larger; rel=1e-4 covers clip_grad_norm_'s scale
        # clip / (norm + 1e-6) and the float32 rounding of the norms
        assert norm == pytest.approx(clip_norm, rel=1e-4)
    else:
        assert norm > 0.1


def test_a_rollback_on_a_non_finite_loss_is_no_step_and_no_iterate_and_restores_the_monitors(tmp_path, monkeypatch):
    """Melis §4.4's rollback restores the best weights; the step that blew up took no optimizer step, so it is
    not counted and the averagers (main and monitors, restored with the weights) see no new iterate."""
    import paperlib.train as train_module
    from paperlib.averaging import build_averager

    config = TrainConfig(batch_size=4, bptt=8, lr=1e-2, max_steps=6, eval_every=3, eval_batch_size=2,
                         averaging="2ta")
    model = tiny_model()
    monitor = build_averager("ema", model, 2, decay=0.5)
    trainer = Trainer(model, markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False,
                      monitors={"ema": monitor})
    calls, real_loss = {"n": 0}, train_module.multi_sample_loss

    def blows_up_on_the_fifth_call(*args, **kwargs):
        calls["n"] += 1
        loss, state = real_loss(*args, **kwargs)
        return (loss * float("nan"), state) if calls["n"] == 5 else (loss, state)

    monkeypatch.setattr(train_module, "multi_sample_loss", blows_up_on_the_fifth_call)
    optimizer_steps, real_step = {"n": 0}, trainer.optimizer.step

    def counted_step(*args, **kwargs):
        optimizer_steps["n"] += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(trainer.optimizer, "step", counted_step)
    after_rollback, real_rollback = {}, trainer._rollback

    def spy_rollback(reason):
        after_rollback["best"] = torch.load(trainer.best_path, weights_only=False)  # what it rolls back to
        real_rollback(reason)
        after_rollback.update(step=trainer.step, optimizer_steps=optimizer_steps["n"], main=trainer.averager.steps,
                              monitor=monitor.state_dict())

    monkeypatch.setattr(trainer, "_rollback", spy_rollback)
    result = trainer.fit()
    assert result.rollbacks == 1 and calls["n"] == 7  # 6 optimizer steps and the one that blew up
    assert optimizer_steps["n"] == result.steps == 6  # the step that blew up is not counted
    # the rollback at step 4 brought back the checkpoint of step 3: weights, main averager and monitor alike
    assert after_rollback["step"] == 4 and after_rollback["main"] == 3
    ema_at_best = after_rollback["best"]["monitors"]["ema"]
    assert after_rollback["monitor"]["steps"] == ema_at_best["steps"] == 3
    assert after_rollback["monitor"].keys() == ema_at_best.keys()
    # from there, one iterate per optimizer step taken (steps 5 and 6), none for the rollback itself
    taken_since = optimizer_steps["n"] - after_rollback["optimizer_steps"]
    assert taken_since == 2
    assert trainer.averager.steps == monitor.steps == 3 + taken_since
    assert [h["step"] for h in result.history if "valid_nll" in h and "monitor" not in h] == [3, 6]


def test_schedules_follow_their_closed_forms():
    # warm-up: linear from 0; cosine: (1 + cos(pi d)) / 2 of the way from 1 to final_lr; linear: 1 - d
    assert schedule_factor("cosine", 0.05, warmup=0.1) == pytest.approx(0.5)
    assert schedule_factor("cosine", 0.1, warmup=0.1) == pytest.approx(1.0)
    assert schedule_factor("cosine", 0.55, warmup=0.1, final_lr=0.2) == pytest.approx(0.2 + 0.8 * 0.5)
    assert schedule_factor("cosine", 1.0, warmup=0.1, final_lr=0.2) == pytest.approx(0.2)
    assert schedule_factor("cosine", 0.25) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert schedule_factor("linear", 0.75) == pytest.approx(0.25)
    assert schedule_factor("linear", 2.0, final_lr=0.1) == pytest.approx(0.1)  # past the budget: the floor
    assert schedule_factor("constant", 0.9) == schedule_factor("plateau", 0.9) == 1.0


def test_a_cosine_schedule_sets_each_steps_learning_rate_from_the_budget_used(tmp_path, monkeypatch):
    config = TrainConfig(batch_size=4, bptt=8, lr=1e-2, max_steps=10, eval_every=5, eval_batch_size=2,
                         schedule="cosine", warmup=0.2, final_lr=0.1)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    used = []
    step = trainer.optimizer.step

    def spy(*args, **kwargs):
        used.append(trainer._lr())
        return step(*args, **kwargs)

    monkeypatch.setattr(trainer.optimizer, "step", spy)
    trainer.fit()
    # step s (0-based) runs with the factor at s / max_steps of the budget
    assert used == pytest.approx([1e-2 * schedule_factor("cosine", s / 10, 0.2, 0.1) for s in range(10)])
    assert used[0] == 0.0 and max(used) == pytest.approx(1e-2)


def test_the_plateau_rule_divides_the_learning_rate_after_each_evaluation_without_a_new_best(tmp_path, monkeypatch):
    config = TrainConfig(batch_size=4, bptt=8, lr=1.0, max_steps=8, eval_every=2, eval_batch_size=2,
                         optimizer="sgd", schedule="plateau", plateau_factor=0.25)
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    losses = iter([2.0, 2.1, 1.9, 2.0])  # worse at the 2nd and 4th evaluations (no divergence: < best + 1)
    monkeypatch.setattr(trainer, "validate", lambda: next(losses))
    result = trainer.fit()
    assert [h["lr"] for h in result.history] == [1.0, 1.0, 0.25, 0.25]  # the lr of the steps before each one
    assert result.final_lr == 0.0625 and result.rollbacks == 0
    assert isinstance(trainer.optimizer, torch.optim.SGD)


def test_a_seconds_budget_stops_with_an_evaluation_and_resumes_to_a_larger_one(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import paperlib.train

    clock = iter(range(0, 10**6))  # every perf_counter call moves 1 s: each training step takes 1 s
    monkeypatch.setattr(paperlib.train, "time", SimpleNamespace(perf_counter=lambda: float(next(clock))))
    config = TrainConfig(batch_size=4, bptt=8, lr=1e-2, max_steps=1000, eval_every=100, eval_batch_size=2,
                         max_seconds=3, schedule="linear")
    trainer = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), config, tmp_path, progress=False)
    result = trainer.fit()
    assert result.steps == 3 and trainer.train_seconds == 3.0
    assert [h["step"] for h in result.history] == [3]  # evaluated and checkpointed when the time ran out
    assert result.final_lr == pytest.approx(1e-2 / 3)  # the third step used 2 of the 3 seconds: 1 - 2/3
    longer = TrainConfig(**{**config.__dict__, "max_seconds": 5})
    again = Trainer(tiny_model(), markov_stream(1000, 0), markov_stream(200, 1), longer, tmp_path, progress=False)
    assert again.fit(resume=True).steps == 5 and again.train_seconds == 5.0
