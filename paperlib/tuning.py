"""Hyperparameter tuning with Optuna studies that any number of workers on any number of machines can join.

The thesis tunes every model with batched Gaussian-process bandits (Google Vizier, Melis thesis §2.2.2 and §2.A,
Golovin et al. 2017) over the ranges of Tables 2.4-2.6 and 5.2 (:mod:`paperlib.search_spaces`) and reads
hyperparameter sensitivity off the trials (§2.B, Figs. 2.5/2.6). Here:

- a study lives in an Optuna RDB storage: by default a SQLite file ``runs/tuning/<study>.db`` under the
  working directory (the compendium's stages put it under the repository root; nothing to start); for several machines, a PostgreSQL (or other SQLAlchemy) URL. Workers
  send heartbeats; a trial whose worker died (no heartbeat for ``grace_period`` s) is marked FAIL and re-queued
  once with the same hyperparameters (``RetryFailedTrialCallback``), and every worker keeps going until the
  study holds ``n_trials`` finished (complete or pruned) trials, so studies are resumable by running the same
  command again;
- the sampler is Optuna's ``GPSampler`` (log expected improvement, or expected hypervolume improvement for
  several objectives; it also accounts for trials still running, like the thesis' batched bandits) when the
  installed Optuna has it, TPE otherwise;
- :class:`LanguageModelObjective` trains a language model on the sampled settings with
  :class:`paperlib.train.Trainer` and 2TA averaging, reporting the 2TA loss after every evaluation as the
  intermediate value for pruning (2TA's averaged loss is a good "anytime" estimate of the loss the run would
  end at, Melis ch. 3); its value is the best validation NLL (nats/token).

Departures: Vizier's batched GP bandits are replaced by Optuna's samplers (``GPSampler`` after
``startup_trials`` random trials); the thesis does not prune trials; a trial that raises
:class:`paperlib.train.TrainingDiverged` is recorded as FAIL (value NaN) rather than scored. ``run_worker`` stops
when ``n_trials`` trials are finished; two workers asking for a trial in the same instant can still overshoot by
one trial each (the storage has no lock for "the last trial"), which never loses or duplicates a trial.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from paperlib.search_spaces import SearchSpace

if TYPE_CHECKING:  # torch and the trainer load only when a language model is tuned: workers start fast
    import torch

SAMPLERS = ("auto", "gp", "tpe", "random")
METRICS = ("valid_nll", "parameters", "train_seconds")  # objectives of the LM objective, all minimised
LM_SPACES = ("lstm", "mogrifier", "enwik8_lstm", "enwik8_mogrifier")
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
HEARTBEAT_INTERVAL = 30  # seconds between a running trial's heartbeats
GRACE_PERIOD = 120  # seconds without a heartbeat after which a running trial counts as dead
MAX_RETRY = 1  # re-queue a dead worker's trial once with the same hyperparameters

# ---------------------------------------------------------------------------------------------------
# studies, samplers, workers


def default_storage(study_name: str, root: str | os.PathLike | None = None) -> str:
    """``sqlite:///<root>/runs/tuning/<study_name>.db``, the folder created; root defaults to the working directory
    (the compendium's stages pass the repository root)."""
    root = Path.cwd() if root is None else root
    folder = Path(root).resolve() / "runs" / "tuning"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / study_name}.db"


