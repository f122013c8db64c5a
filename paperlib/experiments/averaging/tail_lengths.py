"""The optimal tail at every evaluation of a run: the loss of the average of the last k evaluation periods' iterates
for every k, beside the lengths 2TA picked (Melis thesis §3.1 Fig. 3.1 and §3.5 Proposition 4).

Fig. 3.1's caption says that "in any interval labelled with L, there is at least one point where the length of the
long average is near optimal"; Proposition 4 makes it exact: between two subsequent switch points the long average
equals the optimal length Delta(n) rounded down or up to a multiple of the evaluation period E at least once.
Checking it needs Delta(n), the tail length whose average minimises the validation loss f at evaluation n, which no
averager keeps. :class:`TailLengths` watches the same iterates as 2TA (a ``monitor`` of
:class:`paperlib.train.Trainer`, evaluated every E steps like 2TA): it keeps each period's sum of iterates, and at the
t-th evaluation it scores the average of the last k periods (k E iterates) for every k = 1..t with the trainer's own
f. The best of them is the optimal tail as far as multiples of E resolve it, which is the resolution Proposition 4
speaks in; its length is reported as the monitor's length, its loss as its loss. The losses of every k are kept
(``curves``), so the loss of 2TA's long average (k = L / E) can be read beside the best.

Cost: t validation passes at the t-th evaluation, T (T + 1) / 2 over a run of T evaluations, and one period sum per
period in memory. Each period's sum is also written once to ``store`` (a folder of the run), so that a resumed run
gets them back; the checkpoint holds only how many there are and the running sum of the current period.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector

from paperlib.atomic_files import save_torch_atomic
from paperlib.averaging import AveragingReport, WeightAverager


class TailLengths(WeightAverager):
    """Every tail average of whole evaluation periods, scored at every evaluation (see the module docstring).
    ``curves[i][k - 1]`` is the loss of the average of the last k periods at the (i + 1)-th evaluation."""

    def __init__(self, module: nn.Module, evaluate_every: int, store: str | Path) -> None:
        super().__init__(module, evaluate_every)
        self.store = Path(store)
        self.periods: list[Tensor] = []  # sum of the iterates of each finished period, oldest first
        self.current: Tensor | None = None  # running sum of the period in progress
        self.curves: list[list[float]] = []

    def _record(self) -> None:
        vec = parameters_to_vector(self.module.parameters()).detach()
        self.current = vec.clone() if self.current is None else self.current.add_(vec)
        if self.steps % self.evaluate_every == 0:
            self.store.mkdir(parents=True, exist_ok=True)
            save_torch_atomic(self.current.cpu(), self._period_path(len(self.periods)))
            self.periods.append(self.current)
            self.current = None

    def _period_path(self, index: int) -> Path:
        return self.store / f"period_{index:05d}.pt"

    def evaluate(self, loss_fn: Callable[[nn.Module], float | Tensor]) -> AveragingReport:
        """Score the average of the last k periods for k = 1..t (newest first, summed backwards) and report the best:
        its loss and its length in iterates (k E)."""
        if not self.periods:
            raise RuntimeError("TailLengths is evaluated at the end of an evaluation period, after update()")
        losses, total = [], torch.zeros_like(self.periods[-1])
        for k, period in enumerate(reversed(self.periods), start=1):
            total += period
            losses.append(self._loss_of(total / (k * self.evaluate_every), loss_fn))
        self.curves.append(losses)
        best = min(range(len(losses)), key=losses.__getitem__)
        return AveragingReport(self.steps, losses[best], (best + 1) * self.evaluate_every)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "periods": len(self.periods), "current": self.current,
                "curves": [list(c) for c in self.curves]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])
        device = next(self.module.parameters()).device
        self.periods = [torch.load(self._period_path(i), map_location=device) for i in range(int(state["periods"]))]
        self.current = state["current"]
        self.curves = [list(c) for c in state["curves"]]


def best_lengths(curves: list[list[float]], period: int) -> list[int]:
    """Per evaluation, the best tail length in iterates (a multiple of ``period``): the argmin of that evaluation's
    curve, the shortest where two tie."""
    return [(min(range(len(c)), key=c.__getitem__) + 1) * period for c in curves]


__all__ = ["TailLengths", "best_lengths"]
