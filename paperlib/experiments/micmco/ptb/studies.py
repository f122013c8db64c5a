"""One resumable Optuna study per curve: trials one at a time, or asked in batches and trained as stacks.

A study is a SQLite file ``runs/micmco_ptb/<curve>-<profile>-<settings hash>-<code hash>.sqlite3``; the model of its
best trial so far is kept beside it (``.best.pt``) for Table 5.1. Trials left running by an interruption fail and
are asked again (a start-design trial with the same point and seed).

With ``stack_size`` (the thesis tunes with batched Gaussian-process bandits, Golovin et al. 2017) the study asks for
that many trials at a time: the start design's next points, then the GP sampler's batch (Optuna's GP sampler picks
each point of a batch given the ones still running, q-batch log expected hypervolume improvement), trains them as
one stack (:mod:`.stacked_trials`; checkpointed beside the study with the batch's points, so an interrupted batch
is asked again and its stack continues, and stopped at a time limit if one is given) and reports every trial's
outcome. The time limit stops training; the batch's evaluations, once it has trained, run to their end, so give it
a margin. A trial of a stack equals its separate run up to float rounding, so
a stacked study is a study of its own (its settings hash differs).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from paperlib.atomic_files import save_torch_atomic, write_json_atomic
from paperlib.device import cache_key
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.runs import TimeLimitReached
from paperlib.experiments.common.stage import setup_stage
from paperlib.experiments.micmco.ptb.data import SentenceData, load_data
from paperlib.experiments.micmco.ptb.design import (
    CURVES, Curve, EXPERIMENT, MicmcoPtbParams, TABLE_5_1_CURVES, curve_of,
)
from paperlib.experiments.micmco.ptb.stacked_trials import StackedTrials, TrialSpec
from paperlib.experiments.micmco.ptb.trials import evaluate, run_trial, trial_record
from paperlib.experiments.micmco.synthetic.micmco_synthetic import (
    fail_stale_trials, halton_design, open_study, suggest_space, trial_index, trial_records, tune,
)
from paperlib.models.sentence_vae import SentenceVAE


def study_name(curve_name: str, profile: str, settings: MicmcoPtbParams) -> str:
    code = code_hash("paperlib.experiments.micmco.ptb.micmco_ptb")  # a study made by other code (of the stage) starts anew
    return f"{curve_name}-{profile}-{settings.trial_fingerprint()}-{code[:8]}" + "".join(f"-{v}" for v in cache_key().values())


def _checkpoint_path(runs_dir: Path, study: str) -> Path:
    return runs_dir / f"{study}.best.pt"


def test_scores_path(runs_dir: Path, study: str, trial: int, settings: MicmcoPtbParams) -> Path:
    """Where a trial's Table 5.1 test scores are cached (a small JSON file, so it travels with the study)."""
    return runs_dir / f"{study}.test-{trial}-{settings.test_fingerprint()}.json"


def test_scores(model: SentenceVAE, data: SentenceData, settings: MicmcoPtbParams) -> dict[str, Any]:
    """A model's Table 5.1 scores: the test set with ``test_samples`` samples, and the seconds it took."""
    started = time.perf_counter()
    scores = evaluate(model.eval(), data.test, data.eos_id, settings.test_samples, settings.seed + 7)
    scores["seconds"] = round(time.perf_counter() - started, 1)
    return scores


def _save_checkpoint(path: Path, trial: int, model: SentenceVAE) -> None:
    save_torch_atomic({"trial": trial, "state": model.state_dict()}, path)


