"""The tuning experiment (stage ``tuning_ptb``) and the ``paperlib tune`` command: Melis thesis §2.A-2.B, Figs. 2.5/2.6.

One Optuna study per language-model search space of ``params.yaml``'s ``experiments.tuning_ptb``, run with the
study machinery and :class:`~paperlib.tuning.LanguageModelObjective` of :mod:`paperlib.tuning`; the summary
(every trial, the best, its neighbourhood) goes to ``results/tuning_ptb.json``.

§2.B's finding is about the best trial's neighbourhood: every hyperparameter within about 15% of its range around
the best value, where the thesis' trials are "at most 1.2 perplexity points off the best". A study of our size
almost never samples a trial there (a random trial lands in it with probability about 0.15^7), so after the
study the stage *probes* it (:func:`probe`, beyond the thesis): ``neighbours`` trials drawn uniformly from that
window around the best sampled trial, and ``reruns`` of the best at other seeds, which measure the seed noise the
comparison is judged against (:mod:`paperlib.experiments.language_models.claims`). Probes never steer the search: they
run after it, are never pruned, and the best trial is the tuner's (probes excluded).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from paperlib.device import cache_key
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.runs import map_jobs
from paperlib.reference.tuning import TUNING
from paperlib.experiments.common.stage import results_path, setup_stage
from paperlib.search_spaces import SPACES, SearchSpace, get_space
from paperlib.tuning import (FINISHED, GRACE_PERIOD, HEARTBEAT_INTERVAL, LM_SPACES, SAMPLERS, LanguageModelObjective,
                             _quiet, default_storage, gp_sampler_available, lm_hyperparameters, make_pruner,
                             open_study, trial_counts, work)

@register_experiment("tuning_ptb")
@dataclass(frozen=True)
class TuningParams:
    """Tuning studies of language models on one corpus, one per search space (Melis thesis §2.A, Figs. 2.5/2.6).

    ``models`` maps a language-model search space (``lstm``, ``mogrifier``, ``enwik8_lstm``, ``enwik8_mogrifier``)
    to ``{cell, hidden_size, num_layers, options}``; ``train`` holds :class:`TrainConfig` fields; ``trials`` is the
    study size, of which the first ``startup_trials`` are random; ``pruner`` is ``{startup_trials, warmup_steps}``
    for median pruning, or null; ``train_tokens`` / ``eval_tokens`` cut the training / validation streams.
    ``neighbours`` and ``reruns``: the probes of the best trial's neighbourhood run after the study (:func:`probe`);
    ``workers`` processes run the models' studies side by side (one study each, ``threads`` torch threads each).
    """

    corpus: str
    models: dict
    train: dict
    trials: int
    startup_trials: int
    threads: int
    seed: int = 0
    sampler: str = "auto"
    pruner: dict | None = None
    train_tokens: int | None = None
    eval_tokens: int | None = None
    neighbours: int = 0
    reruns: int = 0
    workers: int = 1

    def __post_init__(self) -> None:
        from paperlib.data.corpora import CORPORA
        from paperlib.models import CELL_OPTIONS, VALID_CELLS
        from paperlib.train import TrainConfig

        if self.corpus not in CORPORA:
            raise ValueError(f"unknown corpus {self.corpus!r}; known corpora: {', '.join(CORPORA)}")
        if not self.models:
            raise ValueError("models must name at least one search space")
        for space, spec in self.models.items():
            if space not in LM_SPACES:
                raise ValueError(f"models: {space!r} is not a language-model search space; "
                                 f"valid: {', '.join(LM_SPACES)}")
            missing = [k for k in ("cell", "hidden_size", "num_layers") if k not in spec]
            extra = sorted(set(spec) - {"cell", "hidden_size", "num_layers", "options"})
            if missing or extra:
                raise ValueError(f"models.{space}: needs cell, hidden_size, num_layers (and optionally options); "
                                 f"missing {missing}, unknown {extra}")
            if spec["cell"] not in VALID_CELLS:
                raise ValueError(f"models.{space}.cell must be one of {', '.join(VALID_CELLS)}, got {spec['cell']!r}")
            tuned, _ = lm_hyperparameters({h.name: h.low for h in SPACES[space].hyperparameters}, spec["hidden_size"])
            unknown = sorted(set(tuned) - set(CELL_OPTIONS[spec["cell"]]))
            if unknown:
                raise ValueError(f"models.{space}: cell {spec['cell']!r} has no option(s) {unknown} "
                                 "that the space tunes")
        try:
            TrainConfig(**self.train)
        except TypeError as err:
            raise ValueError(f"train: {err}") from None
        if self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; valid choices: {', '.join(SAMPLERS)}")
        if self.trials < 1 or self.startup_trials < 0 or self.threads < 1 or self.workers < 1:
            raise ValueError("trials, threads and workers must be >= 1 and startup_trials >= 0")
        if self.neighbours < 0 or self.reruns < 0:
            raise ValueError(f"neighbours and reruns must be >= 0, got {self.neighbours} and {self.reruns}")
        if self.pruner is not None and sorted(self.pruner) != ["startup_trials", "warmup_steps"]:
            raise ValueError(f"pruner must be null or {{startup_trials, warmup_steps}}, got {self.pruner}")
        if self.pruner is not None and self.train.get("averaging") != "2ta":
            raise ValueError("pruning judges trials by their 2TA-averaged validation loss: a pruner needs "
                             f"train.averaging: 2ta, got {self.train.get('averaging', 'none')!r}")
        for name in ("train_tokens", "eval_tokens"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be >= 2 or null, got {value}")


def _load_settings(profile: str | None):
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params

    params = load_params()
    profile = active_profile(profile, params)
    return params, profile, experiment_params("tuning_ptb", profile, params)


def tune(space: str, study_name: str | None = None, storage: str | None = None, trials: int | None = None,
         metrics: Sequence[str] = ("valid_nll",), profile: str | None = None, sampler: str | None = None,
         seed: int | None = None, progress: bool = True, heartbeat_interval: int = HEARTBEAT_INTERVAL,
         grace_period: int = GRACE_PERIOD, probes: bool = False) -> optuna.Study:
    """``paperlib tune SPACE``: be one worker of the study tuning the model of ``experiments.tuning_ptb.models[SPACE]``.

    Sizes (model, training steps, data) come from the profile; ``trials`` and ``sampler`` default to it.
    The default study name is ``tuning_ptb-<space>-<profile>`` in ``runs/tuning/<study>.db``; a study
    created with other settings is refused (pass another ``--study``). ``seed`` None draws a fresh seed, which
    is what several workers of one study need. ``probes``: then probe the best trial's neighbourhood
    (:func:`probe`; the stage's single worker does). Returns the study.
    """
    import torch

    from paperlib.experiments.common.config import repo_root, section_params
    from paperlib.data import load_corpus

    get_space(space)
    params, profile, settings = _load_settings(profile)
    if space not in settings.models:
        raise ValueError(f"profile {profile!r} of tuning_ptb has no model for space {space!r}; "
                         f"it has: {', '.join(settings.models)}")
    root = repo_root()
    torch.set_num_threads(settings.threads)
    corpus = load_corpus(settings.corpus, root / section_params("data", params).root)
    train_ids = corpus.train if settings.train_tokens is None else corpus.train[: settings.train_tokens]
    valid_ids = corpus.valid if settings.eval_tokens is None else corpus.valid[: settings.eval_tokens]
    study_name = study_name or f"tuning_ptb-{space}-{profile}"
    spec = _study_spec(space, settings, metrics)
    optuna.logging.set_verbosity(optuna.logging.INFO if progress else optuna.logging.WARNING)
    pruner = make_pruner(**settings.pruner) if settings.pruner else make_pruner(None)
    options = dict(directions=["minimize"] * len(metrics), sampler=sampler or settings.sampler, seed=seed,
                   startup_trials=settings.startup_trials, pruner=pruner,
                   heartbeat_interval=heartbeat_interval, grace_period=grace_period)
    study = open_study(study_name, storage or default_storage(study_name, root), **options)
    known = study.user_attrs.get("spec")
    if known is None:
        study.set_user_attr("spec", spec)
    elif known != spec:
        raise ValueError(f"study {study_name!r} was created with other settings; use another --study name "
                         "(or delete it with `optuna delete-study`)")
    device = setup_stage(profile, params)
    model = settings.models[space]
    objective = LanguageModelObjective(
        get_space(space), model["cell"], model["hidden_size"], model["num_layers"], settings.train,
        train_ids.to(device), valid_ids.to(device), len(corpus.vocab), root / "runs" / "tuning" / study_name,
        options=model.get("options", {}), metrics=metrics, device=device, progress=progress)
    work(study, objective, trials or settings.trials, (), poll_seconds=1.0)
    if probes:
        from paperlib.train import TrainConfig

        probe(study, objective, get_space(space), settings.neighbours, settings.reruns,
              seed=settings.seed, train_seed=TrainConfig(**settings.train).seed)
    return study


def best_sampled(trials: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The tuner's best trial among the records of :func:`study_record`: the complete trial with the lowest value
    among those the tuner sampled (probes excluded)."""
    sampled = [t for t in trials if t["state"] == "COMPLETE" and "probe" not in t]
    return min(sampled, key=lambda t: t["value"]) if sampled else None


def neighbour_points(space: SearchSpace, centre: Mapping[str, float], count: int, seed: int,
                     fraction: float = TUNING["neighbourhood_fraction"]) -> list[dict[str, float | int]]:
    """``count`` points drawn uniformly from the window of :func:`neighbourhood` around ``centre`` (each
    hyperparameter within ``fraction`` of its range, centred on ``centre``'s value on the sampling scale; clipped
    to the range, integers rounded), from a generator seeded with ``seed``: every point lies in the neighbourhood."""
    rng = random.Random(seed)
    unit = space.to_unit(centre)
    return [{h.name: h.from_unit(unit[h.name] + rng.uniform(-fraction / 2, fraction / 2))
             for h in space.hyperparameters} for _ in range(count)]


def probe(study: optuna.Study, objective: Callable[[optuna.Trial], Any], space: SearchSpace, neighbours: int,
          reruns: int, seed: int, train_seed: int) -> None:
    """Probe the neighbourhood of the study's best sampled trial (beyond the thesis; see the module docstring):
    enqueue ``neighbours`` trials at :func:`neighbour_points` around it and ``reruns`` trials at its own point with
    training seeds ``train_seed`` + 1, + 2, ... (user attributes ``probe`` = "neighbour" / "rerun" and ``seed``),
    once, recording the centre as the study's ``probe_anchor``; then run every waiting trial. Resumes: a stage
    interrupted here finds its probes queued (a trial whose worker died is re-queued by the retry callback)."""
    if neighbours + reruns == 0:
        return
    if "probe_anchor" not in study.user_attrs:
        anchor = best_sampled(study_record(study, space)["trials"])
        if anchor is None:
            return  # no complete trial: nothing to probe around
        for point in neighbour_points(space, anchor["params"], neighbours, seed * 1000 + anchor["number"]):
            study.enqueue_trial(point, user_attrs={"probe": "neighbour"})
        for k in range(reruns):
            study.enqueue_trial(dict(anchor["params"]), user_attrs={"probe": "rerun", "seed": train_seed + 1 + k})
        study.set_user_attr("probe_anchor", anchor["number"])
    while True:
        with _quiet():
            optuna.storages.fail_stale_trials(study)
        if not study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return
        study.optimize(objective, n_trials=1)


def _study_spec(space: str, settings: TuningParams, metrics: Sequence[str]) -> dict[str, Any]:
    """What a study's trials depend on besides the sampled values (as JSON, to compare with a stored one)."""
    spec = {"space": space, "model": settings.models[space], "train": settings.train, "corpus": settings.corpus,
            "train_tokens": settings.train_tokens, "eval_tokens": settings.eval_tokens, "metrics": list(metrics),
            "probes": [settings.neighbours, settings.reruns],
            "code": code_hash(__name__), **cache_key()}  # trials made by other code or at another precision differ
    return json.loads(json.dumps(spec))


def neighbourhood(space: SearchSpace, trials: Sequence[Mapping[str, Any]], best: Mapping[str, Any],
                  fraction: float = TUNING["neighbourhood_fraction"]) -> list[int]:
    """Numbers of the trials whose every hyperparameter lies within ``fraction`` of its range around the best's.

    The window is ``fraction`` of the range wide, centred on the best value, on the sampling scale (log for
    log-spaced hyperparameters): the "closest combinations" of Melis thesis §2.B (Figs. 2.5/2.6, red lines).
    """
    centre = space.to_unit(best["params"])
    half = fraction / 2 + 1e-9  # an integer on the window's edge stays in whatever the rounding of its position
    return [t["number"] for t in trials
            if all(abs(u - centre[name]) <= half for name, u in space.to_unit(t["params"]).items())]


def study_record(study: optuna.Study, space: SearchSpace) -> dict[str, Any]:
    """Every trial of a single-objective study (state, value, hyperparameters, 2TA curve, and for a probe its kind
    and seed), the tuner's best trial (:func:`best_sampled`) and the complete trials in its neighbourhood."""
    trials = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (*FINISHED, TrialState.FAIL):
            continue
        trials.append({"number": t.number, "state": t.state.name, "value": t.value, "params": dict(t.params),
                       "intermediate": sorted([int(k), v] for k, v in t.intermediate_values.items()),
                       **{k: t.user_attrs[k] for k in ("parameters", "embedding_size", "steps", "rollbacks", "probe",
                                                       "seed") if k in t.user_attrs}})
    complete = [t for t in trials if t["state"] == "COMPLETE"]
    best = best_sampled(trials)
    near = neighbourhood(space, complete, best) if best else []
    gaps = [math.exp(t["value"]) - math.exp(best["value"]) for t in complete
            if t["number"] in near and t.get("probe") != "rerun"]
    return {
        "space": space.name, "source": space.source,
        "hyperparameters": [dataclasses.asdict(h) for h in space.hyperparameters],
        "trials": trials, "counts": trial_counts(study),
        "best": best, "neighbourhood": {"trials": near, "max_gap_ppl": max(gaps) if gaps else None},
    }


def run_tuning(profile: str | None = None, progress: bool = True, out: str | os.PathLike | None = None) -> Path:
    """Run (or finish) the study of every model of ``experiments.tuning_ptb`` and write ``results/tuning_ptb.json``.

    Studies live in ``runs/tuning/tuning_ptb-<space>-<profile>.db`` and resume where they stopped; a study
    made with other settings is deleted and redone. The sampler is seeded from ``seed`` (one worker).
    """
    from paperlib.experiments.common.config import repo_root, section_params
    from paperlib.data import load_corpus, pinned_checksums
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    params, profile, settings = _load_settings(profile)
    root = repo_root()
    spaces = list(settings.models)
    done = map_jobs(_study_job, [(space, profile, progress) for space in spaces], min(settings.workers, len(spaces)))
    records = dict(zip(spaces, done))
    vocab_size = len(load_corpus(settings.corpus, root / section_params("data", params).root).vocab)
    results = {"experiment": "tuning_ptb", "profile": profile, "settings": dataclasses.asdict(settings),
               "vocab_size": vocab_size, "optuna": optuna.__version__,
               "sampler": settings.sampler if settings.sampler != "auto"
               else ("gp" if gp_sampler_available() else "tpe"),
               "models": records, "paper": TUNING}
    out = Path(out) if out is not None else results_path(root, "tuning_ptb", profile)
    write_json_atomic(out, results)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      provenance(root, profile, dataclasses.asdict(settings), pinned_checksums(settings.corpus), started,
                                 code=code_hash(__name__)))
    return out


def _study_job(space: str, profile: str, progress: bool) -> dict[str, Any]:
    """One model's study, start to end (or resumed), with its probes: the record of :func:`study_record`. Run in
    this process or a spawned worker (which sets its own threads, precision and device in :func:`tune`)."""
    from paperlib.experiments.common.config import repo_root

    _, profile, settings = _load_settings(profile)
    root = repo_root()
    name = f"tuning_ptb-{space}-{profile}"
    storage = default_storage(name, root)
    _forget_stale_study(name, storage, root, _study_spec(space, settings, ("valid_nll",)))
    study = tune(space, name, storage, profile=profile, seed=settings.seed, progress=progress, probes=True)
    return study_record(study, get_space(space))


def _forget_stale_study(name: str, storage: str, root: Path, spec: dict[str, Any]) -> None:
    """Delete the pipeline's study (and its trial folders) if it was made with other settings."""
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return
    if study.user_attrs.get("spec") != spec:
        optuna.delete_study(study_name=name, storage=storage)
        shutil.rmtree(root / "runs" / "tuning" / name, ignore_errors=True)