def make_storage(url: str, heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int | None = GRACE_PERIOD,
                 max_retry: int = MAX_RETRY) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats; trials of dead workers become FAIL and are re-queued ``max_retry`` times.

    The retried trial inherits the dead one's intermediate values, so that the pruner sees its whole curve.
    """
    if heartbeat_interval < 1:
        raise ValueError(f"heartbeat_interval must be >= 1 s, got {heartbeat_interval}")
    if grace_period is not None and grace_period <= heartbeat_interval:
        raise ValueError(f"grace_period ({grace_period} s) must exceed heartbeat_interval ({heartbeat_interval} s)")
    engine_kwargs = {}
    if url.startswith("sqlite"):
        # SQLite serialises writers; wait for the lock instead of failing when workers write at once
        engine_kwargs = {"connect_args": {"timeout": 60}}
    elif "postgresql" in url or "mysql" in url:
        engine_kwargs = {"pool_pre_ping": True}
    # Optuna 4.9 renamed the stale-trial callback; take whichever the installed version has
    keyword = ("heartbeat_stale_trial_callback"
               if "heartbeat_stale_trial_callback" in inspect.signature(optuna.storages.RDBStorage).parameters
               else "failed_trial_callback")
    with _quiet():
        retry = _retry_callback_class()(max_retry=max_retry, inherit_intermediate_values=True)
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
                                          grace_period=grace_period, **{keyword: retry})


def _retry_callback_class() -> type:
    return getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", optuna.storages.RetryFailedTrialCallback)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Heartbeats and retries are marked experimental in Optuna; we use them on purpose."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def retried_trial_number(trial: optuna.Trial) -> int | None:
    """The number of the dead worker's trial that ``trial`` re-runs, or None."""
    frozen = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
    with _quiet():
        return _retry_callback_class().retried_trial_number(frozen)


def _version() -> tuple[int, int]:
    major, minor = optuna.__version__.split(".")[:2]
    return int(major), int(minor)


def gp_sampler_available(n_objectives: int = 1) -> bool:
    """Optuna has ``GPSampler`` since 3.6, for several objectives since 4.4."""
    if not hasattr(optuna.samplers, "GPSampler"):
        return False
    return n_objectives == 1 or _version() >= (4, 4)


def make_sampler(kind: str = "auto", n_objectives: int = 1, seed: int | None = None,
                 startup_trials: int = 10) -> optuna.samplers.BaseSampler:
    """``gp`` (Optuna's GPSampler), ``tpe``, ``random``, or ``auto``: GP where the installed Optuna has it, else TPE.

    Workers of one study must not share a seed, or their random start-up trials coincide.
    """
    if kind not in SAMPLERS:
        raise ValueError(f"unknown sampler {kind!r}; valid choices: {', '.join(SAMPLERS)}")
    if startup_trials < 0:
        raise ValueError(f"startup_trials must be >= 0, got {startup_trials}")
    if kind == "auto":
        kind = "gp" if gp_sampler_available(n_objectives) else "tpe"
    if kind == "gp":
        if not gp_sampler_available(n_objectives):
            raise ValueError(f"optuna {optuna.__version__} has no GPSampler for {n_objectives} objective(s); "
                             "use sampler 'tpe' or upgrade optuna")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup_trials)
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup_trials, constant_liar=True)
    return optuna.samplers.RandomSampler(seed=seed)


def make_pruner(startup_trials: int | None = None, warmup_steps: int = 0) -> optuna.pruners.BasePruner:
    """Median pruning of the reported (2TA) losses after ``startup_trials`` finished trials; None: no pruning."""
    if startup_trials is None:
        return optuna.pruners.NopPruner()
    return optuna.pruners.MedianPruner(n_startup_trials=startup_trials, n_warmup_steps=warmup_steps)


def open_study(study_name: str, storage: str | optuna.storages.BaseStorage | None = None,
               directions: Sequence[str] = ("minimize",), sampler: str = "auto", seed: int | None = None,
               startup_trials: int = 10, pruner: optuna.pruners.BasePruner | None = None,
               heartbeat_interval: int = HEARTBEAT_INTERVAL, grace_period: int | None = GRACE_PERIOD) -> optuna.Study:
    """Create study ``study_name`` in ``storage`` (a URL; default :func:`default_storage`), or join it if it exists."""
    if not directions or any(d not in ("minimize", "maximize") for d in directions):
        raise ValueError(f"directions must be a non-empty list of 'minimize'/'maximize', got {list(directions)}")
    if storage is None:
        storage = default_storage(study_name)
    if isinstance(storage, str):
        storage = make_storage(storage, heartbeat_interval, grace_period)
    study = optuna.create_study(
        study_name=study_name, storage=storage, load_if_exists=True, directions=list(directions),
        sampler=make_sampler(sampler, len(directions), seed, startup_trials), pruner=pruner,
    )
    existing = [d.name.lower() for d in study.directions]
    if existing != list(directions):
        raise ValueError(f"study {study_name!r} exists with directions {existing}, not {list(directions)}")
    return study


