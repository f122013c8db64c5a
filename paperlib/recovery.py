"""Recovery from surprising inputs: the loss right after a surprising character (Krause thesis §3.5.2, Fig. 3.3).

Krause's test, read from §3.5.2: run every model over the same test text and record its per-character
loss. The *surprising* characters are the 10% with the largest loss averaged over the models compared
(so the set is the same for every model and no model is favoured by its own mistakes). The profile of
a model is then its mean loss on those characters (k = 0) and on the characters 1, 2, ..., K steps after
them, beside its mean loss over all characters. The thesis reports, for mLSTM vs stacked LSTM on enwik8,
nearly equal losses on the surprising characters (6.27 vs 6.29 bits) but a larger mLSTM advantage one to
four steps later (2.26/2.04/1.61/1.51 vs 2.48/2.25/1.79/1.67 bits) than overall (1.42 vs 1.53 bits).
Melis (thesis §2.3.2) states the same hypothesis as "having just suffered a large loss, the loss on the
next time step will be smaller on average" and found it did not hold for the Mogrifier LSTM.

No input is inserted or perturbed: the surprising inputs are the test set's own. Index convention:
``losses[..., t]`` is the loss of predicting character t+1 from characters <= t, so if ``losses[t]`` is
large, character t+1 was surprising and ``losses[t + k]`` is the loss k steps after it was read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import torch
from torch import Tensor

LN2 = math.log(2.0)


@dataclass
class RecoveryProfile:
    """Losses (bits) around the surprising characters, per model.

    ``after[name][k]`` is the mean loss k steps after a surprising character (k = 0: on the character
    itself), ``overall[name]`` the mean loss over every scored position, ``positions`` the indices into
    the loss stream that were selected and ``threshold`` the smallest average loss among them.
    """

    fraction: float
    horizon: int
    positions: Tensor
    threshold: float
    after: dict[str, list[float]] = field(default_factory=dict)
    overall: dict[str, float] = field(default_factory=dict)
    losses: dict[str, Tensor] = field(default_factory=dict, repr=False, compare=False)  # bits per position [T]

    def excess(self, name: str) -> list[float]:
        """Loss k steps after a surprise minus the model's overall loss (0 = fully recovered)."""
        return [a - self.overall[name] for a in self.after[name]]

    def advantage(self, better: str, worse: str) -> list[float]:
        """``worse``'s loss minus ``better``'s, k = 0..K steps after a surprise (positive: ``better`` wins)."""
        return [w - b for b, w in zip(self.after[better], self.after[worse])]

    def overall_advantage(self, better: str, worse: str) -> float:
        return self.overall[worse] - self.overall[better]

    def recovers_faster(self, better: str, worse: str, step: int = 1) -> bool:
        """Krause's criterion: ``better``'s advantage ``step`` steps after a surprise exceeds its overall advantage."""
        if not 1 <= step <= self.horizon:
            raise ValueError(f"step must lie in 1..{self.horizon}, got {step}")
        return self.advantage(better, worse)[step] > self.overall_advantage(better, worse)

    def recovery_gap(self, better: str, worse: str, step: int = 1) -> tuple[float, float]:
        """Krause's criterion as a number with its standard error: ``better``'s advantage ``step`` steps after a
        surprise minus its overall advantage (positive: it recovers faster), and the standard error of that
        difference from the per-position paired differences (the mean after the surprises and the mean over all
        positions treated as independent). It measures which positions the text happens to hold, not training
        noise: with one trained model per cell, a gap inside twice it cannot say which model recovers faster."""
        if not 1 <= step <= self.horizon:
            raise ValueError(f"step must lie in 1..{self.horizon}, got {step}")
        paired = self.losses[worse] - self.losses[better]  # [T], positive where ``better`` wins
        after = paired[self.positions + step]
        gap = float(after.mean()) - float(paired.mean())
        return gap, math.sqrt(float(after.var()) / after.numel() + float(paired.var()) / paired.numel())

    def as_dict(self) -> dict:
        return {"fraction": self.fraction, "horizon": self.horizon, "surprising": int(self.positions.numel()),
                "threshold_bits": self.threshold, "after_bits": self.after, "overall_bits": self.overall}


def surprising_positions(losses: Tensor, fraction: float, horizon: int = 0) -> Tensor:
    """Indices of the ⌈fraction·N⌉ positions with the largest loss averaged over models, ``losses`` [M, T].

    Only positions t < T - horizon are candidates, so that t + horizon is scored for each of them
    (N = T - horizon). Ties are broken towards earlier positions, so the choice is deterministic.
    """
    if losses.dim() != 2 or losses.shape[0] < 1:
        raise ValueError(f"losses must be [models, T], got shape {tuple(losses.shape)}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    if horizon < 0 or horizon >= losses.shape[1]:
        raise ValueError(f"horizon must lie in 0..{losses.shape[1] - 1}, got {horizon}")
    usable = losses.shape[1] - horizon
    mean = losses[:, :usable].double().mean(0)  # [N], the models' average loss
    count = math.ceil(fraction * usable)
    return torch.sort(torch.argsort(mean, descending=True, stable=True)[:count]).values


def recovery_profile(losses: Mapping[str, Tensor], fraction: float = 0.1, horizon: int = 4,
                     unit: str = "nats") -> RecoveryProfile:
    """Krause's recovery test (§3.5.2, Fig. 3.3) on per-character losses ``{model: [T]}``, reported in bits.

    ``unit`` says whether the given losses are in ``nats`` (cross-entropy with natural log) or ``bits``.
    """
    if unit not in ("nats", "bits"):
        raise ValueError(f"unit must be 'nats' or 'bits', got {unit!r}")
    if not losses:
        raise ValueError("losses must name at least one model")
    names = list(losses)
    lengths = {tuple(v.shape) for v in losses.values()}
    if len(lengths) != 1 or len(next(iter(lengths))) != 1:
        raise ValueError(f"every model needs a 1-d loss stream of the same length; got shapes {sorted(lengths)}")
    stacked = torch.stack([losses[n].detach().double().cpu() for n in names])  # [M, T]
    if unit == "nats":
        stacked = stacked / LN2
    positions = surprising_positions(stacked, fraction, horizon)
    profile = RecoveryProfile(fraction, horizon, positions, float(stacked.mean(0)[positions].min()))
    for row, name in zip(stacked, names):
        profile.after[name] = [float(row[positions + k].mean()) for k in range(horizon + 1)]
        profile.overall[name] = float(row.mean())
        profile.losses[name] = row
    return profile
