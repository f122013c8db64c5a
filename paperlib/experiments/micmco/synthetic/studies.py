"""The stage's settings and its resumable Optuna studies, one per configuration."""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.data import uniform_symbols
from paperlib.device import cache_key
from paperlib.experiments.common.stage import setup_stage, stage_device
from paperlib.frontiers import hypervolume, nll_at_mi, pareto_front
from paperlib.experiments.micmco.synthetic.design import (
    CONFIGURATIONS, Configuration, EXPERIMENT, start_design, suggest,
)
from paperlib.experiments.micmco.synthetic.trials import build_model, evaluate, train


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class MicmcoSyntheticParams:
    """Settings of the synthetic MICMCO experiment (one ``params.yaml`` profile).

    ``configurations`` are keys of :data:`CONFIGURATIONS` (or ``["all"]``); each is tuned by ``trials`` trials, the
    first ``startup_trials`` from a Halton design, each training for ``steps`` Adam steps on batches of
    ``batch_size`` symbols and evaluated on ``eval_symbols`` symbols with ``eval_samples`` samples. Frontiers are
    compared by hypervolume w.r.t. (ln V + ``hypervolume_margin``, 0) and by NLL at MI = ``mi_fractions`` * ln V.
    ``workers`` studies run in parallel processes with ``threads`` torch threads each.
    """

    configurations: list[str]
    trials: int
    startup_trials: int
    steps: int
    batch_size: int
    vocab_size: int  # the thesis' V: paperlib.reference.micmco.SYNTHETIC_VOCAB_SIZE (the paper profile's value)
    eval_symbols: int = 1000
    eval_samples: int = 100
    hidden_size: int = 128
    latent_dim: int = 40
    num_categorical: int = 8
    categories: int = 10
    mi_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75, 0.9])
    hypervolume_margin: float = 1.0
    seed: int = 0
    threads: int = 1
    workers: int = 2

    def __post_init__(self) -> None:
        unknown = [c for c in self.configurations if c not in CONFIGURATIONS and c != "all"]
        if unknown or not self.configurations:
            raise ValueError(f"unknown configurations {unknown}; choose 'all' or from: {', '.join(CONFIGURATIONS)}")
        positive = ("trials", "steps", "batch_size", "eval_symbols", "eval_samples", "hidden_size", "latent_dim",
                    "num_categorical", "categories", "threads", "workers")
        bad = [n for n in positive if getattr(self, n) < 1]
        if bad or self.startup_trials < 0 or self.vocab_size < 2:
            raise ValueError(f"{bad or 'startup_trials/vocab_size'} must be >= 1 (startup_trials >= 0, vocab >= 2)")
        if not all(0.0 < f <= 1.0 for f in self.mi_fractions) or self.hypervolume_margin <= 0:
            raise ValueError("mi_fractions must lie in (0, 1] and hypervolume_margin must be positive")

    @property
    def selected(self) -> list[str]:
        return list(CONFIGURATIONS) if "all" in self.configurations else list(dict.fromkeys(self.configurations))

    def trial_fingerprint(self) -> str:
        """Hash of the settings that change a trial's outcome (not the trial budget or the selection)."""
        keys = ("steps", "batch_size", "vocab_size", "eval_symbols", "eval_samples", "hidden_size", "latent_dim",
                "num_categorical", "categories", "seed")
        blob = json.dumps({k: getattr(self, k) for k in keys}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


def run_trial(config: Configuration, params: Mapping[str, float], settings: MicmcoSyntheticParams,
              seed: int) -> dict[str, Any]:
    """Train one model with ``params`` and evaluate it; the data stream and evaluation set depend only on settings."""
    device = stage_device()
    batches = uniform_symbols(settings.steps * settings.batch_size, settings.vocab_size, settings.seed)
    batches = batches.view(settings.steps, settings.batch_size).to(device)  # [steps, B]
    eval_set = uniform_symbols(settings.eval_symbols, settings.vocab_size, settings.seed + 1).to(device)  # [N_eval]
    torch.manual_seed(seed)
    model = build_model(config, settings.vocab_size, settings.hidden_size, settings.latent_dim,
                        settings.num_categorical, settings.categories, params).to(device)
    result = train(model, config, params, batches)
    record: dict[str, Any] = {"steps": result.steps, "train_seconds": round(result.seconds, 2),
                              "final_objective": result.final_objective, "diverged": result.diverged}
    if result.diverged:
        return {**record, "nll": math.nan, "mi": math.nan}
    torch.manual_seed(seed + 1)
    nll, mi = evaluate(model, eval_set, settings.eval_samples)
    return {**record, "nll": nll, "mi": mi}


def open_study(name: str, storage: str, seed: int, startup_trials: int):
    """Create or reopen the two-objective (minimise NLL, maximise MI) study ``name`` in ``storage``, GP-sampled."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study = optuna.create_study(storage=storage, study_name=name, directions=["minimize", "maximize"],
                                    load_if_exists=True)
        finished = [t for t in study.get_trials(deepcopy=False)
                    if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
                    and not _interrupted(t)]
        # Re-seeding with the number of finished trials keeps a resumed study deterministic without repeating
        # the random choices made before it was interrupted.
        study.sampler = optuna.samplers.GPSampler(seed=seed + len(finished), n_startup_trials=max(2, startup_trials),
                                                  warn_independent_sampling=False)
    return study


def fail_stale_trials(study) -> None:
    """Trials left RUNNING by an interrupted run (we run one study at a time in one process) become FAIL, marked
    ``interrupted``: :func:`tune` runs them again (a start-design trial with the same design point and seed) and the
    records leave them out, so an interruption costs no trial of the budget. Start-design trials then equal those of
    an uninterrupted study; sampler-chosen trials may differ, as the sampler's random state restarts with the
    process (:func:`open_study`)."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
        study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)