def run_curve_study(name: str, settings: MicmcoPtbParams, data: SentenceData, runs_dir: str | os.PathLike,
                    profile: str, progress: bool = False, deadline: float | None = None,
                    pace: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Tune curve ``name`` until ``settings.trials`` trials have finished (resuming its SQLite study).

    The tuner sees (NLL, min(KL, ``kl_cap``)) per token; the raw KL estimate is kept as ``kl_estimate``. The model
    of the best trial so far (lowest NLL) is saved for Table 5.1. Returns the trial records (``kl`` = capped KL).
    With ``settings.stack_size`` the trials are asked and trained in stacks (the module docstring), and a
    ``deadline`` (``time.time()``) stops a stack there, checkpointed, raising
    :class:`~paperlib.experiments.common.runs.TimeLimitReached` (the same call continues it). ``pace`` (optional,
    shared by the studies of one process, run costliest first) holds the seconds of the last batch trained, so that
    a study does not start a batch the time left would not finish.
    """
    if deadline is not None and settings.stack_size is None:
        raise ValueError("a time limit needs stacks (stack_size): a separate trial cannot stop part-way")
    import optuna

    curve = CURVES[name] if name in CURVES else curve_of(name)
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    study_id = study_name(name, profile, settings)
    study = open_study(study_id, f"sqlite:///{runs_dir / study_id}.sqlite3", settings.seed, settings.startup_trials)
    fail_stale_trials(study)
    space = curve.space
    design = halton_design(space, settings.startup_trials, settings.seed)
    checkpoint = _checkpoint_path(runs_dir, study_id)

    def report(trial: optuna.Trial, params: Mapping[str, float], record: dict[str, Any], model: SentenceVAE
               ) -> tuple[float, float]:
        """Store the trial's diagnostics, keep its model if it is the best so far, return its two objectives."""
        for key in ("steps", "train_seconds", "eval_seconds", "final_objective", "diverged", "elbo_nll", "q_kl"):
            trial.set_user_attr(key, record[key])
        trial.set_user_attr("kl_estimate", record["kl"])
        best = min((t.values[0] for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))),
                   default=math.inf)
        if math.isfinite(record["nll"]) and record["nll"] < best:
            _save_checkpoint(checkpoint, trial.number, model)
        if progress:
            shown = ", ".join(f"{k}={v:.3g}" for k, v in params.items())
            print(f"  {curve.label:<22} {curve.regime:<6} trial {trial.number:>3}: NLL {record['nll']:.4f}  "
                  f"KL {record['kl']:.4f}  ({shown}; {record['train_seconds']:.0f}+{record['eval_seconds']:.0f}s)",
                  flush=True)
        return record["nll"], (record["kl"] if not record["kl"] > settings.kl_cap else settings.kl_cap)

    if settings.stack_size is None:
        def objective(trial: optuna.Trial) -> tuple[float, float]:
            params = suggest_space(trial, space)
            record, model = run_trial(curve, params, data, settings, settings.seed + 1000 * trial_index(trial))
            return report(trial, params, record, model)

        tune(study, objective, design, settings.trials)
    else:
        def keep_test_scores(models: Mapping[int, SentenceVAE]) -> None:
            """A Table 5.1 curve's batch: the test scores of the study's best trial if it is one of the batch's,
            while its model is at hand (its checkpoint stays on this machine; elsewhere the table would retrain it)."""
            done = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                    if math.isfinite(t.values[0])]
            best = min(done, key=lambda t: t.values[0], default=None)
            if best is not None and best.number in models:
                path = test_scores_path(runs_dir, study_id, best.number, settings)
                write_json_atomic(path, test_scores(models[best.number], data, settings))

        table_cell = settings.table_5_1 and name in TABLE_5_1_CURVES
        _tune_in_stacks(study, curve, design, settings, data, runs_dir / f"{study_id}.stack.pt", report, deadline,
                        keep_test_scores if table_cell else None, pace)
    records = trial_records(study)
    for r in records:
        r["kl"] = r.pop("mi")
    return records


def _finished(study) -> int:
    from optuna.trial import TrialState

    return sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL))
               if not t.user_attrs.get("interrupted"))


CHECKPOINT_STEPS = 2000  # a study's stack is saved this often (at the paper's shapes ~50 MB per trial)


def _interrupted_batch(study, points: Path, size: int) -> list[dict[str, float]] | None:
    """The points of the batch ``points`` describes if an interruption left all its trials unfinished (failed as
    interrupted) and it has ``size`` of them; else None (no batch, or one whose trials were told)."""
    if not points.is_file():
        return None
    batch = json.loads(points.read_text())
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    unfinished = all(n in by_number and by_number[n].user_attrs.get("interrupted") for n in batch["trials"])
    return batch["params"] if unfinished and len(batch["params"]) == size else None