def trial_counts(study: optuna.Study) -> dict[str, int]:
    """Number of trials per state name (COMPLETE, PRUNED, FAIL, RUNNING, WAITING)."""
    counts: dict[str, int] = {}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    return counts


def run_worker(study_name: str, storage: str | optuna.storages.BaseStorage | None,
               objective: Callable[[optuna.Trial], float | Sequence[float]], n_trials: int, *,
               catch: Iterable[type[Exception]] = (), poll_seconds: float = 1.0,
               **study_options: Any) -> int:
    """Run trials of the study until it holds ``n_trials`` finished trials in total, over all workers.

    Start any number of workers (processes, machines) on the same study and storage. A worker that sees the
    remaining trials all running elsewhere waits instead of leaving, so that if one of those workers dies, its
    trial (failed by heartbeat and re-queued) is finished here. ``study_options`` go to :func:`open_study`.
    Returns the number of trials this worker ran.
    """
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    return work(open_study(study_name, storage, **study_options), objective, n_trials, tuple(catch), poll_seconds)


def work(study: optuna.Study, objective: Callable[[optuna.Trial], Any], n_trials: int,
          catch: tuple[type[Exception], ...], poll_seconds: float) -> int:
    ran = 0
    while True:
        with _quiet():
            optuna.storages.fail_stale_trials(study)
        counts = trial_counts(study)
        finished = sum(counts.get(state.name, 0) for state in FINISHED)
        if finished >= n_trials:
            return ran
        if finished + counts.get("RUNNING", 0) >= n_trials:
            time.sleep(poll_seconds)
            continue
        # One trial per call: the count is checked again before each trial (rather than by
        # optuna.study.MaxTrialsCallback after it, which lets every other worker start one trial too many).
        study.optimize(objective, n_trials=1, catch=catch)
        ran += 1


# ---------------------------------------------------------------------------------------------------
# the language-model objective