def _interrupted(trial) -> bool:
    return bool(trial.user_attrs.get("interrupted"))


def trial_index(trial) -> int:
    """The trial's place among the study's trials that were not interrupted: the trial number an uninterrupted run
    would have given it. Seeds derive from it, so a retried start-design trial repeats the interrupted one."""
    return sum(1 for t in trial.study.get_trials(deepcopy=False) if t.number < trial.number and not _interrupted(t))


def study_name(config_name: str, profile: str, settings: MicmcoSyntheticParams) -> str:
    code = code_hash("paperlib.experiments.micmco.synthetic.micmco_synthetic")  # a study made by other code (of the stage) starts anew
    return f"{config_name}-{profile}-{settings.trial_fingerprint()}-{code[:8]}" + "".join(f"-{v}" for v in cache_key().values())


def run_study(config_name: str, settings: MicmcoSyntheticParams, storage: str, profile: str,
              progress: bool = False) -> list[dict[str, Any]]:
    """Tune ``config_name`` until ``settings.trials`` trials have finished (resuming ``storage``); return all records.

    Trial ``i`` (i < ``startup_trials``) takes point i of the Halton design; later trials come from the GP sampler.
    The tuner sees (NLL, min(MI, ln V)): the true I(X, Z) cannot exceed H(X) = ln V, and larger estimates come from
    loose bounds (the MI estimate U^K - S^K grows with the gap of S^K), which the tuner would otherwise chase. Each
    record holds the trial number, state, hyperparameters, NLL, capped MI (``mi``) and the raw estimate
    (``mi_estimate``), and training diagnostics. Trials an interruption left running are retried
    (:func:`fail_stale_trials`).
    """
    import optuna

    config = CONFIGURATIONS[config_name]
    study = open_study(study_name(config_name, profile, settings), storage, settings.seed, settings.startup_trials)
    fail_stale_trials(study)
    design = start_design(config, settings.startup_trials, settings.seed)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        params = suggest(trial, config)
        record = run_trial(config, params, settings, settings.seed + 1000 * trial_index(trial))
        for key in ("steps", "train_seconds", "final_objective", "diverged"):
            trial.set_user_attr(key, record[key])
        trial.set_user_attr("mi_estimate", record["mi"])
        if progress:
            shown = ", ".join(f"{k}={v:.4g}" for k, v in params.items())
            print(f"  {config.label:<22} trial {trial.number:>3}: NLL {record['nll']:.3f}  MI {record['mi']:.3f}  "
                  f"({shown}; {record['train_seconds']:.0f}s)", flush=True)
        return record["nll"], (record["mi"] if not record["mi"] > mi_cap else mi_cap)

    mi_cap = math.log(settings.vocab_size)
    tune(study, objective, design, settings.trials)
    return trial_records(study)


