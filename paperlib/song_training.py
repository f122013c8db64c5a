"""Training a model of songs (the LSTM-NADE of :mod:`paperlib.models.rnn_nade`) on piano rolls, Krause thesis §4.8.

§4.8 states the recipe only as "SGD with gradient norm clipping ... on the training sets", dropout, and
"hyperparameters for training were tuned to give the best validation performance"; the rest is ours and
stated here. Songs are sorted by length and cut into batches of ``batch_size`` consecutive songs (so that
little padding is computed), visited in a seeded random order every epoch. The loss of a batch is its mean
negative log-likelihood per real frame (padding excluded). Songs longer than ``bptt`` frames are trained by
truncated backpropagation through time: windows of ``bptt`` frames, the state carried and detached between
them, one update per window. After every epoch the validation log-likelihood per frame decides: the best
weights so far are kept; after ``patience`` epochs without improvement the learning rate is multiplied by
``lr_decay``, and training stops when it falls below ``min_lr``, after ``max_epochs`` or after
``max_seconds``. The best weights are loaded into the model at the end. ``optimizer="adam"`` is an option
beyond the seed (for short budgets).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from torch import Tensor, nn

from paperlib.data.music import pad_songs
from paperlib.dyneval.songs import static_evaluate_songs
from paperlib.models.rnn_nade import frame_mean_log_likelihood
from paperlib.models.state import detach_state

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class SongTrainConfig:
    """Settings of :func:`train_on_songs`; see the module docstring for what each does."""

    batch_size: int = 16  # songs per batch
    lr: float = 0.1
    optimizer: str = "sgd"
    momentum: float = 0.0  # SGD only
    clip_norm: float = 5.0  # gradient-norm clipping (§4.8); <= 0: none
    bptt: int | None = None  # frames per truncated-BPTT window; None: whole songs
    max_epochs: int = 100
    patience: int = 3
    lr_decay: float = 0.5
    min_lr: float = 1e-4
    max_seconds: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        for name in ("batch_size", "max_epochs", "patience"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.bptt is not None and (not isinstance(self.bptt, int) or self.bptt < 1):
            raise ValueError(f"bptt must be a positive integer or None, got {self.bptt!r}")
        if not (self.lr > 0 and 0 < self.lr_decay < 1 and self.min_lr >= 0 and 0 <= self.momentum < 1):
            raise ValueError("need lr > 0, 0 < lr_decay < 1, min_lr >= 0 and 0 <= momentum < 1; got "
                             f"lr={self.lr}, lr_decay={self.lr_decay}, min_lr={self.min_lr}, momentum={self.momentum}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"max_seconds must be positive or None, got {self.max_seconds}")


@dataclass
class SongTrainResult:
    """What training did: the best validation log-likelihood per frame, its epoch, and every epoch's record."""

    best_valid_ll: float
    best_epoch: int
    steps: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)


def length_batches(songs: Sequence[Tensor], batch_size: int) -> list[list[Tensor]]:
    """Songs sorted by length (stable), cut into batches of ``batch_size`` consecutive songs."""
    order = sorted(range(len(songs)), key=lambda i: songs[i].shape[0])
    return [[songs[i] for i in order[k : k + batch_size]] for k in range(0, len(order), batch_size)]


def _windows(frames: Tensor, lengths: Tensor, bptt: int | None):
    """(frames [B, w, N], real-frame lengths within the window [B]) per truncated-BPTT window."""
    steps = frames.shape[1]
    width = steps if bptt is None else bptt
    for start in range(0, steps, width):
        yield frames[:, start : start + width], (lengths - start).clamp(0, width)


def build_optimizer(model: nn.Module, config: SongTrainConfig) -> torch.optim.Optimizer:
    """SGD with ``config.momentum`` or Adam, at ``config.lr``: the optimizer :func:`train_on_songs` steps."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum)
    return torch.optim.Adam(model.parameters(), lr=config.lr)


def train_on_songs(
    model: nn.Module,
    train: Sequence[Tensor],
    valid: Sequence[Tensor],
    config: SongTrainConfig,
    log: Callable[[str], None] | None = None,
) -> SongTrainResult:
    """Train ``model`` (``forward(frames [B, T, N], state) -> (log P [B, T], state)``) on ``train`` songs."""
    if not train or not valid:
        raise ValueError("training needs at least one training and one validation song")
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    batches = length_batches(train, config.batch_size)
    optimizer = build_optimizer(model, config)
    lr = config.lr
    best_ll, best_epoch, best_state = -math.inf, 0, copy.deepcopy(model.state_dict())
    history: list[dict[str, float]] = []
    started, steps, stale = time.time(), 0, 0
    for epoch in range(1, config.max_epochs + 1):
        model.train()
        total, frames_seen = 0.0, 0
        for index in torch.randperm(len(batches), generator=generator).tolist():
            frames, lengths = pad_songs(batches[index], dtype)
            frames, lengths = frames.to(device), lengths.to(device)
            state = None
            for window, real in _windows(frames, lengths, config.bptt):
                if int(real.sum()) == 0:
                    break
                rows = real > 0  # songs that still have frames in this window
                log_probs, state = model(window, state)
                loss = -frame_mean_log_likelihood(log_probs[rows], real[rows])
                optimizer.zero_grad()
                loss.backward()
                if config.clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
                optimizer.step()
                state = detach_state(state)
                steps += 1
                total += float(loss.detach()) * int(real.sum())
                frames_seen += int(real.sum())
        valid_ll = static_evaluate_songs(model, valid, config.batch_size).log_likelihood_per_frame()
        history.append({"epoch": epoch, "train_ll": -total / frames_seen, "valid_ll": valid_ll, "lr": lr,
                        "seconds": round(time.time() - started, 1)})
        if log is not None:
            log(f"  epoch {epoch}: train {-total / frames_seen:.3f}  valid {valid_ll:.3f} nats/frame  lr {lr:g}")
        if valid_ll > best_ll:
            best_ll, best_epoch, best_state, stale = valid_ll, epoch, copy.deepcopy(model.state_dict()), 0
        else:
            stale += 1
            if stale >= config.patience:
                lr *= config.lr_decay
                stale = 0
                for group in optimizer.param_groups:
                    group["lr"] = lr
        if lr < config.min_lr or (config.max_seconds is not None and time.time() - started > config.max_seconds):
            break
    model.load_state_dict(best_state)
    return SongTrainResult(best_ll, best_epoch, steps, time.time() - started, history)
