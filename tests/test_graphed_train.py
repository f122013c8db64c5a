"""The trainer whose step replays one captured CUDA graph: on a CPU (a replay calls the captured function) the same
numbers as Trainer bit for bit, rollbacks and resumes included; on CUDA (marked tests, run by benchmarks/gpu.sh)
the captured graph itself, against eager training."""

import math
import os

import pytest
import torch

import paperlib.graphed_train as graphed_module
import paperlib.train as train_module
from paperlib.device import configure, current
from paperlib.graphed_train import GraphedTrainer, graph_safe, map_state, signature, state_tensors
from paperlib.models import build_lm
from paperlib.models.transformer import TransformerState
from paperlib.train import Trainer, TrainConfig
from tests.numerics import assert_bitwise
from tests.test_train import VOCAB, markov_stream

SAME_KERNELS = ("a replay on a CPU calls the same functions on copies of the same contiguous tensors as Trainer's "
                "step, in the same order")


def model(cell="lstm", dropout=0.1, seed=0, device="cpu"):
    torch.manual_seed(seed)
    if cell == "transformer":
        return build_lm(cell, VOCAB, 16, 1, num_heads=2, ff_size=32, dropout=dropout).to(device)
    return build_lm(cell, VOCAB, 24, 1, input_dropout=dropout, state_dropout=dropout).to(device)


def fit(trainer_class, out, config, cell="lstm", resume=False, device="cpu", dropout=0.1, **kwargs):
    trainer = trainer_class(model(cell, dropout, device=device), markov_stream(1000, 0), markov_stream(200, 1),
                            config, out, device=device, progress=False, **kwargs)
    return trainer, trainer.fit(resume=resume)


# 1000 tokens in 4 rows: 31 windows of 8 and a shorter last one per epoch; 70 steps cross two epoch boundaries
CONFIG = dict(batch_size=4, bptt=8, lr=1e-2, max_steps=70, eval_every=20, eval_batch_size=2, num_samples=2,
              schedule="cosine", warmup=0.1, averaging="2ta", seed=3)


def assert_same_run(graphed, plain, graphed_result, plain_result):
    assert graphed_result.history == plain_result.history
    assert graphed_result.metrics() == plain_result.metrics()
    for (name, a), b in zip(graphed.model.state_dict().items(), plain.model.state_dict().values()):
        assert_bitwise(a, b, f"{name}: {SAME_KERNELS}")


@pytest.mark.parametrize("optimizer,sync_every", [("radam", 1), ("sgd", 1), ("radam", 4)])
def test_on_a_cpu_the_graphed_trainer_is_the_trainer_bit_for_bit(tmp_path, optimizer, sync_every):
    """Also when the loss is read back every 4th step only (the steps between return nothing, in both)."""
    config = TrainConfig(**CONFIG, optimizer=optimizer)
    graphed, graphed_result = fit(GraphedTrainer, tmp_path / "graphed", config, sync_every=sync_every)
    plain, plain_result = fit(Trainer, tmp_path / "plain", config, sync_every=sync_every)
    assert_same_run(graphed, plain, graphed_result, plain_result)
    counts = graphed.step_counts
    # eager: the first window (no state yet) and 3 warm-up steps, then the shorter last window of epochs 1 and 2
    # and the first windows of epochs 2 and 3 (32 windows an epoch); everything else replays the one capture
    assert counts["captures"] == 1 and counts["eager"] == 1 + 3 + 2 + 2
    assert counts["replayed"] + counts["eager"] == 70


def test_a_non_finite_loss_in_a_replayed_step_rolls_back_and_captures_again(tmp_path, monkeypatch):
    """The replayed step has already updated when its loss is read; the rollback restores the best checkpoint's
    weights and optimizer state either way, so both trainers continue from the same place."""
    calls, real_loss = {"n": 0}, train_module.multi_sample_loss

    def blows_up_on_the_twelfth_call(*args, **kwargs):
        calls["n"] += 1
        loss, state = real_loss(*args, **kwargs)
        return (loss * float("nan"), state) if calls["n"] == 12 else (loss, state)

    monkeypatch.setattr(train_module, "multi_sample_loss", blows_up_on_the_twelfth_call)
    monkeypatch.setattr(graphed_module, "multi_sample_loss", blows_up_on_the_twelfth_call)
    config = TrainConfig(**{**CONFIG, "max_steps": 30, "eval_every": 5})
    graphed, graphed_result = fit(GraphedTrainer, tmp_path / "graphed", config)
    calls["n"] = 0
    plain, plain_result = fit(Trainer, tmp_path / "plain", config)
    assert graphed_result.rollbacks == plain_result.rollbacks == 1
    assert_same_run(graphed, plain, graphed_result, plain_result)
    assert graphed.step_counts["captures"] == 2  # the optimizer's state was replaced: captured again