def tune(study, objective, design: Sequence[Mapping[str, float | int]], trials: int) -> None:
    """Run ``objective`` one trial at a time until ``study`` holds ``trials`` finished (complete or failed) trials.

    Finished trial i < len(design) was asked for design point i (enqueued just before it runs, so a resumed study
    continues the design where it stopped); later trials come from the study's sampler. Interrupted trials
    (:func:`fail_stale_trials`) do not count.
    """
    from optuna.trial import TrialState

    while True:
        done = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
                   if not _interrupted(t))
        if done >= trials:
            break
        if done < len(design):
            study.enqueue_trial(dict(design[done]))
        study.optimize(objective, n_trials=1, catch=())


def trial_records(study) -> list[dict[str, Any]]:
    """JSON-able records of a study's finished trials (failed ones have NaN values; interrupted ones are left out)."""
    from optuna.trial import TrialState

    records = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if _interrupted(t):
            continue
        nll, mi = (t.values if t.values is not None else (math.nan, math.nan))
        records.append({"number": t.number, "state": t.state.name, "params": dict(t.params), "nll": nll, "mi": mi,
                        **t.user_attrs})
    return records


def summarise_configuration(records: Sequence[Mapping[str, Any]], optimum: float, margin: float,
                            levels: Sequence[float]) -> dict[str, Any]:
    """Frontier, hypervolume (absolute and as a fraction of the ideal) and NLL at the MI ``levels``."""
    nll = np.array([r["nll"] if r["nll"] is not None else np.nan for r in records], dtype=float)
    mi = np.array([r["mi"] if r["mi"] is not None else np.nan for r in records], dtype=float)
    front = pareto_front(nll, mi)
    reference = (optimum + margin, 0.0)
    hv = hypervolume(nll, mi, reference, mi_cap=optimum)
    at_levels = nll_at_mi(mi[front], nll[front], levels)
    return {
        "frontier": [{"trial": int(records[i]["number"]), "nll": float(nll[i]), "mi": float(mi[i])} for i in front],
        "hypervolume": hv,
        "normalised_hypervolume": hv / (margin * optimum),
        "nll_at_mi": [None if not math.isfinite(v) else float(v) for v in at_levels],
    }


def _study_cost(name: str) -> float:
    """Rough relative cost of a study's trials (decoder passes per step), to start the longest studies first."""
    config = CONFIGURATIONS[name]
    return config.num_samples * (1.6 if config.base == "dreg" else 1.0)


def _study_job(name: str, settings: MicmcoSyntheticParams, runs_dir: str, profile: str,
               progress: bool) -> tuple[str, list[dict[str, Any]], float]:
    """One study in its own SQLite file (so parallel workers never contend for a database lock)."""
    import optuna

    torch.set_num_threads(settings.threads)
    setup_stage(profile)  # precision in this (possibly spawned) worker
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{Path(runs_dir) / study_name(name, profile, settings)}.sqlite3"
    if progress:
        print(f"{EXPERIMENT} [{profile}]: {name} ({CONFIGURATIONS[name].label})", flush=True)
    started = time.time()
    records = run_study(name, settings, storage, profile, progress)
    return name, records, round(time.time() - started, 1)
