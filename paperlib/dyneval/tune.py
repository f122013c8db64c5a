"""Choosing dynamic evaluation's hyperparameters on validation data (Krause §4.5, Melis Table 2.6)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from torch import Tensor, nn
from paperlib.dyneval.core import DynamicEvalResult
from paperlib.dyneval.evaluate import dynamic_evaluate


TUNABLE = ("lr", "decay", "eps", "segment_len", "momentum", "alpha")


@dataclass
class TuningResult:
    """Best setting, its mean validation NLL (nats/token), every trial, and the best trial's per-token losses
    (``result``: a :class:`DynamicEvalResult` without its adapted weights and state, which are not kept), so a caller
    that wants more of the tuned evaluation than its mean (per-block losses, say) need not run it again."""

    best: dict[str, Any]
    nll: float
    trials: list[dict[str, Any]] = field(default_factory=list)
    result: DynamicEvalResult | None = None


def finite_nll(result: DynamicEvalResult) -> float:
    """The mean NLL of ``result``, +inf when it is not finite (a diverged run loses every comparison)."""
    nll = result.mean_nll()
    return nll if math.isfinite(nll) else math.inf


def tune_dynamic_evaluation(
    model: nn.Module,
    tokens: Tensor,
    *,
    grid: Mapping[str, Sequence[Any]] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
    search: str = "grid",
    n_trials: int = 20,
    seed: int = 0,
    **fixed: Any,
) -> TuningResult:
    """Tune dynamic evaluation by mean NLL on validation ``tokens``; ``fixed`` goes to :func:`dynamic_evaluate`.

    ``search``:

    * ``grid``: every combination of ``grid`` (e.g. ``{"lr": [...], "decay": [...]}``);
    * ``coordinate``: one pass over the keys of ``grid`` in order, trying each value of one key with the
      others at their best so far (starting from each list's first value); the thesis found the learning
      rate by far the most important, so it should come first;
    * ``optuna``: ``n_trials`` TPE trials over ``ranges`` ``{name: (low, high)}``, log-uniform for floats as
      in Melis Table 2.6 and uniform for ``segment_len``.
    """
    searches = ("grid", "coordinate", "optuna")
    if search not in searches:
        raise ValueError(f"unknown search {search!r}; valid searches: {', '.join(searches)}")
    space = ranges if search == "optuna" else grid
    if not space:
        raise ValueError(f"search {search!r} needs {'ranges' if search == 'optuna' else 'grid'}")
    unknown = sorted(set(space) - set(TUNABLE))
    if unknown:
        raise ValueError(f"cannot tune {unknown}; tunable: {', '.join(TUNABLE)}")
    trials: list[dict[str, Any]] = []
    kept: list[DynamicEvalResult] = []  # the losses of the first evaluation with the lowest NLL so far (as min())

    def evaluate(point: dict[str, Any]) -> float:
        result = dynamic_evaluate(model, tokens, **{**fixed, **point})
        nll = finite_nll(result)
        if not trials or nll < min(t["nll"] for t in trials):
            kept[:] = [DynamicEvalResult(result.losses)]
        trials.append({**point, "nll": nll})
        return nll

    if search == "grid":
        keys = list(space)
        for values in itertools.product(*(space[k] for k in keys)):
            evaluate(dict(zip(keys, values)))
    elif search == "coordinate":
        current = {k: v[0] for k, v in space.items()}
        best_nll = math.inf
        for key, values in space.items():
            for value in values:
                point = {**current, key: value}
                if any(point == {k: t[k] for k in point} for t in trials):
                    continue
                nll = evaluate(point)
                if nll < best_nll:
                    best_nll, current = nll, point
    else:
        import optuna

        def objective(trial: optuna.Trial) -> float:
            point = {}
            for key, (low, high) in space.items():
                if key == "segment_len":
                    point[key] = trial.suggest_int(key, int(low), int(high))
                else:
                    point[key] = trial.suggest_float(key, low, high, log=low > 0)
            return evaluate(point)

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        study.optimize(objective, n_trials=n_trials)
    best = min(trials, key=lambda t: t["nll"])
    return TuningResult({k: v for k, v in best.items() if k != "nll"}, best["nll"], trials, kept[0])


def learning_rate_sweep(
    evaluate: Callable[[float], float], start: float, factor: float = 1.2, max_evals: int = 30
) -> tuple[float, float, list[dict[str, float]]]:
    """Krause §5.4.1-5.4.2: raise η from ``start`` by ``factor`` until the validation loss stops improving.

    If the first raise is already worse than ``start`` (a start above the optimum), the sweep goes down
    by the same factor instead. Returns (best η, its loss, all trials in evaluation order).
    """
    if not start > 0 or not factor > 1 or max_evals < 2:
        raise ValueError(f"need start > 0, factor > 1 and max_evals >= 2, got {start}, {factor}, {max_evals}")
    trials: list[dict[str, float]] = []

    def run(lr: float) -> float:
        loss = evaluate(lr)
        loss = loss if math.isfinite(loss) else math.inf
        trials.append({"lr": lr, "nll": loss})
        return loss

    best_lr, best_loss = start, run(start)
    for direction in (factor, 1.0 / factor):
        lr, moved = best_lr * direction, False
        while len(trials) < max_evals:
            loss = run(lr)
            if loss >= best_loss:
                break
            best_lr, best_loss, moved = lr, loss, True
            lr *= direction
        if moved or len(trials) >= max_evals:
            break
    return best_lr, best_loss, trials