def interrupted(trainer_class, out, config, at_step, monkeypatch, **kwargs):
    """A run stopped by Ctrl-C right after step ``at_step`` (Trainer saves last.pt on the way out)."""
    real = trainer_class._observe_step

    def observe_then_stop(self):
        real(self)
        if self.step == at_step:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(trainer_class, "_observe_step", observe_then_stop)
        with pytest.raises(KeyboardInterrupt):
            fit(trainer_class, out, config, **kwargs)


def test_a_resumed_graphed_run_ends_where_an_uninterrupted_one_does_and_trainer_reads_its_checkpoints(
        tmp_path, monkeypatch):
    config = TrainConfig(**CONFIG)
    straight, straight_result = fit(GraphedTrainer, tmp_path / "straight", config)
    interrupted(GraphedTrainer, tmp_path / "split", config, 45, monkeypatch)
    resumed, resumed_result = fit(GraphedTrainer, tmp_path / "split", config, resume=True)
    assert_same_run(resumed, straight, resumed_result, straight_result)
    assert resumed.step_counts["captures"] == 1 and resumed.step_counts["eager"] < 10  # it replayed after resuming
    interrupted(GraphedTrainer, tmp_path / "handed", config, 45, monkeypatch)
    saved = torch.load(tmp_path / "handed" / "last.pt", weights_only=False)["optimizer"]["param_groups"][0]
    assert isinstance(saved["lr"], float) and saved["capturable"] is False  # as Trainer writes them
    handed, handed_result = fit(Trainer, tmp_path / "handed", config, resume=True)
    assert_same_run(handed, straight, handed_result, straight_result)


def test_a_state_that_changes_every_window_trains_eagerly(tmp_path):
    """A Transformer with learned positions and a memory: the position its next window starts at grows with every
    window (a value of the state's signature), so no two windows share a signature and no step is captured."""
    config = TrainConfig(**{**CONFIG, "max_steps": 12, "eval_every": 6})
    trainer = GraphedTrainer(build_lm("transformer", VOCAB, 16, 1, num_heads=2, ff_size=32, memory_length=8,
                                      max_len=4096), markov_stream(1000, 0), markov_stream(200, 1), config,
                             tmp_path, progress=False)
    result = trainer.fit()
    assert trainer.step_counts == {"eager": 12, "replayed": 0, "captures": 0}
    assert math.isfinite(result.best_valid_nll)


def test_weights_moved_since_the_capture_are_captured_again(tmp_path):
    """A graph reads the memory its weights had at capture: once they move (here: new storage for every weight),
    the trainer warms up and captures again instead of replaying into the old memory."""
    config = TrainConfig(**{**CONFIG, "max_steps": 10, "eval_every": 50})
    trainer, _ = fit(GraphedTrainer, tmp_path, config)
    assert trainer.step_counts["captures"] == 1
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.data = p.data.clone()
    windows = train_module.bptt_windows(trainer.train_stream, 8, start=trainer.window)
    for _ in range(5):
        trainer._train_step(*next(windows))
    assert trainer.step_counts["captures"] == 2 and trainer.step_counts["eager"] == 4 + 3


def test_another_precision_since_the_capture_is_captured_again(tmp_path):
    """A graph keeps the precision settings of its capture (TF32 in its matmuls, autocast's casts): after
    configure() sets another precision the trainer warms up and captures again, and back at the first precision
    once more."""
    config = TrainConfig(**{**CONFIG, "max_steps": 10, "eval_every": 50})
    trainer, _ = fit(GraphedTrainer, tmp_path, config)
    assert trainer.step_counts["captures"] == 1
    before = current()
    windows = train_module.bptt_windows(trainer.train_stream, 8, start=trainer.window)
    try:
        configure("tf32", before.sync_every, before.compile)
        for _ in range(5):
            trainer._train_step(*next(windows))
        assert trainer.step_counts["captures"] == 2 and trainer.step_counts["eager"] == 4 + 3
    finally:
        configure(before.precision, before.sync_every, before.compile)
    trainer._train_step(*next(windows))
    assert trainer.step_counts["captures"] == 2 and trainer.step_counts["eager"] == 4 + 3 + 1


