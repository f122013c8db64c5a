"""Data-parallel training: 2 gloo processes on CPU behave like one process with the same global batch,
and a run checkpointed by rank 0 resumes on every rank to the numbers of an uninterrupted run."""

import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

from paperlib.distributed import SINGLE, DistContext, init_from_env
from paperlib.models import build_lm
from paperlib.train import CheckpointMismatch, Trainer, TrainConfig
from tests.test_train import VOCAB, markov_stream
from tests.numerics import assert_bitwise

WORLD = 2
CONFIG = dict(batch_size=8, bptt=10, lr=5e-3, eval_every=10, eval_batch_size=4, num_samples=2, seed=3,
              averaging="2ta")
STEPS, SPLIT = 30, 20  # the interrupted run stops at an evaluation (step 20) and resumes to 30


class RecordingTrainer(Trainer):
    """Keeps the training loss of every step (the global-batch loss under DDP)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.losses = []

    def _train_step(self, inputs, targets):
        loss = super()._train_step(inputs, targets)
        self.losses.append(loss)
        return loss


def _model(dropout: float, seed: int = 7):
    torch.manual_seed(seed)
    return build_lm("lstm", VOCAB, 24, 2, input_dropout=dropout, state_dropout=dropout, output_dropout=dropout)


def _train(out_dir, dropout, max_steps, resume=False, init_seed=7):
    trainer = RecordingTrainer(_model(dropout, init_seed), markov_stream(6000, 0), markov_stream(600, 1),
                               TrainConfig(**CONFIG, max_steps=max_steps), out_dir, progress=False)
    result = trainer.fit(resume=resume)
    return {"losses": trainer.losses, "history": [h["valid_nll"] for h in result.history if "valid_nll" in h],
            "best": result.best_valid_nll, "weights": {k: v.clone() for k, v in trainer.model.state_dict().items()}}


def _worker(rank, port, out_dir):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ["PAPERLIB_DEVICE"] = "cpu"  # two CPU processes with gloo, also on a machine with one GPU
    torch.set_num_threads(1)
    if rank != 0:
        import paperlib.train

        def refuse(*args, **kwargs):
            raise AssertionError(f"rank {rank} wrote a checkpoint; only rank 0 may")

        paperlib.train.save_atomic = refuse
    results = {
        "plain": _train(f"{out_dir}/plain", 0.0, STEPS),
        "full": _train(f"{out_dir}/full", 0.2, STEPS),
        "part": _train(f"{out_dir}/part", 0.2, SPLIT),
        # a differently initialised model: everything must come from the checkpoint
        "resumed": _train(f"{out_dir}/part", 0.2, STEPS, resume=True, init_seed=99),
        "context": init_from_env(),
    }
    torch.save(results, f"{out_dir}/rank{rank}.pt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    """Every run of `_worker` on 2 gloo processes, once for the module; returns each rank's results."""
    out = tmp_path_factory.mktemp("ddp")
    context = mp.start_processes(_worker, args=(_free_port(), str(out)), nprocs=WORLD, join=False,
                                 start_method="spawn")
    deadline = time.time() + 240
    while not context.join(timeout=1):
        if time.time() > deadline:
            for process in context.processes:
                process.kill()
            pytest.fail("the 2-process run did not finish within 240 s")
    return out, [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


def test_ranks_see_torchrun_environment_and_end_with_identical_weights(ddp):
    _, ranks = ddp
    assert [r["context"] for r in ranks] == [DistContext(0, WORLD, 0), DistContext(1, WORLD, 1)]
    for run in ("plain", "full", "resumed"):
        for name, value in ranks[0][run]["weights"].items():
            assert_bitwise(value, ranks[1][run]["weights"][name], why=f"{run}, {name}: both ranks apply the same "
                           "all-reduced gradient with the same kernels (one machine) to the same weights")
        assert ranks[0][run]["losses"] == ranks[1][run]["losses"]  # the global-batch loss, all-reduced
        assert ranks[0][run]["history"] == ranks[1][run]["history"]


def test_two_processes_follow_the_single_process_trajectory_with_the_same_global_batch(ddp, tmp_path, monkeypatch):
    _, ranks = ddp
    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")  # where the ranks train (gloo), also on a GPU machine
    # Without dropout, both compute the same gradients up to float summation order.
    single = _train(tmp_path / "single", 0.0, STEPS)
    ddp_run = ranks[0]["plain"]
    assert len(ddp_run["losses"]) == len(single["losses"]) == STEPS
    # not bitwise: float32 gradients summed per rank and all-reduced vs summed in one process (~1e-7 relative per
    # reduction), compounded by the optimizer over STEPS steps; rel 1e-4 on losses and 1e-3 on weights (about 1e3 and
    # 1e4 eps) are margins for that, small beside what training moves (the loss falls by > 0.2, asserted below)
    assert ddp_run["losses"] == pytest.approx(single["losses"], rel=1e-4, abs=1e-5)
    assert len(ddp_run["history"]) == STEPS // CONFIG["eval_every"]
    assert ddp_run["history"] == pytest.approx(single["history"], rel=1e-4, abs=1e-5)
    for name, value in single["weights"].items():
        torch.testing.assert_close(ddp_run["weights"][name], value, rtol=1e-3, atol=1e-4)
    assert single["losses"][-1] < single["losses"][0] - 0.2  # it learnt something: the comparison has content
    # With dropout the ranks draw their own masks, so the runs differ by mask noise only.
    single_dropout = _train(tmp_path / "single_dropout", 0.2, STEPS)
    assert ranks[0]["full"]["history"] == pytest.approx(single_dropout["history"], abs=0.05)
    assert ranks[0]["full"]["losses"] != single_dropout["losses"]


def test_rank_zero_checkpoint_resumes_every_rank_to_the_uninterrupted_numbers(ddp):
    out, ranks = ddp
    for rank in ranks:
        full, part, resumed = rank["full"], rank["part"], rank["resumed"]
        assert part["losses"] + resumed["losses"] == full["losses"]
        assert resumed["history"] == full["history"]
        assert resumed["best"] == full["best"]
        for name, value in full["weights"].items():
            assert_bitwise(resumed["weights"][name], value,
                           why=f"{name}: a resumed run performs the uninterrupted run's operations")
    ckpt = torch.load(out / "part" / "last.pt", weights_only=False)
    assert ckpt["position"]["step"] == STEPS
    # each rank's RNG stream (its own dropout masks) and hidden state went into rank 0's file
    assert len(ckpt["ranks"]) == WORLD
    assert not torch.equal(ckpt["ranks"][0]["rng"]["torch"], ckpt["ranks"][1]["rng"]["torch"])
    h0, h1 = ckpt["ranks"][0]["hidden_state"][0][0], ckpt["ranks"][1]["hidden_state"][0][0]
    assert h0.shape == h1.shape == (CONFIG["num_samples"] * CONFIG["batch_size"] // WORLD, 24)


def test_resuming_with_another_number_of_processes_is_refused(ddp, tmp_path):
    out, _ = ddp
    trainer = Trainer(_model(0.2), markov_stream(6000, 0), markov_stream(600, 1),
                      TrainConfig(**CONFIG, max_steps=STEPS + 10), out / "part", progress=False)
    with pytest.raises(CheckpointMismatch, match="written by 2 process"):
        trainer.fit(resume=True)


def test_the_backend_follows_the_device_policy_and_a_rank_without_a_gpu_is_a_clear_error(monkeypatch):
    from paperlib.distributed import default_backend

    monkeypatch.setenv("PAPERLIB_DEVICE", "cpu")
    assert default_backend() == "gloo"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_backend() == "gloo"  # a CPU run on a GPU machine
    monkeypatch.delenv("PAPERLIB_DEVICE")
    assert default_backend() == "nccl"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29999")
    with pytest.raises(ValueError, match="LOCAL_RANK 1 needs GPU 1 but this machine has 1"):
        init_from_env("nccl")


def test_single_process_context_is_the_identity():
    assert init_from_env() == SINGLE
    stream = torch.arange(12).view(4, 3)
    assert SINGLE.shard_rows(stream) is stream
    assert SINGLE.weighted_mean(1.25, 7) == 1.25
    assert SINGLE.gather_object("x") == ["x"] and SINGLE.broadcast_object(3) == 3


def test_sharding_needs_a_batch_divisible_by_the_number_of_processes(monkeypatch):
    context = DistContext(rank=1, world_size=2)
    stream = torch.arange(12).view(4, 3)
    assert torch.equal(context.shard_rows(stream), stream[2:])
    with pytest.raises(ValueError, match="multiple of the number of processes"):
        context.shard_rows(torch.arange(9).view(3, 3))
    assert torch.equal(context.shard_rows(torch.arange(9).view(3, 3), even=False), torch.arange(6, 9).view(1, 3))
    monkeypatch.setenv("WORLD_SIZE", "2")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="RANK, MASTER_ADDR, MASTER_PORT not set; start the processes with torchrun"):
        init_from_env()