def _tune_in_stacks(study, curve: Curve, design, settings: MicmcoPtbParams, data: SentenceData, path: Path,
                    report, deadline: float | None = None, after_batch=None,
                    pace: dict[str, float] | None = None) -> None:
    """Ask ``stack_size`` trials at a time (design points first), train them as one stack, tell each outcome.

    The batch's points are written beside the stack (``path`` with ``.json``) before it trains, and the stack is
    saved to ``path`` every :data:`CHECKPOINT_STEPS` steps, at the ``deadline`` and when it finishes training. A
    process that stops before the trials are told leaves them running; the next one fails them (they are
    interrupted, not counted), asks the same points again (the same seeds, from the trials' places) and continues
    the stack from its checkpoint. A trial whose NLL or KL is not finite fails, as a separate trial's does. No new
    batch starts past the ``deadline``, nor when the time left is shorter than the last batch trained (``pace``'s
    ``"last"``, shared across studies, else this call's; its checkpoint would only be of use on this machine).
    ``after_batch`` (optional) is called with the batch's models by trial number once its trials are told.
    """
    import optuna

    points = path.with_suffix(".json")
    pace = {"last": 0.0} if pace is None else pace  # seconds the last batch took
    while (done := _finished(study)) < settings.trials:
        if deadline is not None and time.time() + pace["last"] >= deadline:
            raise TimeLimitReached(f"{EXPERIMENT} stopped at its time limit with {done} of {settings.trials} trials of "
                                   f"{curve.label} ({curve.regime}) done; the same command continues")
        started = time.time()
        size = min(settings.stack_size, settings.trials - done)
        interrupted = _interrupted_batch(study, points, size)
        trials, specs = [], []
        for j in range(size):
            if interrupted is not None:
                study.enqueue_trial(interrupted[j])
            elif done + j < len(design):
                study.enqueue_trial(dict(design[done + j]))
            trial = study.ask()  # the sampler sees the batch's earlier trials as running
            trials.append(trial)
            specs.append(TrialSpec(suggest_space(trial, curve.space), settings.seed + 1000 * trial_index(trial)))
        write_json_atomic(points, {"trials": [t.number for t in trials], "params": [dict(sp.params) for sp in specs]})
        stack = None
        if path.is_file():
            try:
                stack = StackedTrials.load(path, curve, specs, settings, data)
            except ValueError:  # another batch's stack
                path.unlink()
        if stack is None:
            stack = StackedTrials(curve, specs, settings, data)
        while stack.step_count < stack.steps:
            until = min(stack.step_count + CHECKPOINT_STEPS, stack.steps)
            stack.run(until=until, deadline=deadline)
            stack.save(path)
            if stack.step_count < until:  # the deadline stopped it
                raise TimeLimitReached(f"{EXPERIMENT} stopped at its time limit in a stack of {curve.label} "
                                       f"({curve.regime}) at step {stack.step_count:,} of {stack.steps:,}, "
                                       f"checkpointed in {path}; the same command continues")
        for trial, spec, result, model in zip(trials, specs, stack.results(), stack.models):
            record = trial_record(curve, result, model, data, settings, spec.seed)
            values = report(trial, spec.params, record, model)
            if all(math.isfinite(v) for v in values):
                study.tell(trial, values)
            else:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
        if after_batch is not None:
            after_batch({trial.number: model for trial, model in zip(trials, stack.models)})
        path.unlink()
        points.unlink()
        pace["last"] = time.time() - started


def _study_job(name: str, settings: MicmcoPtbParams, runs_dir: str, profile: str, progress: bool,
               data_root: str | None, data: SentenceData | None, deadline: float | None = None,
               pace: dict[str, float] | None = None) -> tuple[str, list[dict[str, Any]], float]:
    import optuna

    torch.set_num_threads(settings.threads)
    setup_stage(profile)  # precision in this (possibly spawned) worker
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if data is None:
        data = load_data(settings, data_root)
    if progress:
        print(f"{EXPERIMENT} [{profile}]: {name} ({CURVES[name].label}, {CURVES[name].regime})", flush=True)
    started = time.time()
    records = run_curve_study(name, settings, data, runs_dir, profile, progress, deadline, pace)
    return name, records, round(time.time() - started, 1)