class _Capture:
    """What ``torch.cuda.graph`` does on entering and leaving, as far as :func:`graphed_module.capture` sees it:
    ending a capture in which a kernel failed raises an error of its own (CUDA's 'capture invalidated')."""

    def __init__(self, end_fails: bool = False, begin_fails: bool = False) -> None:
        self.entered = self.ended = False
        self.end_fails, self.begin_fails = end_fails, begin_fails

    def __enter__(self) -> None:
        if self.begin_fails:  # torch.cuda.graph switches streams, then capture_begin raises
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        self.entered = True

    def __exit__(self, *args) -> None:
        self.ended = True
        if self.end_fails:
            raise RuntimeError("operation failed due to a previous error during capture")


def test_a_failed_capture_raises_the_steps_own_error_and_restores_the_stream():
    restored = []

    def failing() -> None:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nmore lines")

    context = _Capture(end_fails=True)
    with pytest.raises(graphed_module.CaptureError, match="operation not permitted") as caught:
        graphed_module.capture(failing, context, lambda: restored.append(True))
    assert "previous error" not in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError) and "not permitted" in str(caught.value.__cause__)
    assert context.entered and context.ended and restored == [True]
    # a capture whose end alone fails says so; a successful one raises nothing; both restore the stream
    with pytest.raises(graphed_module.CaptureError, match="previous error"):
        graphed_module.capture(lambda: None, _Capture(end_fails=True), lambda: restored.append(True))
    ran = []
    graphed_module.capture(lambda: ran.append(True), _Capture(), lambda: restored.append(True))
    assert ran == [True] and restored == [True, True, True]

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # an interrupt stays one, after the capture has ended
        graphed_module.capture(interrupted, _Capture(end_fails=True), lambda: restored.append(True))
    assert len(restored) == 4
    begin = _Capture(begin_fails=True)  # a capture that never began is not ended, and the stream is put back
    with pytest.raises(graphed_module.CaptureError, match="not permitted"):
        graphed_module.capture(lambda: ran.append(True), begin, lambda: restored.append(True))
    assert not begin.ended and ran == [True] and len(restored) == 5


def test_signature_and_state_helpers():
    h = torch.zeros(2, 3)
    lstm_state = [(h, h + 1), (h + 2, h + 3)]
    assert [t[0, 0].item() for t in state_tensors(lstm_state)] == [0, 1, 2, 3]
    doubled = map_state(lambda t: 2 * t, lstm_state)
    assert isinstance(doubled, list) and isinstance(doubled[0], tuple) and doubled[1][1][0, 0].item() == 6
    inputs = torch.zeros(4, 8, dtype=torch.long)
    assert signature(inputs, lstm_state) == signature(inputs.clone(), map_state(torch.clone, lstm_state))
    assert signature(inputs, lstm_state) != signature(inputs[:, :5], lstm_state)
    assert signature(inputs, lstm_state) != signature(inputs, None)
    assert signature(inputs, lstm_state) != signature(inputs, [(h, h), (h, torch.zeros(2, 4))])
    memory = TransformerState([torch.zeros(4, 8, 16)], 8)
    assert signature(inputs, memory) != signature(inputs, memory._replace(offset=16))
    assert isinstance(map_state(torch.clone, memory), TransformerState)


def test_bad_settings_are_value_errors(tmp_path):
    config = TrainConfig(**CONFIG)
    with pytest.raises(ValueError, match="eager_steps"):
        GraphedTrainer(model(), markov_stream(200, 0), markov_stream(100, 1), config, tmp_path, eager_steps=0)
    before = current()
    configure(before.precision, before.sync_every, "default")
    try:
        with pytest.raises(ValueError, match="compute.compile"):
            GraphedTrainer(model(), markov_stream(200, 0), markov_stream(100, 1), config, tmp_path)
    finally:
        configure(before.precision, before.sync_every, before.compile)


