"""Training recurrent (and Transformer) language models with truncated BPTT.

What the seeds add to a plain loop (Melis thesis §4.3–§4.4, Circling Back §5):

- the multi-dropout-sample objective (Melis thesis §4.3, its unnumbered equation) with `num_samples`
  masks in one batched pass;
- RAdam, or Adam with β1 = 0; gradient-norm clipping; an L2 penalty (`weight_decay`);
- rollback on divergence: when the loss is not finite or the validation loss is far above the
  best seen, the best weights and optimizer state are restored and the learning rate is
  multiplied by 0.9; after `max_rollbacks` the run stops with :class:`TrainingDiverged`;
- weight averaging (Melis ch. 3): with `averaging` set, every evaluation reports the loss of the
  averaged weights (for 2TA the better of its two averages), which then drives best-checkpoint
  selection, divergence detection and early stopping. More averagers can watch the same
  trajectory (`monitors`), each evaluated at its own period, so that 2TA, tail averaging and EMA
  are compared on identical iterates.

Beyond the seeds, for budgets of minutes rather than GPU-days: plain SGD (the pytorch/examples
recipe), and a learning-rate schedule that knows the budget (`schedule`: linear warm-up over the
first `warmup` fraction, then cosine or linear decay to `final_lr` × lr at the end of the budget,
as nanoGPT does; or the plateau rule, lr × `plateau_factor` after every evaluation without a new
best). The budget is `max_steps`, or wall-clock training seconds with `max_seconds` (whichever ends
first; a schedule then follows the larger fraction used). Seconds are for benchmarks: a stage whose
results must repeat runs a step budget.

Also beyond the seeds: checkpoints are atomic (temp file + rename) and hold everything needed to
continue bit-for-bit (model, optimizer, RNG states, data position and the hidden state carried
across windows), so `resume=True` after a kill reaches the same final numbers as an
uninterrupted run. Metrics are JSON for DVC; wall time and tokens/s go to the provenance file,
so that the metrics themselves are identical between identical runs. Under `torchrun` the same
trainer runs data-parallel with the single-process global batch (:mod:`paperlib.distributed`):
rank 0 writes the checkpoints, every rank resumes from them.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from paperlib.averaging import WeightAverager, build_averager, check_averaging
from paperlib.device import autocast, cache_key, compiled, current, load_checkpoint
from paperlib.distributed import init_from_env
from paperlib.data.batching import batchify, bptt_windows, num_windows
from paperlib.models.evaluation import evaluate_nll
from paperlib.models.objective import multi_sample_loss
from paperlib.models.state import detach_state
from paperlib.atomic_files import save_torch_atomic as save_atomic, write_json_atomic
from paperlib.schedules import SCHEDULES, schedule_factor

OPTIMIZERS = ("radam", "adam", "sgd")


class TrainingDiverged(RuntimeError):
    """Training kept diverging after the allowed number of rollbacks."""


class CheckpointMismatch(ValueError):
    """A checkpoint was written by a run with different settings."""


@dataclass
class TrainConfig:
    """Optimisation settings of one run (the model is built separately with `build_lm`)."""

    batch_size: int = 32
    bptt: int = 70
    optimizer: str = "radam"
    lr: float = 2e-3
    beta1: float = 0.0  # Adam with β1 = 0: Melis thesis §2.2.2 (ch. 2 setup) and §5.C
    beta2: float = 0.999
    weight_decay: float = 0.0  # L2 penalty
    clip_norm: float = 10.0  # <= 0: no clipping
    num_samples: int = 1  # dropout samples D of the multi-sample objective (Melis thesis §4.3)
    max_steps: int = 1000
    eval_every: int = 100
    eval_batch_size: int = 10
    eval_max_windows: int | None = None  # cap validation cost in small profiles; None: whole split
    divergence_threshold: float = 1.0  # nats above the best validation loss that count as divergence
    lr_decay_on_rollback: float = 0.9
    max_rollbacks: int = 5
    seed: int = 0
    averaging: str = "none"  # none, 2ta, ta, ema, swa, polyak (paperlib.averaging.build_averager)
    averaging_options: dict = field(default_factory=dict)
    early_stopping: int | None = None  # stop after this many evaluations without a new best; None: never
    schedule: str = "constant"  # constant, cosine, linear (decay over the budget), plateau (x plateau_factor)
    warmup: float = 0.0  # fraction of the budget with a linear warm-up from 0 (cosine and linear schedules)
    final_lr: float = 0.0  # the cosine / linear schedule ends at final_lr * lr
    plateau_factor: float = 0.25  # plateau schedule: lr multiplier after an evaluation without a new best
    max_seconds: float | None = None  # also stop after this many seconds of training steps; None: steps only

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; valid optimizers: {', '.join(OPTIMIZERS)}")
        for name in ("batch_size", "bptt", "num_samples", "max_steps", "eval_every", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if not 0 < self.lr_decay_on_rollback <= 1:
            raise ValueError(f"lr_decay_on_rollback must lie in (0, 1], got {self.lr_decay_on_rollback}")
        if not 0 <= self.beta1 < 1 or not 0 <= self.beta2 < 1:
            raise ValueError(f"betas must lie in [0, 1), got {self.beta1}, {self.beta2}")
        check_averaging(self.averaging, self.averaging_options)
        if self.early_stopping is not None and self.early_stopping < 1:
            raise ValueError(f"early_stopping must be >= 1 evaluations or None, got {self.early_stopping}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; valid schedules: {', '.join(SCHEDULES)}")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"warmup is a fraction of the budget in [0, 1), got {self.warmup}")
        if not 0 <= self.final_lr <= 1:
            raise ValueError(f"final_lr is a fraction of lr in [0, 1], got {self.final_lr}")
        if not 0 < self.plateau_factor <= 1:
            raise ValueError(f"plateau_factor must lie in (0, 1], got {self.plateau_factor}")
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"max_seconds must be positive or None, got {self.max_seconds}")
        if self.optimizer == "sgd" and self.beta1 != 0.0:
            raise ValueError("beta1 is Adam's; plain SGD takes none (leave beta1 at 0)")


@dataclass
class TrainResult:
    best_valid_nll: float
    steps: int
    tokens: int
    rollbacks: int
    final_lr: float
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def best_valid_ppl(self) -> float:
        return math.exp(self.best_valid_nll)

    def metrics(self) -> dict[str, Any]:
        return {
            "best_valid_nll": self.best_valid_nll,
            "best_valid_ppl": self.best_valid_ppl,
            "steps": self.steps,
            "tokens": self.tokens,
            "rollbacks": self.rollbacks,
            "final_lr": self.final_lr,
        }


def build_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """RAdam (Melis thesis §4.4) or Adam (β1 = 0 by default, §2.2.2 / §5.C), with L2 as `weight_decay`; or plain
    SGD (no momentum), the pytorch/examples word_language_model recipe."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    kwargs = dict(lr=config.lr, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay)
    if config.optimizer == "radam":
        return torch.optim.RAdam(model.parameters(), **kwargs)
    return torch.optim.Adam(model.parameters(), **kwargs)


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _to_device(state: Any, device: torch.device) -> Any:
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, (list, tuple)):
        items = [_to_device(s, device) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else type(state)(items)  # NamedTuple or sequence
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return dataclasses.replace(state, **{f.name: _to_device(getattr(state, f.name), device)
                                             for f in dataclasses.fields(state)})
    return state


class Trainer:
    """Runs `TrainConfig` on a model and a train/valid id stream, checkpointing into `out_dir`."""

    def __init__(self, model: nn.Module, train_ids: torch.Tensor, valid_ids: torch.Tensor, config: TrainConfig,
                 out_dir: str | os.PathLike, device: str | torch.device | None = None, progress: bool = True,
                 monitors: dict[str, WeightAverager] | None = None, eval_raw: bool = False,
                 sync_every: int | None = None):
        self.dist = init_from_env()  # rank 0 of 1 unless started by torchrun
        self.device = self.dist.device(device)
        # read the training loss back to the host (and check it) every `sync_every` steps: paperlib.device
        self.sync_every = sync_every if sync_every is not None else current().sync_every
        if self.sync_every < 1:
            raise ValueError(f"sync_every must be >= 1, got {self.sync_every}")
        self._unread: list[torch.Tensor] = []  # batch losses of the steps since the last read-back
        self.model = model.to(self.device)
        # DistributedDataParallel under torchrun; torch.compile'd when compute.compile asks (paperlib.device)
        self.net = compiled(self.dist.wrap(self.model, self.device))
        self.config = config
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.progress = progress and self.dist.is_main
        # each rank holds its rows of the global batch: [B / W, N]
        self.train_stream = self.dist.shard_rows(batchify(train_ids, config.batch_size)).to(self.device)
        valid_stream = batchify(valid_ids, config.eval_batch_size)
        self.valid_stream = self.dist.shard_rows(valid_stream, even=False).to(self.device)
        self.optimizer = build_optimizer(self.model, config)
        self.averager = build_averager(config.averaging, self.model, config.eval_every, **config.averaging_options)
        self.monitors = dict(monitors or {})  # name -> averager over the same module, evaluated at its own period
        self.eval_raw = eval_raw  # also record the raw weights' loss when averaging
        self.evals_since_best = 0
        self.windows_per_epoch = num_windows(self.train_stream, config.bptt)
        # position and bookkeeping, all saved in checkpoints
        self.step = 0
        self.epoch = 0
        self.window = 0
        self.state: Any = None
        self.best_valid = math.inf
        self.rollbacks = 0
        self.history: list[dict[str, float]] = []
        self.train_seconds = 0.0
        self.base_lr = config.lr  # lr before the schedule's factor: lowered by rollbacks and plateaus

    # -- checkpoints -------------------------------------------------------------------------
    @property
    def last_path(self) -> Path:
        return self.out_dir / "last.pt"

    @property
    def best_path(self) -> Path:
        return self.out_dir / "best.pt"

    def _lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def _budget_used(self) -> float:
        """The fraction of the budget spent: steps, or training seconds when those run out first."""
        used = self.step / self.config.max_steps
        if self.config.max_seconds is not None:
            used = max(used, self.train_seconds / self.config.max_seconds)
        return used

    def _out_of_time(self) -> bool:
        return self.config.max_seconds is not None and self.train_seconds >= self.config.max_seconds

    def _apply_lr(self) -> None:
        c = self.config
        lr = self.base_lr * schedule_factor(c.schedule, self._budget_used(), c.warmup, c.final_lr)
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _checkpoint(self) -> dict[str, Any]:
        return {
            "config": dataclasses.asdict(self.config),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": _rng_state(),
            "position": {"step": self.step, "epoch": self.epoch, "window": self.window},
            "hidden_state": detach_state(self.state),
            "best_valid": self.best_valid,
            "evals_since_best": self.evals_since_best,
            "averager": self.averager.state_dict(),
            "monitors": {name: m.state_dict() for name, m in self.monitors.items()},
            "rollbacks": self.rollbacks,
            "history": list(self.history),
            "train_seconds": self.train_seconds,
            "base_lr": self.base_lr,
        }

    def save(self, path: Path) -> None:
        """Rank 0 writes (with every rank's RNG and hidden state when distributed); the others wait."""
        ckpt = self._checkpoint()
        if self.dist.is_distributed:
            mine = {"rng": ckpt["rng"], "hidden_state": _to_device(ckpt["hidden_state"], torch.device("cpu"))}
            ckpt["ranks"] = self.dist.gather_object(mine)
        if self.dist.is_main:
            save_atomic(ckpt, path)
        self.dist.barrier()

    def load(self, path: Path, restore_position: bool = True) -> None:
        ckpt = load_checkpoint(path, self.device)  # RNG states stay CPU tensors, as set_rng_state requires
        saved_world = len(ckpt.get("ranks", [None]))
        if restore_position and saved_world != self.dist.world_size:
            raise CheckpointMismatch(
                f"checkpoint {path} was written by {saved_world} process(es) and this run has "
                f"{self.dist.world_size}; resume with the same number of processes"
            )
        saved = ckpt["config"]
        ours = dataclasses.asdict(self.config)
        defaults = dataclasses.asdict(TrainConfig())
        # the budget may grow to continue a run; keys newer than the checkpoint count at their default
        budget = ("max_steps", "max_seconds")
        differ = sorted(k for k in ours if k not in budget and saved.get(k, defaults[k]) != ours[k])
        if differ:
            raise CheckpointMismatch(
                f"checkpoint {path} was written with different settings ({', '.join(differ)}); "
                "use another output folder or start without --resume"
            )
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        # The averagers watch the weights' trajectory: a rollback restores them with the weights they averaged.
        if "averager" in ckpt:
            self.averager.load_state_dict(ckpt["averager"])
        for name, state in ckpt.get("monitors", {}).items():
            self.monitors[name].load_state_dict(state)
        if restore_position:
            self.evals_since_best = ckpt.get("evals_since_best", 0)
            mine = ckpt["ranks"][self.dist.rank] if "ranks" in ckpt else ckpt
            _set_rng_state(mine["rng"])
            pos = ckpt["position"]
            self.step, self.epoch, self.window = pos["step"], pos["epoch"], pos["window"]
            self.state = _to_device(mine["hidden_state"], self.device)
            self.best_valid = ckpt["best_valid"]
            self.rollbacks = ckpt["rollbacks"]
            self.history = ckpt["history"]
            self.train_seconds = ckpt["train_seconds"]
            self.base_lr = ckpt.get("base_lr", ckpt["optimizer"]["param_groups"][0]["lr"])

    # -- evaluation and divergence -----------------------------------------------------------
    def validate(self) -> float:
        windows = bptt_windows(self.valid_stream, self.config.bptt)
        if self.config.eval_max_windows is not None:
            windows = (w for i, w in zip(range(self.config.eval_max_windows), windows))
        # ranks hold different numbers of validation rows: weight their means by rows
        return self.dist.weighted_mean(evaluate_nll(self.model, windows), self.valid_stream.size(0))

    def _rollback(self, reason: str) -> None:
        """Restore the best weights and optimizer state, lower the learning rate (Melis §4.4)."""
        self.rollbacks += 1
        if self.rollbacks > self.config.max_rollbacks:
            raise TrainingDiverged(
                f"training diverged {self.rollbacks} times (last: {reason}) at step {self.step} with lr "
                f"{self._lr():.3g}; lower `lr` or raise `clip_norm` for this experiment in params.yaml"
            )
        self.base_lr *= self.config.lr_decay_on_rollback
        self.load(self.best_path, restore_position=False)
        self._apply_lr()
        lr = self._lr()
        self.state = None
        self._unread = []  # losses of the discarded updates
        self.history.append({"step": self.step, "event": "rollback", "lr": lr, "reason": reason})

    # -- the loop ----------------------------------------------------------------------------
    def fit(self, resume: bool = False) -> TrainResult:
        config = self.config
        if resume and self.dist.broadcast_object(self.last_path.exists()):
            self.load(self.last_path)
        else:
            seed = config.seed + self.dist.rank  # every rank draws its own dropout masks
            torch.manual_seed(seed)
            random.seed(seed)
            np.random.seed(seed % 2**32)
            self.save(self.best_path)  # the initial weights: something to roll back to from step 1
        bar = _progress(config.max_steps, self.step, self.progress)
        tokens_per_step = config.batch_size * config.bptt
        try:
            while self.step < config.max_steps and not self._out_of_time():
                if self.window >= self.windows_per_epoch:
                    self.epoch, self.window, self.state = self.epoch + 1, 0, None
                inputs, targets = next(bptt_windows(self.train_stream, config.bptt, start=self.window))
                started = time.perf_counter()
                loss = self._train_step(inputs, targets)
                self.train_seconds += time.perf_counter() - started
                self.window += 1
                if loss is not None and math.isnan(loss):
                    # Rolled back: no optimizer step was taken, so there is no step to count and no new iterate
                    # for the averagers (they were restored with the weights); the window that blew up is skipped.
                    continue
                self.step += 1
                self._observe_step()
                bar.update(1)
                if loss is not None:
                    bar.set_postfix(loss=f"{loss:.3f}",
                                    tok_s=f"{self.step * tokens_per_step / max(self.train_seconds, 1e-9):.0f}")
                if self.step % config.eval_every == 0 or self.step == config.max_steps or self._out_of_time():
                    self._evaluate_and_checkpoint()
                    if config.early_stopping is not None and self.evals_since_best >= config.early_stopping:
                        break
        except KeyboardInterrupt:
            if not self.dist.is_distributed:  # saving needs every rank, which may be gone
                self.save(self.last_path)
            raise
        finally:
            bar.close()
        return self.result()

    def _train_step(self, inputs: torch.Tensor, targets: torch.Tensor) -> float | None:
        """One update. Returns the batch loss on the steps that read it back (every `sync_every`-th), None on the
        others, NaN when a non-finite loss was read and the run rolled back instead of updating.

        With `sync_every` = 1 a non-finite loss is caught before its update. With k > 1 the check sees the last k
        losses at once, so up to k - 1 updates may follow a non-finite loss before the rollback discards them (they
        count as steps); validation, which reads its loss, still sees non-finite weights at once.
        """
        self.model.train()
        self._apply_lr()
        with autocast(self.device):  # bf16 precision only; the loss itself is float32 (paperlib.device)
            loss, state = multi_sample_loss(self.net, inputs, targets, self.config.num_samples, self.state)
        self.state = detach_state(state)
        self._unread.append(self.dist.mean(loss.detach()))  # over the global batch, so that all ranks agree
        read = None
        if len(self._unread) >= self.sync_every:
            losses, self._unread = torch.stack(self._unread), []
            finite = torch.isfinite(losses)
            if not finite.all():
                self._rollback(f"non-finite training loss {losses[~finite][0].item()}")
                return float("nan")
            read = losses[-1].item()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        self.optimizer.step()
        return read

    def _observe_step(self) -> None:
        """Feed the new iterate to the averagers; evaluate the monitors that are due."""
        self.averager.update()
        for name, monitor in self.monitors.items():
            monitor.update()
            if monitor.steps % monitor.evaluate_every == 0:
                report = monitor.evaluate(lambda module: self.validate())
                self.history.append({"step": self.step, "monitor": name, "valid_nll": report.loss,
                                     "length": report.length, **_two_tail_details(monitor)})

    def _evaluate_and_checkpoint(self) -> None:
        report = self.averager.evaluate(lambda module: self.validate())
        valid = report.loss
        diverged = not math.isfinite(valid) or valid > self.best_valid + self.config.divergence_threshold
        entry = {"step": self.step, "valid_nll": valid, "lr": self._lr()}
        if self.config.averaging != "none":
            entry.update(averaged_length=report.length, **_two_tail_details(self.averager))
            if self.eval_raw:
                entry["raw_valid_nll"] = self.validate()
        self.history.append(entry)
        if diverged:
            self._rollback(f"validation loss {valid:.4g} vs best {self.best_valid:.4g}")
        elif valid < self.best_valid:
            self.best_valid, self.evals_since_best = valid, 0
            self.save(self.best_path)
        else:
            self.evals_since_best += 1
            if self.config.schedule == "plateau":  # pytorch/examples: lr / 4 when validation did not improve
                self.base_lr *= self.config.plateau_factor
                self._apply_lr()
        self.save(self.last_path)

    def recommended_weights(self):
        """Context manager: the averaged weights (if averaging) are in the model inside it."""
        return self.averager.averaged_weights()

    def result(self) -> TrainResult:
        return TrainResult(self.best_valid, self.step, self.step * self.config.batch_size * self.config.bptt,
                           self.rollbacks, self._lr(), list(self.history))

    def write_metrics(self, path: str | os.PathLike | None = None) -> Path:
        path = Path(path) if path is not None else self.out_dir / "metrics.json"
        if self.dist.is_main:
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(json.dumps({**self.result().metrics(), "history": self.history}, indent=1) + "\n")
            os.replace(tmp, path)
        self.dist.barrier()
        return path


def _two_tail_details(averager: WeightAverager) -> dict[str, Any]:
    """For a 2TA averager: the lengths of its two averages and what its last evaluation did."""
    average = getattr(averager, "average", None)
    if average is None:
        return {}
    return {"short_len": average.short_len, "long_len": average.long_len, "action": average.last_action}


def forget_stale_run(run_dir: Path, spec: dict[str, Any]) -> None:
    """Runs persist across `dvc repro` so that an interrupted stage resumes; a run folder made with
    other settings is removed so that it is redone rather than reused."""
    context = init_from_env()
    spec = {**spec, **cache_key()}  # runs made at another precision are redone too
    if context.is_main:  # under torchrun, one process decides and the others wait for it
        marker = run_dir / "spec.json"
        if marker.exists() and json.loads(marker.read_text()) != json.loads(json.dumps(spec)):
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(marker, spec)
    context.barrier()


def _progress(total: int, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, desc="train", unit="step", dynamic_ncols=True)
