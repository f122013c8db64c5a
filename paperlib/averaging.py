"""Iterate averaging: Two-Tailed Averaging (2TA) and its baselines, Melis thesis ch. 3.

Two layers:

- :class:`TwoTailedAverage` is the algorithm on flat parameter vectors (Algorithms 1 and 2), testable in
  isolation: ``add(theta)`` after every optimizer step, ``evaluate(f)`` every E steps.
- Wrappers any ``nn.Module`` can use during training share the :class:`WeightAverager` interface:
  ``update()`` after each optimizer step, ``evaluate(loss_fn)`` every E steps (or ``step(loss_fn)`` for
  both), ``averaged_weights()`` to swap the current estimate in (and the raw weights back), and
  ``state_dict()`` / ``load_state_dict()`` for exact resume:

  * :class:`TwoTailedAveragedModel` -- 2TA;
  * :class:`IterateAveragedModel` -- Polyak, Tail Averaging eq. (3.2), SWA and EMA eq. (3.1), all on top of
    ``torch.optim.swa_utils.AveragedModel``;
  * :class:`PlateauTriggeredAveragedModel` -- Tail Averaging whose start is triggered when the validation
    loss stops improving (Merity et al. 2017, NT-ASGD; used to train the Mogrifier, thesis §2.2.2);
  * :class:`RawWeights` -- no averaging.

  :func:`build_averager` picks one by name.

Buffers (e.g. batch-norm statistics) are never averaged: every wrapper swaps *parameters* only, so the
averaged weights are always used together with the raw model's current buffers. Callers that need averaged
statistics should recompute them (``torch.optim.swa_utils.update_bn``) inside ``averaged_weights()``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.utils import parameters_to_vector
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

# Fig. 3.6: the loss bottoms out at 40E and the reset fires at 43E, i.e. after three evaluations without
# improvement.
DEFAULT_PATIENCE = 3

AVERAGER_KINDS = ("none", "2ta", "ta", "ema", "swa", "polyak")


class _Record:
    """Best loss of one running average since it (re)started, and evaluations since that best."""

    __slots__ = ("best", "bad")

    def __init__(self, best: float = math.inf, bad: int = 0) -> None:
        self.best, self.bad = best, bad

    def observe(self, loss: float) -> None:
        if loss < self.best:
            self.best, self.bad = loss, 0
        else:
            self.bad += 1


class TwoTailedAverage:
    """Two-Tailed Averaging on flat parameter vectors, Melis thesis Algorithms 1 (core) and 2 (extensions).

    Keeps a short and a long running average of the iterates, theta^S and theta^L with lengths S <= L.
    ``add(theta)`` is ``add_weights`` (Alg. 1 lines 3-5); ``evaluate(f)`` is ``evaluate_and_adapt``
    (Alg. 1 lines 10-15, or Alg. 2 when ``extensions=True``). The long average is the estimate of the optimal
    tail average avg(n, Delta(n)).

    Algorithm 2 leaves "stagnating" open; here an average stagnates when its loss has not improved on its
    best since it (re)started for ``patience`` consecutive evaluations. The long average inherits the
    record of the short average it continues after a switch. The reinitialisation test ``L = E`` of
    Alg. 2 line 9 is read as "the long average holds only the iterates added since the previous evaluation",
    so the evaluation period need not be given. When S = L the two averages are the same vector and f is
    evaluated once; this is a saving, not a change (Alg. 1 then always switches).
    """

    def __init__(self, extensions: bool = True, patience: int = DEFAULT_PATIENCE) -> None:
        if patience < 1:
            raise ValueError(f"patience must be a positive number of evaluations, got {patience}")
        self.extensions = extensions
        self.patience = patience
        self.short_len = 0  # S
        self.long_len = 0  # L
        self.short_avg: Tensor | None = None  # theta^S
        self.long_avg: Tensor | None = None  # theta^L
        self.last: Tensor | None = None  # the most recent iterate, the "non-averaged weights" of Alg. 2
        self.steps_since_eval = 0
        self.using_raw = False  # whether the last evaluation fell back to the non-averaged weights
        # What the last evaluation did to the averages: "keep", "switch" (F^S <= F^L), "reset_long" (switch
        # forced by a stagnating long average) or "reset_short" (stagnating short average emptied). A
        # reinitialisation (Alg. 2 line 10) shows as using_raw with long_len == 0.
        self.last_action = "keep"
        self._short_record = _Record()
        self._long_record = _Record()

    def add(self, theta: Tensor) -> None:
        """``add_weights``, Alg. 1 lines 3-5: incremental means theta^X += (theta - theta^X) / (X + 1)."""
        theta = theta.detach()
        if self.short_avg is None:
            self.short_avg, self.long_avg = torch.zeros_like(theta), torch.zeros_like(theta)
        self.short_len += 1
        self.short_avg.add_(theta - self.short_avg, alpha=1.0 / self.short_len)
        self.long_len += 1
        self.long_avg.add_(theta - self.long_avg, alpha=1.0 / self.long_len)
        if self.extensions:
            if self.last is None:
                self.last = theta.clone()
            else:
                self.last.copy_(theta)
        self.steps_since_eval += 1

    def _switch(self) -> None:
        """``switch``, Alg. 1 line 8: the short average becomes the long one and restarts empty."""
        self.long_len, self.short_len = self.short_len, 0
        self.long_avg.copy_(self.short_avg)
        self.short_avg.zero_()
        self._long_record, self._short_record = self._short_record, _Record()

    def evaluate(self, f: Callable[[Tensor], float | Tensor]) -> tuple[float, Tensor, int]:
        """``evaluate_and_adapt``, Alg. 1 lines 10-15 (Alg. 2 with extensions). Returns (loss, theta, length).

        f^X = +inf for an empty average is never needed: at least one ``add`` must separate evaluations, so
        S >= 1 here. The returned vector is internal state (theta^L, or the last iterate on fallback): do not
        modify it, and copy it if it must outlive the next ``add``.
        """
        if self.steps_since_eval == 0:
            raise ValueError("evaluate() needs at least one add() since the previous evaluation")
        loss_short = float(f(self.short_avg))
        loss_long = loss_short if self.short_len == self.long_len else float(f(self.long_avg))
        period, self.steps_since_eval = self.steps_since_eval, 0
        self.using_raw, self.last_action = False, "keep"
        if not self.extensions:
            if loss_short <= loss_long:
                loss_long = loss_short
                self._switch()
                self.last_action = "switch"
            return loss_long, self.long_avg, self.long_len

        loss_raw = float(f(self.last))
        self._short_record.observe(loss_short)
        self._long_record.observe(loss_long)
        if loss_short <= loss_long or self._long_record.bad >= self.patience:
            self.last_action = "switch" if loss_short <= loss_long else "reset_long"
            loss_long = loss_short
            self._switch()
        elif self._short_record.bad >= self.patience:
            self.short_len = 0
            self.short_avg.zero_()
            self._short_record = _Record()
            self.last_action = "reset_short"
        if self.long_len > 1 and loss_raw <= loss_long:
            if self.long_len == period:
                # The raw weights have beaten every average so far: start both averages afresh.
                self.short_len, self.long_len = 0, 0
                self.short_avg.zero_()
                self.long_avg.zero_()
                self._short_record, self._long_record = _Record(), _Record()
            self.using_raw = True
            return loss_raw, self.last, 1
        return loss_long, self.long_avg, self.long_len

    def state_dict(self) -> dict[str, Any]:
        """Everything ``evaluate`` and ``add`` depend on, so that resuming reproduces the run exactly."""
        return {
            "extensions": self.extensions,
            "patience": self.patience,
            "short_len": self.short_len,
            "long_len": self.long_len,
            "short_avg": None if self.short_avg is None else self.short_avg.clone(),
            "long_avg": None if self.long_avg is None else self.long_avg.clone(),
            "last": None if self.last is None else self.last.clone(),
            "steps_since_eval": self.steps_since_eval,
            "using_raw": self.using_raw,
            "last_action": self.last_action,
            "short_record": (self._short_record.best, self._short_record.bad),
            "long_record": (self._long_record.best, self._long_record.bad),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["extensions"], state["patience"]) != (self.extensions, self.patience):
            raise ValueError(
                f"state is for extensions={state['extensions']}, patience={state['patience']}; "
                f"this object has extensions={self.extensions}, patience={self.patience}"
            )
        self.short_len, self.long_len = int(state["short_len"]), int(state["long_len"])
        for name in ("short_avg", "long_avg", "last"):
            setattr(self, name, None if state[name] is None else state[name].clone())
        self.steps_since_eval = int(state["steps_since_eval"])
        self.using_raw = bool(state["using_raw"])
        self.last_action = str(state["last_action"])
        self._short_record = _Record(*state["short_record"])
        self._long_record = _Record(*state["long_record"])


class AveragingReport(NamedTuple):
    """One evaluation: the validation loss of the weights an averager currently recommends."""

    step: int  # optimizer steps taken so far
    loss: float
    length: int  # iterates in the recommended weights; 1 means the raw (non-averaged) weights


def _flat_parameters(module: nn.Module) -> Tensor:
    return parameters_to_vector(module.parameters()).detach()  # [P]


@torch.no_grad()
def _copy_into_parameters(vec: Tensor, module: nn.Module) -> None:
    # Not torch's vector_to_parameters: it rebinds `param.data` to views of `vec`, which would alias the
    # parameters with an averager's internal state (and modifying one would silently change the other).
    offset = 0
    for p in module.parameters():
        p.copy_(vec[offset : offset + p.numel()].view_as(p))
        offset += p.numel()


class WeightAverager:
    """Common interface of the averaging wrappers for an ``nn.Module`` under training.

    Per optimizer step call ``update()``; every ``evaluate_every`` steps call ``evaluate(loss_fn)``
    (``step(loss_fn)`` does both). ``loss_fn(module)`` returns the validation loss of the weights currently
    in ``module``; it is responsible for eval mode and ``torch.no_grad()`` where wanted. Only parameters are
    swapped; buffers always stay those of the raw model (see the module docstring). The module's own
    ``state_dict`` is not part of an averager's: checkpoint both.
    """

    def __init__(self, module: nn.Module, evaluate_every: int) -> None:
        if evaluate_every < 1:
            raise ValueError(f"evaluate_every must be a positive number of steps, got {evaluate_every}")
        self.module = module
        self.evaluate_every = evaluate_every
        self.steps = 0

    def update(self) -> None:
        """Record the weights after an optimizer step (iterate theta_t, t = steps)."""
        self.steps += 1
        self._record()

    def step(self, loss_fn: Callable[[nn.Module], float | Tensor]) -> AveragingReport | None:
        """``update()``, then ``evaluate(loss_fn)`` if an evaluation is due."""
        self.update()
        return self.evaluate(loss_fn) if self.steps % self.evaluate_every == 0 else None

    def evaluate(self, loss_fn: Callable[[nn.Module], float | Tensor]) -> AveragingReport:
        """Validation loss of the recommended weights (for 2TA also adapts the averages)."""
        return AveragingReport(self.steps, self._loss_of(self.recommended(), loss_fn), self.recommended_length())

    def recommended(self) -> Tensor | None:
        """Flat parameters to use now; ``None`` means the raw weights."""
        return None

    def recommended_length(self) -> int:
        return 1

    def _record(self) -> None:
        """Hook for subclasses: the module now holds iterate theta_{steps}."""

    def _loss_of(self, vec: Tensor | None, loss_fn: Callable[[nn.Module], float | Tensor]) -> float:
        with self._swapped(vec):
            return float(loss_fn(self.module))

    @contextlib.contextmanager
    def _swapped(self, vec: Tensor | None) -> Iterator[nn.Module]:
        if vec is None:
            yield self.module
            return
        raw = _flat_parameters(self.module).clone()
        _copy_into_parameters(vec, self.module)
        try:
            yield self.module
        finally:
            _copy_into_parameters(raw, self.module)

    def averaged_weights(self) -> contextlib.AbstractContextManager[nn.Module]:
        """Context manager: the recommended weights are in ``module`` inside, the raw ones are restored after."""
        return self._swapped(self.recommended())

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])


class RawWeights(WeightAverager):
    """No averaging: evaluates and recommends the raw weights (kind ``none``)."""


class TwoTailedAveragedModel(WeightAverager):
    """Two-Tailed Averaging of a module's parameters, Melis thesis Algorithms 1 and 2 (see TwoTailedAverage).

    The training-loop part of Alg. 1 (lines 17-21): ``update()`` adds theta_t, t = 1, 2, ... (the initial
    weights theta_0 are not averaged); ``evaluate`` runs ``evaluate_and_adapt`` with f = loss_fn on the
    module with the candidate weights swapped in. Between evaluations the recommended weights are theta^L, or
    the raw weights if the last evaluation fell back to them (Alg. 2 line 11).
    """

    def __init__(
        self,
        module: nn.Module,
        evaluate_every: int,
        extensions: bool = True,
        patience: int = DEFAULT_PATIENCE,
    ) -> None:
        super().__init__(module, evaluate_every)
        self.average = TwoTailedAverage(extensions=extensions, patience=patience)

    def _record(self) -> None:
        self.average.add(_flat_parameters(self.module))

    def evaluate(self, loss_fn: Callable[[nn.Module], float | Tensor]) -> AveragingReport:
        loss, _, length = self.average.evaluate(lambda vec: self._loss_of(vec, loss_fn))
        return AveragingReport(self.steps, loss, length)

    def recommended(self) -> Tensor | None:
        if self.average.using_raw or self.average.long_len == 0:
            return None
        return self.average.long_avg

    def recommended_length(self) -> int:
        return 1 if self.recommended() is None else self.average.long_len

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "average": self.average.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.average.load_state_dict(state["average"])


class IterateAveragedModel(WeightAverager):
    """Polyak, Tail Averaging (eq. 3.2), SWA and EMA (eq. 3.1) via ``torch.optim.swa_utils.AveragedModel``.

    Iterates are indexed as in the thesis: theta_0 is the module's weights at construction and theta_t the
    weights after the t-th ``update()``. theta_t enters the average if t >= start and (t - start) % every == 0:

    - Polyak: start=0, every=1, the uniform average of theta_0..theta_t;
    - Tail Averaging eq. (3.2): start=s; before s the raw weights are recommended (theta-bar_t = theta_t);
    - SWA: Tail Averaging of every ``every``-th iterate (the periodic subsampling of Izmailov et al.);
    - EMA eq. (3.1) with constant beta = ``ema_decay``: theta-bar_start = theta_start, then
      theta-bar_t = (1 - beta) theta_t + beta theta-bar_{t-1}. The thesis also allows a scheduled beta_t;
      only the constant form is provided.
    """

    def __init__(
        self,
        module: nn.Module,
        evaluate_every: int,
        start: int | None = 0,
        every: int = 1,
        ema_decay: float | None = None,
    ) -> None:
        super().__init__(module, evaluate_every)
        if start is not None and start < 0:
            raise ValueError(f"start must be a non-negative step, got {start}")
        if every < 1:
            raise ValueError(f"every must be a positive number of steps, got {every}")
        if ema_decay is not None and not 0.0 <= ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {ema_decay}")
        self.start = start
        self.every = every
        self.ema_decay = ema_decay
        multi_avg_fn = None if ema_decay is None else get_ema_multi_avg_fn(ema_decay)
        self.averaged = AveragedModel(module, multi_avg_fn=multi_avg_fn)
        self._record()  # theta_0

    def _record(self) -> None:
        if self.start is not None and self.steps >= self.start and (self.steps - self.start) % self.every == 0:
            self.averaged.update_parameters(self.module)

    @property
    def n_averaged(self) -> int:
        return int(self.averaged.n_averaged)

    def recommended(self) -> Tensor | None:
        return _flat_parameters(self.averaged.module) if self.n_averaged > 0 else None

    def recommended_length(self) -> int:
        """Iterates that entered the average (for EMA all of them, however small their weights now)."""
        return max(self.n_averaged, 1)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "start": self.start, "averaged": self.averaged.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.start = state["start"]
        self.averaged.load_state_dict(state["averaged"])


class PlateauTriggeredAveragedModel(IterateAveragedModel):
    """Tail Averaging started when the validation loss plateaus (Merity et al. 2017, NT-ASGD trigger).

    As in the Mogrifier setup (thesis §2.2.2): averaging is switched on when the raw validation loss is worse
    than the best one from more than ``nonmono`` evaluations back, or at step ``latest_start`` at the latest
    (the thesis used 80% of the training time). Averaging starts with the iterate after the triggering
    evaluation, as when NT-ASGD switches from SGD to averaged SGD.
    """

    def __init__(
        self,
        module: nn.Module,
        evaluate_every: int,
        nonmono: int = 5,
        latest_start: int | None = None,
        every: int = 1,
    ) -> None:
        if nonmono < 1:
            raise ValueError(f"nonmono must be a positive number of evaluations, got {nonmono}")
        self.nonmono = nonmono
        self.latest_start = latest_start
        self.history: list[float] = []  # raw validation losses before the trigger
        super().__init__(module, evaluate_every, start=None, every=every)

    def _record(self) -> None:
        if self.start is None and self.latest_start is not None and self.steps >= self.latest_start:
            self.start = self.steps
        super()._record()

    def evaluate(self, loss_fn: Callable[[nn.Module], float | Tensor]) -> AveragingReport:
        if self.start is not None:
            return super().evaluate(loss_fn)
        loss = self._loss_of(None, loss_fn)
        if len(self.history) > self.nonmono and loss > min(self.history[: -self.nonmono]):
            self.start = self.steps + 1
        self.history.append(loss)
        return AveragingReport(self.steps, loss, 1)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "history": list(self.history)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.history = list(state["history"])


# Options each kind accepts, besides `evaluate_every`.
_KIND_OPTIONS: dict[str, tuple[str, ...]] = {
    "none": (),
    "2ta": ("extensions", "patience"),
    "ta": ("start", "nonmono", "latest_start"),
    "ema": ("decay", "start"),
    "swa": ("start", "every"),
    "polyak": (),
}


def check_averaging(kind: str, options: dict[str, Any]) -> None:
    """Raise ValueError unless ``options`` are valid for averager ``kind`` (names and combinations)."""
    if kind not in _KIND_OPTIONS:
        raise ValueError(f"unknown averaging kind {kind!r}; valid choices: {', '.join(AVERAGER_KINDS)}")
    unknown = sorted(set(options) - set(_KIND_OPTIONS[kind]))
    if unknown:
        valid = ", ".join(_KIND_OPTIONS[kind]) or "none"
        raise ValueError(f"unknown options {unknown} for averaging kind {kind!r}; valid options: {valid}")
    if kind == "swa" and "start" not in options:
        raise ValueError("averaging kind 'swa' needs start=<step>; optional: every=<steps>")
    if kind == "ta":  # a fixed start (eq. 3.2) or the plateau trigger, not both
        if ("start" in options) == ("nonmono" in options):
            raise ValueError("averaging kind 'ta' needs exactly one of start=<step> or nonmono=<evaluations>")
        if "start" in options and "latest_start" in options:
            raise ValueError("latest_start only applies to the plateau trigger (nonmono=...)")


def build_averager(kind: str, module: nn.Module, evaluate_every: int, **options: Any) -> WeightAverager:
    """Averager by name: none, 2ta, ta (``start=s``, or plateau-triggered with ``nonmono``), ema, swa, polyak."""
    check_averaging(kind, options)
    if kind == "none":
        return RawWeights(module, evaluate_every)
    if kind == "2ta":
        return TwoTailedAveragedModel(module, evaluate_every, **options)
    if kind == "polyak":
        return IterateAveragedModel(module, evaluate_every, start=0)
    if kind == "ema":
        return IterateAveragedModel(
            module, evaluate_every, start=options.get("start", 0), ema_decay=options.get("decay", 0.999)
        )
    if kind == "swa":
        return IterateAveragedModel(module, evaluate_every, **options)
    if "start" in options:  # kind == "ta" with a fixed start (eq. 3.2), else the plateau trigger
        return IterateAveragedModel(module, evaluate_every, start=options["start"])
    return PlateauTriggeredAveragedModel(
        module, evaluate_every, nonmono=options["nonmono"], latest_start=options.get("latest_start")
    )
