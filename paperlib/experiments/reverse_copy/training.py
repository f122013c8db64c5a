"""Training and evaluation of the reverse-copy encoder/decoders (Melis thesis §2.3.3): one model at a time, or
many models of one shape trained together as one stacked model.

:func:`train_model` trains one :class:`~paperlib.seq2seq.ReverseCopyModel` (Adam or RAdam, the L2 penalty as weight
decay, gradient-norm clipping, an optional learning-rate decay); :func:`evaluate` scores it on held-out examples.

:func:`train_stacked` trains several models of one shape (the grid points of one model and length that differ only in
learning rate, L2 penalty and seed) as one: every step stacks their parameters and runs one vmapped pass
(:class:`~paperlib.stacked.StackedModels`), so a GPU issues one sequence of batched kernels instead of one sequence
per model. The hand-written Mogrifier recurrence launches a few hundred kernels per position, so a separate run of
the thesis' shapes is launch-bound; a stack of 9 issues about the same kernels for 9 runs. Model m is the run
:func:`train_model` makes with its settings and seed, up to float rounding: the same initial weights (the caller
builds each under its seed), the same batches (each model's order comes from its own generator seeded as a separate
run's), the same optimizer arithmetic in a parameter group per model (its learning rate and L2), its gradient
clipped by its own norm. What differs: the recurrences run in their ``torch.func``-traceable forms (batched matmuls
instead of the fused kernels), and a model whose training loss turns non-finite stops updating at that step (a
separate run raises there) while the others go on; a stack's rounding depends on its members, so a stack resumed
with only its unfinished runs rounds differently from the uninterrupted one. A stack can take hours at the paper's
shapes, so it checkpoints (``checkpoint``: weights, optimizer state, batch orders and places, curves) atomically
every ``checkpoint_every`` steps and continues from there, ending exactly where an uninterrupted run ends.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from paperlib.atomic_files import save_torch_atomic
from paperlib.data import ReverseCopyData
from paperlib.device import load_checkpoint
from paperlib.schedules import schedule_factor
from paperlib.seq2seq import ReverseCopyModel
from paperlib.stacked import StackedModels

VALID_OPTIMIZERS = ("adam", "radam")
SCHEDULES = ("constant", "cosine", "linear")  # the decays of paperlib.schedules over a run's steps


def token_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean per-token cross-entropy (nats) of logits [B, L, V] against targets [B, L]."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@dataclass(frozen=True)
class TrainSettings:
    """One training run: ``steps`` updates on batches drawn epoch by epoch from a fixed training set."""

    steps: int
    batch_size: int
    lr: float
    l2: float = 0.0  # weight decay, i.e. the gradient of (l2 / 2) ||θ||²
    optimizer: str = "adam"
    beta1: float = 0.0  # Melis ch. 2: Adam with β1 = 0
    clip_norm: float = 10.0  # <= 0: no clipping
    log_every: int = 50
    schedule: str = "constant"  # or cosine / linear decay to 0 over the steps (paperlib.schedules.schedule_factor)

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.optimizer not in VALID_OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(VALID_OPTIMIZERS)}, got {self.optimizer!r}")
        if self.steps < 1 or self.batch_size < 1 or self.log_every < 1:
            raise ValueError("steps, batch_size and log_every must be positive")
        if self.lr <= 0 or self.l2 < 0 or not 0 <= self.beta1 < 1:
            raise ValueError(f"need lr > 0, l2 >= 0 and 0 <= beta1 < 1, got {self.lr}, {self.l2}, {self.beta1}")


# what every model of a stack shares (one step takes one batch shape and one schedule): all but lr and l2
SHARED_SETTINGS = tuple(f.name for f in fields(TrainSettings) if f.name not in ("lr", "l2"))

def _check_data(model: ReverseCopyModel, data: ReverseCopyData) -> None:
    if data.vocab_size != model.vocab_size:
        raise ValueError(f"data vocabulary {data.vocab_size} does not match the model's {model.vocab_size}")


def train_model(model: ReverseCopyModel, data: ReverseCopyData, settings: TrainSettings,
                seed: int = 0) -> list[dict[str, float]]:
    """Train with teacher forcing; returns the mean training loss over every ``log_every`` steps.

    The decoder is fed ``data.decoder_inputs`` (marker + reversed source shifted by one) and scored
    on ``data.targets`` (the reversed source).
    """
    _check_data(model, data)
    kwargs = dict(lr=settings.lr, betas=(settings.beta1, 0.999), weight_decay=settings.l2)
    optimizer = (torch.optim.RAdam if settings.optimizer == "radam" else torch.optim.Adam)(model.parameters(), **kwargs)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)  # the order is drawn on the CPU, batches move to the device
    num = data.source.shape[0]
    order, cursor = torch.randperm(num, generator=generator), 0
    curve, running, count = [], 0.0, 0
    model.train()
    for step in range(1, settings.steps + 1):
        if settings.schedule != "constant":
            for group in optimizer.param_groups:
                group["lr"] = settings.lr * schedule_factor(settings.schedule, (step - 1) / settings.steps)
        if cursor + settings.batch_size > num:  # next epoch
            order, cursor = torch.randperm(num, generator=generator), 0
        index = order[cursor : cursor + settings.batch_size]
        cursor += settings.batch_size
        logits = model(data.source[index].to(device), data.decoder_inputs[index].to(device))  # [B, L, V]
        loss = token_cross_entropy(logits, data.targets[index].to(device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if settings.clip_norm > 0:
            nn.utils.clip_grad_norm_(model.parameters(), settings.clip_norm)
        optimizer.step()
        value = loss.item()
        if not math.isfinite(value):
            raise FloatingPointError(f"training diverged at step {step} (loss {value})")
        running, count = running + value, count + 1
        if step % settings.log_every == 0 or step == settings.steps:
            curve.append({"step": step, "loss": running / count})
            running, count = 0.0, 0
    return curve


@torch.no_grad()
def evaluate(model: ReverseCopyModel, data: ReverseCopyData, batch_size: int = 256) -> dict[str, float]:
    """Per-token cross-entropy (nats) and teacher-forced argmax accuracy over all of ``data``."""
    _check_data(model, data)
    model.eval()
    device = next(model.parameters()).device
    total, correct, tokens = 0.0, 0, 0
    for start in range(0, data.source.shape[0], batch_size):
        part = slice(start, start + batch_size)
        logits = model(data.source[part].to(device), data.decoder_inputs[part].to(device))  # [b, L, V]
        targets = data.targets[part].to(device)
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum").item()
        correct += (logits.argmax(-1) == targets).sum().item()
        tokens += targets.numel()
    return {"cross_entropy": total / tokens, "token_accuracy": correct / tokens}


def train_stacked(models: Sequence[ReverseCopyModel], data: ReverseCopyData, settings: Sequence[TrainSettings],
                  seeds: Sequence[int], checkpoint: str | os.PathLike | None = None,
                  checkpoint_every: int = 1000) -> list[list[dict[str, float]] | None]:
    """Train ``models`` (one shape) together; model m with ``settings[m]`` and batch order ``seeds[m]``.

    With ``checkpoint`` (a path), the training state is saved there every ``checkpoint_every`` steps and, when the
    file exists, training continues from it (the models as built, the same settings and seeds: checked); the caller
    removes it once the results are kept.

    Returns each model's training curve as :func:`train_model` reports it, or None for a model whose training loss
    became non-finite (it stopped updating at that step; :func:`train_model` raises ``FloatingPointError`` there).
    The settings may differ in learning rate and L2 penalty only (:data:`SHARED_SETTINGS` must agree).
    """
    if not models:
        raise ValueError("train_stacked needs at least one model")
    if len(settings) != len(models) or len(seeds) != len(models):
        raise ValueError(f"need one TrainSettings and one seed per model: {len(models)} models, "
                         f"{len(settings)} settings, {len(seeds)} seeds")
    first = settings[0]
    for name in SHARED_SETTINGS:
        values = {getattr(s, name) for s in settings}
        if len(values) > 1:
            raise ValueError(f"models trained as one stack must share {name}; got {sorted(values, key=str)}")
    for index, model in enumerate(models):
        _check_data(model, data)
        if repr(model) != repr(models[0]):  # a stacked pass runs every model through model 0's modules
            raise ValueError(f"model {index} is configured differently from model 0 (sizes, rounds, rank, zigzag or "
                             "capped input gate); only models of one configuration can be stacked")
    stack = StackedModels(models)
    kind = torch.optim.RAdam if first.optimizer == "radam" else torch.optim.Adam
    optimizer = kind([{"params": list(m.parameters()), "lr": s.lr, "weight_decay": s.l2}
                      for m, s in zip(models, settings)], betas=(first.beta1, 0.999))
    device = next(models[0].parameters()).device
    generators = [torch.Generator().manual_seed(seed) for seed in seeds]  # as train_model: each run's own order
    num, size = data.source.shape[0], first.batch_size
    orders = [torch.randperm(num, generator=g) for g in generators]
    cursors = [0] * len(models)
    curves: list[list[dict[str, float]]] = [[] for _ in models]
    running, counts = [0.0] * len(models), [0] * len(models)
    stopped = [False] * len(models)
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every}")
    identity = {"settings": [repr(s) for s in settings], "seeds": list(seeds), "models": repr(models[0]),
                "examples": num}
    done = 0
    if checkpoint is not None and os.path.isfile(checkpoint):
        # the batch orders and their generators live on the CPU, as the examples they index
        saved = load_checkpoint(checkpoint, device, cpu_keys=frozenset({"generators", "orders"}))
        if saved["identity"] != identity:
            raise ValueError(f"checkpoint {checkpoint} was written by another stack (settings, seeds or models differ)")
        for model, weights in zip(models, saved["models"]):
            model.load_state_dict(weights)
        optimizer.load_state_dict(saved["optimizer"])
        for generator, state in zip(generators, saved["generators"]):
            generator.set_state(state)
        done, orders, cursors, curves = saved["step"], saved["orders"], saved["cursors"], saved["curves"]
        running, counts, stopped = saved["running"], saved["counts"], saved["stopped"]
    for model in models:
        model.train()
    for step in range(done + 1, first.steps + 1):
        live = [i for i, done in enumerate(stopped) if not done]
        if not live:
            break
        if first.schedule != "constant":
            factor = schedule_factor(first.schedule, (step - 1) / first.steps)
            for group, s in zip(optimizer.param_groups, settings):
                group["lr"] = s.lr * factor
        batches = []
        for i in live:
            if cursors[i] + size > num:  # next epoch
                orders[i], cursors[i] = torch.randperm(num, generator=generators[i]), 0
            batches.append(orders[i][cursors[i] : cursors[i] + size])
            cursors[i] += size
        index = torch.stack(batches)  # [M, B]
        logits = stack.call(lambda model, source, inputs: model(source, inputs), data.source[index].to(device),
                            data.decoder_inputs[index].to(device), members=live)  # [M, B, L, V]
        targets = data.targets[index].to(device)  # [M, B, L]
        losses = F.cross_entropy(logits.flatten(0, 2), targets.flatten(), reduction="none").view(len(live), -1).mean(1)
        values = losses.detach().tolist()
        keep = [j for j, value in enumerate(values) if math.isfinite(value)]
        optimizer.zero_grad(set_to_none=True)
        if keep:
            losses[keep].sum().backward()  # model m's loss reaches model m's parameters only
        for j, i in enumerate(live):
            if j not in keep:
                stopped[i] = True
                for p in models[i].parameters():
                    p.grad = None  # its gradient is NaN through the stacking; without one, the optimizer skips it
            elif first.clip_norm > 0:
                nn.utils.clip_grad_norm_(models[i].parameters(), first.clip_norm)
        if keep:
            optimizer.step()
        for j in keep:
            i = live[j]
            running[i], counts[i] = running[i] + values[j], counts[i] + 1
            if step % first.log_every == 0 or step == first.steps:
                curves[i].append({"step": step, "loss": running[i] / counts[i]})
                running[i], counts[i] = 0.0, 0
        if checkpoint is not None and step % checkpoint_every == 0 and step < first.steps:
            save_torch_atomic({"identity": identity, "step": step, "models": [m.state_dict() for m in models],
                               "optimizer": optimizer.state_dict(), "generators": [g.get_state() for g in generators],
                               "orders": orders, "cursors": cursors, "curves": curves, "running": running,
                               "counts": counts, "stopped": stopped}, checkpoint)
    return [None if halted else curve for halted, curve in zip(stopped, curves)]


__all__ = ["SCHEDULES", "SHARED_SETTINGS", "VALID_OPTIMIZERS", "TrainSettings", "evaluate", "token_cross_entropy",
           "train_model", "train_stacked"]