# -- on a GPU ------------------------------------------------------------------------------------------------------

@pytest.mark.cuda
@pytest.mark.parametrize("optimizer", ["radam", "adam", "sgd"])
def test_on_cuda_the_captured_step_trains_as_the_eager_one(tmp_path, optimizer):
    """Against Trainer with the same graph-safe optimizer and no dropout, a replay runs the kernels an eager step
    runs; what differs is the learning rate, a float32 tensor in the graph against a Python number (a relative 6e-8
    of each update), which over 40 steps stays far below 1e-4 in the validation loss, while a step that was not
    replayed correctly (stale inputs, a state not carried, a frozen learning rate) moves it by 0.002 to 1 on this
    model. (The graph-safe optimizers themselves differ from the default ones by more: capturable RAdam computes
    its rectification in float32, about 4e-4 in this loss after 40 steps.) Those magnitudes were measured on a CPU,
    running this comparison there with each fault put in on purpose and with the capturable arithmetic forced."""
    config = TrainConfig(**{**CONFIG, "max_steps": 40, "eval_every": 10, "optimizer": optimizer,
                            "averaging": "none"})
    graphed = GraphedTrainer(model(dropout=0.0, device="cuda"), markov_stream(1000, 0), markov_stream(200, 1),
                             config, tmp_path / "graphed", device="cuda", progress=False, sync_every=1)
    graphed_result = graphed.fit()
    plain = Trainer(model(dropout=0.0, device="cuda"), markov_stream(1000, 0), markov_stream(200, 1), config,
                    tmp_path / "plain", device="cuda", progress=False, sync_every=1)
    graph_safe(plain.optimizer, plain.device)  # the optimizer GraphedTrainer uses, its learning rate a number
    plain_result = plain.fit()
    assert graphed.step_counts["replayed"] >= 30
    assert len(graphed_result.history) == len(plain_result.history) == 4
    for a, b in zip(graphed_result.history, plain_result.history):
        assert a["step"] == b["step"] and a["valid_nll"] == pytest.approx(b["valid_nll"], abs=1e-4)
        assert a["lr"] == b["lr"]  # the schedule's number, not the tensor's float32 rounding
    history = graphed_result.history
    assert history[-1]["valid_nll"] < history[0]["valid_nll"] - 0.05  # it learned (about 0.1 to 0.7 on a CPU)


_UNCAPTURABLE = """
import torch
import paperlib.graphed_train as graphed

device = torch.device("cuda")
x = torch.ones(4, device=device)
before = torch.cuda.current_stream(device)
raised = []


def host_read():
    x.add_(1.0)
    try:
        x.sum().item()
    except RuntimeError as err:  # what the step itself raised, to compare with what the capture reports
        raised.append(err)
        raise


with graphed.side_stream(device):
    host_read()  # warm-up, as before any capture
try:
    graphed.CapturedStep(host_read, device)
    raise SystemExit("captured a step that reads the host")
except graphed.CaptureError as err:
    assert len(raised) == 1 and err.__cause__ is raised[0], (raised, err.__cause__)
assert torch.cuda.current_stream(device) == before and torch.cuda.current_device() == 0
x.fill_(1.0)
step = graphed.CapturedStep(lambda: x.mul_(2.0), device)
for _ in range(3):
    step.replay()
torch.cuda.synchronize()
assert x.tolist() == [8.0] * 4, x.tolist()
print("ok")
"""


@pytest.mark.cuda
def test_on_cuda_a_step_that_cannot_be_captured_raises_its_own_error_and_leaves_cuda_usable():
    """A host read inside the step (``.item()``, a synchronisation a capture forbids) fails the capture: the error
    raised has the step's own failure as its cause, not the capture's "invalidated"; the stream and device current
    before it are current again; and a capturable step captured next replays correctly. In a process of its own:
    a failed capture must not leave anything behind for the other CUDA tests of this worker."""
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", _UNCAPTURABLE], capture_output=True, text=True, timeout=300,
                          cwd=repo, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [repo, *filter(None, [os.environ.get("PYTHONPATH")])])})
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


