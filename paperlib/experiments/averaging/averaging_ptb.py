"""Two-Tailed Averaging against tuned Tail Averaging and EMA on PTB (Melis thesis §3.6, Figs. 3.3–3.5).

One training run feeds the same iterates to every averager, so the methods are compared on an
identical trajectory (in the thesis each method had its own tuned run; sharing the trajectory
removes run-to-run noise from the comparison and costs one training run instead of many):

- 2TA at evaluation period E drives checkpoint selection (the primary averager);
- monitors: TA with several starts and EMA with several decays (the "tuned" baselines: the best
  of each grid by final loss, as the thesis tuned them to minimise the final loss), and 2TA at
  periods E/4 and 4E (the robustness to E of §3.6);
- the raw weights' loss at every evaluation;
- the loss of the average of the last k evaluation periods for every k at every evaluation, and the best of them
  (:class:`~paperlib.experiments.averaging.tail_lengths.TailLengths`): the optimal tail that Fig. 3.1 says 2TA's long
  average reaches once in every interval (Proposition 4).

A second, deliberately overfitting run (a small slice of the training data, no dropout) shows
the reset heuristic of Algorithm 2 (Fig. 3.5).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.averaging import build_averager
from paperlib.experiments.averaging.tail_lengths import TailLengths
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.stage import begin_stage, results_path, seed_everything
from paperlib.data import load_corpus, pinned_checksums
from paperlib.train import forget_stale_run
from paperlib.models import CELL_OPTIONS, VALID_CELLS, build_lm
from paperlib.experiments.common.provenance import provenance
from paperlib.atomic_files import write_json_atomic
from paperlib.train import Trainer, TrainConfig

OPTIMAL_TAIL = "optimal_tail"  # main run: the best tail of whole evaluation periods at every evaluation, and all


@register_experiment("averaging_ptb")
@dataclass(frozen=True)
class AveragingParams:
    """Settings of the 2TA comparison: one model, one main run, one overfitting run."""

    corpus: str
    model: dict  # {cell, hidden_size, num_layers, options}
    train: dict  # TrainConfig fields; eval_every is the evaluation period E
    valid_tokens: int  # validation tokens used at every evaluation
    ta_starts: list[float]  # tail-averaging starts, as fractions of max_steps
    ema_decays: list[float]
    period_factors: list[float]  # other 2TA evaluation periods, as multiples of E
    overfit_train_tokens: int
    overfit_train: dict  # TrainConfig fields of the overfitting run
    seed: int = 1
    threads: int = 2

    def __post_init__(self) -> None:
        if self.model.get("cell") not in VALID_CELLS:
            raise ValueError(f"model.cell must be one of {', '.join(VALID_CELLS)}")
        bad = sorted(set(self.model.get("options", {})) - set(CELL_OPTIONS[self.model["cell"]]))
        if bad:
            raise ValueError(f"model.options: unknown option(s) {bad}")
        for name in ("train", "overfit_train"):
            try:
                TrainConfig(**getattr(self, name))
            except TypeError as err:
                raise ValueError(f"{name}: {err}") from None
        if not all(0 <= s < 1 for s in self.ta_starts) or not all(0 < d < 1 for d in self.ema_decays):
            raise ValueError("ta_starts must lie in [0, 1) and ema_decays in (0, 1)")
        if any(f <= 0 for f in self.period_factors):
            raise ValueError("period_factors must be positive")


def _build_model(spec: dict[str, Any], vocab_size: int, seed: int) -> torch.nn.Module:
    seed_everything(seed)
    return build_lm(spec["cell"], vocab_size, spec["hidden_size"], spec["num_layers"], **spec.get("options", {}))


def _series(history: list[dict[str, Any]], monitor: str | None = None, key: str = "valid_nll") -> dict[str, list]:
    rows = [h for h in history if h.get("monitor") == monitor and key in h]
    return {"step": [h["step"] for h in rows], key: [h[key] for h in rows],
            **({k: [h.get(k) for h in rows] for k in ("short_len", "long_len", "action", "length",
                                                      "averaged_length") if any(k in h for h in rows)})}


def run_main(settings: AveragingParams, corpus, run_dir: Path, progress: bool,
             device: torch.device | str = "cpu") -> dict[str, Any]:
    """The comparison run: 2TA drives it, TA/EMA/other-period 2TA watch the same iterates."""
    config = TrainConfig(**{**settings.train, "averaging": "2ta", "seed": settings.seed})
    model = _build_model(settings.model, len(corpus.vocab), settings.seed).to(device)  # before the monitors copy it
    period = config.eval_every
    monitors = {}
    for start in settings.ta_starts:
        monitors[f"ta_{start:g}"] = build_averager("ta", model, period, start=int(start * config.max_steps))
    for decay in settings.ema_decays:
        monitors[f"ema_{decay:g}"] = build_averager("ema", model, period, decay=decay)
    for factor in settings.period_factors:
        monitors[f"2ta_E{factor:g}"] = build_averager("2ta", model, max(1, round(factor * period)))
    tails = TailLengths(model, period, run_dir / "tail_periods")  # Fig. 3.1's optimal length at every evaluation
    trainer = Trainer(model, corpus.train, corpus.valid[: settings.valid_tokens], config, run_dir, device=device,
                      progress=progress, monitors={**monitors, OPTIMAL_TAIL: tails}, eval_raw=True)
    trainer.fit(resume=True)
    history = trainer.history
    curves = {"2ta": _series(history), "raw": _series(history, key="raw_valid_nll")}
    curves["raw"]["valid_nll"] = curves["raw"].pop("raw_valid_nll")
    for name in monitors:
        curves[name] = _series(history, monitor=name)
    optimal = _series(history, monitor=OPTIMAL_TAIL)
    return {"period": period, "curves": curves, OPTIMAL_TAIL: {**optimal, "losses": tails.curves},
            "train_seconds": trainer.train_seconds}


def run_overfit(settings: AveragingParams, corpus, run_dir: Path, progress: bool,
                device: torch.device | str = "cpu") -> dict[str, Any]:
    """Fig. 3.5: train on a small slice until the raw loss rises; 2TA (Alg. 2) should reset its long average."""
    config = TrainConfig(**{**settings.overfit_train, "averaging": "none", "seed": settings.seed})
    spec = {**settings.model, "options": {k: v for k, v in settings.model.get("options", {}).items()
                                          if "dropout" not in k}}
    model = _build_model(spec, len(corpus.vocab), settings.seed).to(device)
    monitors = {"2ta": build_averager("2ta", model, config.eval_every)}
    trainer = Trainer(model, corpus.train[: settings.overfit_train_tokens], corpus.valid[: settings.valid_tokens],
                      config, run_dir, device=device, progress=progress, monitors=monitors)
    trainer.fit(resume=True)
    return {"curves": {"raw": _series(trainer.history), "2ta": _series(trainer.history, monitor="2ta")},
            "train_seconds": trainer.train_seconds}


def tuned(curves: dict[str, dict], prefix: str) -> str:
    """The member of a grid (TA starts or EMA decays) with the lowest final loss, as the thesis tuned them."""
    names = [n for n in curves if n.startswith(prefix)]
    return min(names, key=lambda n: curves[n]["valid_nll"][-1])


def summarise(main: dict[str, Any], overfit: dict[str, Any], early_fraction: float = 1 / 3) -> dict[str, Any]:
    """Best, final and early losses per method (early: the mean loss over the first ``early_fraction`` of the
    evaluations), the best loss per evaluation period, the resets of the overfitting run; the claims read these
    (:mod:`paperlib.experiments.averaging.claims`)."""
    curves = main["curves"]
    ta, ema = tuned(curves, "ta_"), tuned(curves, "ema_")
    early = max(1, int(len(curves["2ta"]["valid_nll"]) * early_fraction))

    def stats(name):
        losses = curves[name]["valid_nll"]
        return {"best": min(losses), "final": losses[-1], "early_mean": float(np.mean(losses[:early]))}

    methods = {"2ta": stats("2ta"), "raw": stats("raw"), "ta (tuned)": stats(ta), "ema (tuned)": stats(ema)}
    periods = {name: min(c["valid_nll"]) for name, c in curves.items() if name.startswith("2ta_E")}
    periods["2ta_E1"] = methods["2ta"]["best"]
    resets = [s for s, a in zip(overfit["curves"]["2ta"]["step"], overfit["curves"]["2ta"]["action"])
              if a in ("reset_long", "reset_short")]
    gaps = {"2ta - tuned ta": methods["2ta"]["best"] - methods["ta (tuned)"]["best"],
            "2ta - tuned ema": methods["2ta"]["best"] - methods["ema (tuned)"]["best"],
            "2ta - raw": methods["2ta"]["best"] - methods["raw"]["best"]}
    return {"tuned_ta": ta, "tuned_ema": ema, "methods": methods, "periods": periods, "gaps": gaps,
            "overfit_resets": resets}


def run_averaging_experiment(profile: str | None = None, progress: bool = True) -> Path:
    """Run both trainings of experiment `averaging_ptb` and write results/averaging_ptb.json."""
    stage = begin_stage("averaging_ptb", profile)
    started, root, profile, settings, device = stage.started, stage.root, stage.profile, stage.settings, stage.device
    corpus = load_corpus(settings.corpus, stage.data_root)
    runs = root / "runs" / "averaging_ptb"
    spec = {k: getattr(settings, k) for k in settings.__dataclass_fields__}
    shared = ("corpus", "model", "valid_tokens", "seed")
    main_keys = (*shared, "train", "ta_starts", "ema_decays", "period_factors")
    code = {"code": code_hash(__name__)}  # a run made by other code is redone, not reused
    forget_stale_run(runs / "main", {"part": "main", **{k: spec[k] for k in main_keys}, **code})
    forget_stale_run(runs / "overfit", {"part": "overfit", **{k: spec[k] for k in (*shared, "overfit_train_tokens",
                                                                                 "overfit_train")}, **code})
    main = run_main(settings, corpus, runs / "main", progress, device)
    overfit = run_overfit(settings, corpus, runs / "overfit", progress, device)
    results = {"profile": profile, "settings": spec,
               "main": {k: v for k, v in main.items() if k != "train_seconds"},
               "overfit": {k: v for k, v in overfit.items() if k != "train_seconds"},
               "summary": summarise(main, overfit)}
    out = results_path(root, "averaging_ptb", profile)
    write_json_atomic(out, results)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, spec, pinned_checksums(settings.corpus), started,
                                    code=code_hash(__name__)),
                       "train_seconds": {"main": main["train_seconds"], "overfit": overfit["train_seconds"]}})
    return out