def lm_hyperparameters(sampled: Mapping[str, float], hidden_size: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map a Table 2.4/2.5 sample to (``build_lm`` options, ``TrainConfig`` overrides), Melis thesis §2.A.

    ``input_embedding_ratio`` >= 1 ties the embedding size to the hidden size (no projection); below 1 the
    embedding has round(ratio · H) >= 1 units and the cell output is projected to it. ``inter_layer_dropout`` is
    the dropout on each layer's output (``cell_output_dropout``, M^cell of eq. 4.1); ``l2_penalty`` is the
    optimizer's weight decay; ``mogrifier_rank`` <= 0 means full rank.
    """
    names = {"learning_rate": ("train", "lr"), "l2_penalty": ("train", "weight_decay"),
             "input_dropout": ("model", "input_dropout"), "inter_layer_dropout": ("model", "cell_output_dropout"),
             "state_dropout": ("model", "state_dropout"), "output_dropout": ("model", "output_dropout"),
             "mogrifier_rounds": ("model", "mogrifier_rounds"), "mogrifier_rank": ("model", "mogrifier_rank"),
             "input_embedding_ratio": ("model", "embedding_size")}
    unknown = sorted(set(sampled) - set(names))
    if unknown:
        raise ValueError(f"not a language-model hyperparameter: {unknown}; valid: {', '.join(names)}")
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    for name, value in sampled.items():
        target, key = names[name]
        if name == "input_embedding_ratio":
            value = None if value >= 1 else max(1, round(value * hidden_size))
        elif name in ("mogrifier_rounds", "mogrifier_rank"):
            value = int(value)
        else:
            value = float(value)
        (model if target == "model" else train)[key] = value
    return model, train


def num_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


@cache
def _reporting_trainer() -> type:
    """:class:`paperlib.train.Trainer` that reports every evaluation's loss (the 2TA loss with ``averaging: 2ta``)
    to an Optuna trial and stops when the pruner says so."""
    from paperlib.train import Trainer

    class ReportingTrainer(Trainer):
        def __init__(self, *args: Any, trial: optuna.Trial, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.trial = trial
            # Optuna prunes single-objective studies only; a trial enqueued with user attribute "probe" (a fixed
            # point whose final loss is the measurement) always trains to the end
            self.can_prune = len(trial.study.directions) == 1 and "probe" not in trial.user_attrs

        def _evaluate_and_checkpoint(self) -> None:
            super()._evaluate_and_checkpoint()
            if not self.can_prune:
                return
            entry = next(h for h in reversed(self.history) if "valid_nll" in h and "monitor" not in h)
            if math.isfinite(entry["valid_nll"]):
                self.trial.report(entry["valid_nll"], self.step)
            if self.trial.should_prune():
                raise optuna.TrialPruned(f"2TA validation loss {entry['valid_nll']:.4f} at step {self.step}")

    return ReportingTrainer


@dataclass
class LanguageModelObjective:
    """Train ``cell`` at a fixed size with hyperparameters sampled from ``space``; minimise the ``metrics``.

    ``train`` holds :class:`TrainConfig` fields (sampled values override ``lr`` and ``weight_decay``);
    ``options`` are fixed ``build_lm`` options (sampled ones override them). A trial enqueued with user attributes
    ``seed`` (its training seed instead of ``train``'s) or ``probe`` (never pruned) is a measurement at a fixed
    point, e.g. a rerun of the best trial or a neighbour of it (``study.enqueue_trial``). Each trial trains in
    ``runs_dir/trial<number>`` (a trial re-queued after its worker died resumes from the dead trial's
    checkpoint when it can see it); checkpoints are deleted when the trial ends, ``metrics.json`` is kept.
    """

    space: SearchSpace
    cell: str
    hidden_size: int
    num_layers: int
    train: Mapping[str, Any]
    train_ids: torch.Tensor
    valid_ids: torch.Tensor
    vocab_size: int
    runs_dir: Path
    options: Mapping[str, Any] = field(default_factory=dict)
    metrics: Sequence[str] = ("valid_nll",)
    device: str | torch.device | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        bad = [m for m in self.metrics if m not in METRICS]
        if not self.metrics or bad:
            raise ValueError(f"unknown metric(s) {bad}; valid choices: {', '.join(METRICS)}")
        from paperlib.train import TrainConfig

        TrainConfig(**self.train)  # fail before the first trial
        self.runs_dir = Path(self.runs_dir)

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        import torch

        from paperlib.models import build_lm
        from paperlib.train import TrainConfig, TrainingDiverged

        sampled = self.space.sample(trial)
        model_options, train_overrides = lm_hyperparameters(sampled, self.hidden_size)
        seed = trial.user_attrs.get("seed")  # an enqueued rerun of a trial names its own seed
        config = TrainConfig(**{**self.train, **train_overrides, **({} if seed is None else {"seed": int(seed)})})
        torch.manual_seed(config.seed)
        model = build_lm(self.cell, self.vocab_size, self.hidden_size, self.num_layers,
                         **{**self.options, **model_options})
        retried = retried_trial_number(trial)
        run_dir = self.runs_dir / f"trial{retried if retried is not None else trial.number}"
        trainer = _reporting_trainer()(model, self.train_ids, self.valid_ids, config, run_dir, device=self.device,
                                    progress=self.progress, trial=trial)
        parameters = num_parameters(model)
        trial.set_user_attr("parameters", parameters)
        trial.set_user_attr("embedding_size", model_options.get("embedding_size") or self.hidden_size)
        try:
            result = trainer.fit(resume=retried is not None)
        except TrainingDiverged as err:
            trial.set_user_attr("diverged", str(err))
            return math.nan if len(self.metrics) == 1 else (math.nan,) * len(self.metrics)  # Optuna: FAIL
        finally:
            trial.set_user_attr("steps", trainer.step)
            trial.set_user_attr("train_seconds", round(trainer.train_seconds, 2))
            trainer.write_metrics()
            for checkpoint in (trainer.best_path, trainer.last_path):
                checkpoint.unlink(missing_ok=True)
        trial.set_user_attr("rollbacks", result.rollbacks)
        values = {"valid_nll": result.best_valid_nll, "parameters": float(parameters),
                  "train_seconds": trainer.train_seconds}
        chosen = tuple(values[m] for m in self.metrics)
        return chosen[0] if len(chosen) == 1 else chosen