@pytest.mark.cuda
def test_on_cuda_each_trainer_resumes_the_others_checkpoints(tmp_path, monkeypatch):
    """A GraphedTrainer checkpoint holds the learning rate as a number and the default optimizer flags, so Trainer
    resumes it; a Trainer checkpoint resumed by GraphedTrainer (reading its loss back every 4 steps) replays again.
    Both continue the uninterrupted graphed run's trajectory: without dropout they differ from it only by the part
    trained with the default optimizer instead of the graph-safe one (about 4e-4 in the validation loss after 40
    RAdam steps, see above), well inside 3e-3, while a run that restarted instead of resuming would be 0.1 or more
    off."""
    config = TrainConfig(**{**CONFIG, "averaging": "none"})
    cuda = dict(device="cuda", dropout=0.0)
    _, straight = fit(GraphedTrainer, tmp_path / "straight", config, **cuda)
    interrupted(GraphedTrainer, tmp_path / "handed", config, 45, monkeypatch, **cuda)
    saved = torch.load(tmp_path / "handed" / "last.pt", weights_only=False)["optimizer"]["param_groups"][0]
    assert isinstance(saved["lr"], float) and saved["capturable"] is False
    _, handed = fit(Trainer, tmp_path / "handed", config, resume=True, **cuda)
    interrupted(Trainer, tmp_path / "taken", config, 45, monkeypatch, **cuda)
    taker, taken = fit(GraphedTrainer, tmp_path / "taken", config, resume=True, sync_every=4, **cuda)
    assert taker.step_counts["replayed"] >= 15
    for run in (handed, taken):
        assert [h["step"] for h in run.history] == [h["step"] for h in straight.history]
        for a, b in zip(run.history, straight.history):
            assert a["valid_nll"] == pytest.approx(b["valid_nll"], abs=3e-3)


@pytest.mark.cuda
def test_on_cuda_every_replay_draws_new_dropout_masks(tmp_path):
    """The same window from the same state with weights that hardly move (learning rate 1e-9): replays differ
    only by their dropout masks (rate 0.3), which move this model's loss by about 0.01 or more; a graph that
    had frozen the masks of its capture would repeat one loss up to the updates' 1e-8."""
    config = TrainConfig(**{**CONFIG, "lr": 1e-9, "max_steps": 10})
    trainer = GraphedTrainer(model(dropout=0.3, device="cuda"), markov_stream(1000, 0), markov_stream(200, 1),
                             config, tmp_path, device="cuda", progress=False, sync_every=1)
    inputs, targets = next(train_module.bptt_windows(trainer.train_stream, 8))
    trainer._train_step(inputs, targets)  # no state yet: eager
    start = map_state(torch.clone, trainer.state)
    losses = []
    for _ in range(7):  # 3 eager warm-up steps, then the capture and 3 more replays
        trainer.state = map_state(torch.clone, start)
        losses.append(trainer._train_step(inputs, targets))
    assert trainer.step_counts == {"eager": 4, "replayed": 4, "captures": 1}
    replayed = losses[-4:]
    assert max(replayed) - min(replayed) > 1e-3


@pytest.mark.cuda
def test_on_cuda_a_step_captured_under_bf16_autocast_replays_and_a_rollback_captures_again(tmp_path):
    before = current()
    configure("bf16", before.sync_every, before.compile)
    try:
        config = TrainConfig(**{**CONFIG, "max_steps": 12, "eval_every": 50})
        trainer = GraphedTrainer(model(device="cuda"), markov_stream(1000, 0), markov_stream(200, 1), config,
                                 tmp_path, device="cuda", progress=False, sync_every=1)
        trainer.fit()
        assert trainer.step_counts["captures"] == 1 and trainer.step_counts["replayed"] > 0
        with torch.no_grad():
            trainer.model.embedding.weight.fill_(float("nan"))
        windows = train_module.bptt_windows(trainer.train_stream, 8, start=trainer.window)
        inputs, targets = next(windows)
        assert math.isnan(trainer._train_step(inputs, targets)) and trainer.rollbacks == 1
        assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
        for _ in range(6):  # no state after the rollback: one eager step, 3 warm-up steps, then a capture
            inputs, targets = next(windows)
            assert math.isfinite(trainer._train_step(inputs, targets))
        assert trainer.step_counts["captures"] == 2
    finally:
        configure(before.precision, before.sync_every, before.compile)
