"""Training recipes for a budget of minutes, chosen by search (beyond the seeds).

The thesis trains 24M-parameter models for days with Adam at β1 = 0 or RAdam and no schedule (Melis §2.2.2,
§4.4). At the ``cpu`` profile a run lasts minutes, and what decides its result is how fast the model learns:
batch size and BPTT (updates per second against tokens per update), optimizer and β1, the peak learning rate,
a schedule that decays to the end of the budget, and dropout sized for a run that is far from overfitting. This
module searches those for one model of a language-model experiment at a fixed budget of training seconds, with
the study machinery of :mod:`paperlib.tuning`: an Optuna study in ``runs/tuning/`` that resumes where it stopped,
sampled by TPE (the space mixes categorical and conditional choices), each trial scored by the validation NLL of
its best weights on the validation text the experiment's stage scores (its ``eval_tokens`` prefix; the studies of
``lm_ptb`` and ``lm_ptb_char`` in ``results/recipes/`` predate this and scored the whole validation set). The
byte-level experiment is searched on its byte streams and scored in bits per byte (:func:`search_data`). :func:`summarise` writes what the study found to
``results/recipes/<experiment>-<model>.json``; the chosen recipe goes into ``params.yaml`` as a step budget.

Seconds become steps once, before the first trial: :func:`calibrate` times training steps of every (hidden size,
batch, BPTT) the space can pick, and a trial's budget is ``seconds / step time`` steps. So every trial of a study
gets the same idle-machine time, the trials are deterministic (a trial's result does not depend on what else
the machine ran meanwhile), and the stage that adopts a recipe runs exactly the searched number of steps. The
calibration is stored in the study (a resumed study keeps it) and can be made apart from the search, by
:func:`timing_table` (``paperlib recipes time``), whenever the machine is idle: it is the one measurement here
that other load distorts.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from paperlib.device import cache_key
from paperlib.experiments.common.code_hash import code_hash
from paperlib.tuning import FINISHED, default_storage, make_sampler, open_study, run_worker, trial_counts

# The searched choices; learning-rate ranges are per optimizer family (SGD's lr is in other units).
BATCH_SIZES = (16, 20, 32, 64)
BPTTS = (35, 70)
OPTIMIZERS = ("adam", "radam", "sgd")
BETA1S = (0.0, 0.9)
SCHEDULES = ("constant", "cosine", "linear")
WARMUPS = (0.0, 0.05)
LR_RANGES = {"adam": (3e-4, 1e-2), "radam": (3e-4, 1e-2), "sgd": (1.0, 40.0)}
DROPOUT_SCALE = (0.0, 2.0)  # multiplies every *_dropout option of the model (capped at MAX_DROPOUT)
MAX_DROPOUT = 0.8
EMBEDDING_INITS = ("normal", "uniform")  # paperlib.models.recurrent_lm: PyTorch's N(0, 1) or U(-0.1, 0.1)


def sample_recipe(trial: optuna.Trial, batch_sizes=BATCH_SIZES, bptts=BPTTS, hidden_sizes=()) -> dict[str, Any]:
    """Ask ``trial`` for a recipe: TrainConfig fields plus ``dropout_scale`` (and ``hidden_size`` if offered)."""
    recipe: dict[str, Any] = {
        "batch_size": trial.suggest_categorical("batch_size", list(batch_sizes)),
        "bptt": trial.suggest_categorical("bptt", list(bptts)),
        "optimizer": trial.suggest_categorical("optimizer", list(OPTIMIZERS)),
    }
    low, high = LR_RANGES[recipe["optimizer"]]
    recipe["lr"] = trial.suggest_float(f"lr_{recipe['optimizer']}", low, high, log=True)
    recipe["beta1"] = 0.0 if recipe["optimizer"] == "sgd" else trial.suggest_categorical("beta1", list(BETA1S))
    recipe["schedule"] = trial.suggest_categorical("schedule", list(SCHEDULES))
    recipe["warmup"] = 0.0 if recipe["schedule"] == "constant" else trial.suggest_categorical("warmup", list(WARMUPS))
    recipe["dropout_scale"] = trial.suggest_float("dropout_scale", *DROPOUT_SCALE)
    recipe["embedding_init"] = trial.suggest_categorical("embedding_init", list(EMBEDDING_INITS))
    if hidden_sizes:
        recipe["hidden_size"] = trial.suggest_categorical("hidden_size", list(hidden_sizes))
    return recipe


def apply_recipe(spec: dict[str, Any], train: dict[str, Any], recipe: dict[str, Any]) -> tuple[dict, dict]:
    """The model spec and train settings of ``recipe`` applied to an experiment's ``spec`` and ``train``."""
    options = dict(spec.get("options", {}))
    for key, value in options.items():
        if key.endswith("_dropout"):
            options[key] = round(min(MAX_DROPOUT, value * recipe["dropout_scale"]), 4)
    if "embedding_init" in recipe:
        options["embedding_init"] = recipe["embedding_init"]
    spec = {**spec, "options": options, "hidden_size": recipe.get("hidden_size", spec["hidden_size"])}
    fields = ("batch_size", "bptt", "optimizer", "lr", "beta1", "schedule", "warmup")
    return spec, {**train, **{k: recipe[k] for k in fields}}


def _key(hidden_size: int, batch_size: int, bptt: int) -> str:
    return f"{hidden_size}/{batch_size}/{bptt}"


def calibrate(spec: dict[str, Any], train: dict[str, Any], vocab_size: int, hidden_sizes: tuple[int, ...],
              batch_sizes: tuple[int, ...], bptts: tuple[int, ...], rounds: int = 6, warmup: int = 2,
              device: Any = "cpu") -> dict[str, float]:
    """Median seconds of one training step (forward, backward, clipping, Adam) per ``"H/B/T"``.

    The model is ``spec`` at each hidden size, trained on random tokens with ``train``'s number of dropout samples.
    The shapes take their steps in turn, one step each per round, so that load from other processes that comes and
    goes hits every shape alike (it still inflates all of them: time on an idle machine).
    """
    import statistics

    import torch

    from paperlib.models import build_lm, detach_state, multi_sample_loss

    runners = {}
    for hidden_size in hidden_sizes:
        torch.manual_seed(0)
        model = build_lm(spec["cell"], vocab_size, hidden_size, spec["num_layers"], **spec.get("options", {}))
        model.to(device).train()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        for batch_size in batch_sizes:
            for bptt in bptts:
                runners[_key(hidden_size, batch_size, bptt)] = {"model": model, "optimizer": optimizer, "state": None,
                                                                "shape": (batch_size, bptt + 1), "times": []}

    def step(run: dict[str, Any]) -> float:
        model, optimizer = run["model"], run["optimizer"]
        tokens = torch.randint(vocab_size, run["shape"], device=device)
        started = time.perf_counter()
        loss, state = multi_sample_loss(model, tokens[:, :-1], tokens[:, 1:], train.get("num_samples", 1),
                                        run["state"])
        run["state"] = detach_state(state)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        loss.item()
        return time.perf_counter() - started

    for round_ in range(warmup + rounds):
        for run in runners.values():
            seconds = step(run)
            if round_ >= warmup:
                run["times"].append(seconds)
    return {key: statistics.median(run["times"]) for key, run in runners.items()}


@dataclass
class SearchData:
    """What a recipe study trains and scores on: the training stream, the validation text the experiment's stage
    scores (its ``eval_tokens`` prefix; all of it when that is null), the vocabulary size, and the level that
    names the score (word: perplexity; char, byte: bits per symbol)."""

    train: Any
    valid: Any
    vocab_size: int
    level: str


def level_of(experiment: str, corpus: str) -> str:
    """The unit a study of ``experiment`` scores in: "byte" for the byte-level experiment, else the corpus' level."""
    from paperlib.data import get_corpus
    from paperlib.experiments.language_models.lm_wt2_bytes import EXPERIMENT as BYTES

    return "byte" if experiment == BYTES else get_corpus(corpus).level


def search_data(experiment: str, settings: Any, root: Path) -> SearchData:
    """The experiment's corpus as its stage reads it: byte streams for the byte-level experiment
    (:mod:`paperlib.experiments.language_models.lm_wt2_bytes`), the tokenised corpus otherwise."""
    from paperlib.data import load_corpus
    from paperlib.experiments.common.config import load_params, section_params
    from paperlib.experiments.language_models.lm_wt2_bytes import load_bytes

    data_root = root / section_params("data", load_params()).root
    level = level_of(experiment, settings.corpus)
    if level == "byte":
        corpus = load_bytes(settings.corpus, data_root)
        train, valid, vocab_size = corpus.split("train"), corpus.split("valid"), corpus.vocab_size
    else:
        corpus = load_corpus(settings.corpus, data_root)
        train, valid, vocab_size = corpus.train, corpus.valid, len(corpus.vocab)
    return SearchData(train, valid[: settings.eval_tokens], vocab_size, level)


@dataclass
class RecipeObjective:
    """Train the model of ``spec`` with a sampled recipe for the steps that take ``seconds`` on the calibrated
    machine (``step_seconds``: :func:`calibrate`), or for ``tokens`` training tokens when given (the budget of a
    comparison at equal training tokens); minimise the validation NLL (``corpus``: :func:`search_data`)."""

    spec: dict[str, Any]
    train: dict[str, Any]
    seconds: float | None
    step_seconds: dict[str, float] | None
    corpus: Any
    runs_dir: Path
    tokens: int | None = None
    hidden_sizes: tuple[int, ...] = ()
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    bptts: tuple[int, ...] = BPTTS
    progress: bool = False
    device: Any = "cpu"
    seed: int = 1
    log: list = field(default_factory=list)

    def __call__(self, trial: optuna.Trial) -> float:
        import torch

        from paperlib.data import batchify, bptt_windows
        from paperlib.models import build_lm, evaluate_nll
        from paperlib.train import Trainer, TrainConfig, TrainingDiverged

        recipe = sample_recipe(trial, self.batch_sizes, self.bptts, self.hidden_sizes)
        spec, train = apply_recipe(self.spec, self.train, recipe)
        if self.tokens is not None:
            steps = max(1, round(self.tokens / (train["batch_size"] * train["bptt"])))
        else:
            key = _key(spec["hidden_size"], train["batch_size"], train["bptt"])
            steps = max(1, round(self.seconds / self.step_seconds[key]))
        config = TrainConfig(**{**train, "max_steps": steps, "seed": self.seed})
        torch.manual_seed(self.seed)
        model = build_lm(spec["cell"], self.corpus.vocab_size, spec["hidden_size"], spec["num_layers"],
                         **spec.get("options", {}))
        trainer = Trainer(model, self.corpus.train, self.corpus.valid, config, self.runs_dir / f"trial{trial.number}",
                          device=self.device, progress=self.progress)
        trial.set_user_attr("parameters", sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()))
        started = time.perf_counter()
        try:
            result = trainer.fit()
        except TrainingDiverged as err:
            trial.set_user_attr("diverged", str(err))
            return math.nan  # Optuna: FAIL
        finally:
            trial.set_user_attr("steps", trainer.step)
            trial.set_user_attr("train_seconds", round(trainer.train_seconds, 1))
        trainer.load(trainer.best_path, restore_position=False)
        with trainer.recommended_weights():
            valid = evaluate_nll(trainer.model, bptt_windows(batchify(self.corpus.valid.to(trainer.device),
                                                                      config.eval_batch_size), config.bptt))
        for checkpoint in (trainer.best_path, trainer.last_path):
            checkpoint.unlink(missing_ok=True)
        trial.set_user_attr("tokens", result.tokens)
        # the validation curve (on the evaluation subset the recipe's settings give): was the run still improving?
        trial.set_user_attr("curve", [[h["step"], round(h["valid_nll"], 5)] for h in result.history
                                      if "valid_nll" in h and "monitor" not in h])
        trial.set_user_attr("wall_seconds", round(time.perf_counter() - started, 1))
        trial.set_user_attr("recipe", recipe)
        return valid


def _model_settings(experiment: str, model: str, profile: str):
    from paperlib.experiments.common.config import experiment_params, load_params

    params = load_params()
    settings = experiment_params(experiment, profile, params)
    if model not in settings.models:
        raise ValueError(f"{experiment} ({profile}) has no model {model!r}; it has {', '.join(settings.models)}")
    spec = settings.models[model]
    return params, settings, spec, {**settings.train, **spec.get("train", {})}


def timing_table(experiment: str, model: str, profile: str = "cpu", hidden_sizes: tuple[int, ...] = (),
                 batch_sizes: tuple[int, ...] = BATCH_SIZES, bptts: tuple[int, ...] = BPTTS,
                 threads: int | None = None) -> dict:
    """:func:`calibrate` for every shape the search space can pick, with the experiment's thread count, plus what
    the reading depends on (threads, the machine's load average before it started, torch's version)."""
    import os
    import platform

    import torch

    from paperlib.data import get_corpus
    from paperlib.experiments.common.config import repo_root
    from paperlib.experiments.common.stage import setup_stage

    params, settings, spec, train = _model_settings(experiment, model, profile)
    threads = threads or settings.threads
    torch.set_num_threads(threads)
    device = setup_stage(profile, params)
    load = os.getloadavg()[0]
    vocab = search_data(experiment, settings, repo_root()).vocab_size
    sizes = tuple(hidden_sizes) or (spec["hidden_size"],)
    table = calibrate(spec, train, vocab, sizes, batch_sizes, bptts, device=device)
    return {"experiment": experiment, "model": model, "corpus": get_corpus(settings.corpus).name,
            "threads": threads, "load_average_before": round(load, 2), "torch": torch.__version__,
            "machine": platform.processor() or platform.machine(), "step_seconds": table}


def search(experiment: str, model: str, seconds: float | None, trials: int, profile: str = "cpu",
           hidden_sizes: tuple[int, ...] = (), enqueue: list[dict[str, Any]] | None = None, seed: int = 0,
           study_name: str | None = None, progress: bool = True, step_seconds: dict[str, float] | None = None,
           batch_sizes: tuple[int, ...] = BATCH_SIZES, bptts: tuple[int, ...] = BPTTS,
           tokens: int | None = None, threads: int | None = None, one_more: bool = False) -> optuna.Study:
    """Run (or resume) the recipe study of ``model`` in ``experiment``'s ``profile`` until it holds ``trials``.

    ``one_more``: run one trial and return, so that a caller can write a summary after each trial while other
    workers run trials of the same study (if the study already holds ``trials`` finished or running trials,
    wait for them as :func:`paperlib.tuning.run_worker` does).

    The budget is ``seconds`` of training per trial, or ``tokens`` training tokens (then nothing is timed).
    ``enqueue``: Optuna parameter dicts tried first (e.g. the current recipe or a known good one).
    ``step_seconds``: a timing table (:func:`timing_table`) instead of timing the shapes now.
    """
    if (seconds is None) == (tokens is None):
        raise ValueError("give the budget either in seconds or in tokens")
    import torch

    from paperlib.experiments.common.config import repo_root
    from paperlib.experiments.common.stage import setup_stage

    params, settings, spec, train = _model_settings(experiment, model, profile)
    sizes = tuple(hidden_sizes) or (spec["hidden_size"],)
    needed = [_key(h, b, t) for h in sizes for b in batch_sizes for t in bptts]
    if tokens is None and step_seconds is not None and any(k not in step_seconds for k in needed):
        raise ValueError(f"the timing table lacks shapes {[k for k in needed if k not in step_seconds]} (H/B/T)")
    root = repo_root()
    torch.set_num_threads(threads or settings.threads)
    device = setup_stage(profile, params)
    corpus = search_data(experiment, settings, root)
    budget = f"{seconds:g}s" if tokens is None else f"{tokens}tok"
    name = study_name or f"recipes-{experiment}-{model}-{profile}-{budget}"
    study = open_study(name, default_storage(name, root), directions=("minimize",), sampler="tpe", seed=seed,
                       startup_trials=8)
    if seed is not None:  # every call makes a fresh sampler: offset its seed by the trials so far, or each call of a
        # one-trial-per-call loop would draw the same random start-up recipe again
        study.sampler = make_sampler("tpe", 1, seed + len(study.get_trials(deepcopy=False)), startup_trials=8)
    spec_key = json.loads(json.dumps({"spec": spec, "train": train, "seconds": seconds, "tokens": tokens,
                                      "hidden_sizes": list(hidden_sizes), "batch_sizes": list(batch_sizes),
                                      "bptts": list(bptts), "corpus": settings.corpus,
                                      "code": code_hash(__name__), **cache_key()}))
    known = study.user_attrs.get("spec")
    if known is None and tokens is None:
        if step_seconds is None:
            if progress:
                print(f"{name}: timing training steps of {len(needed)} shapes", flush=True)
            step_seconds = calibrate(spec, train, corpus.vocab_size, sizes, batch_sizes, bptts, device=device)
        study.set_user_attr("step_seconds", {k: step_seconds[k] for k in needed})
    if known is None:
        study.set_user_attr("spec", spec_key)
        for params_ in enqueue or []:
            study.enqueue_trial(params_)
    elif known != spec_key:
        raise ValueError(f"study {name!r} was made with other settings; pass another study name")
    optuna.logging.set_verbosity(optuna.logging.INFO if progress else optuna.logging.WARNING)
    objective = RecipeObjective(spec, train, seconds, study.user_attrs.get("step_seconds"), corpus,
                                root / "runs" / "tuning" / name, hidden_sizes=tuple(hidden_sizes),
                                batch_sizes=tuple(batch_sizes), bptts=tuple(bptts), device=device, tokens=tokens)
    counts = trial_counts(study)
    if one_more and sum(counts.get(state.name, 0) for state in FINISHED) + counts.get("RUNNING", 0) < trials:
        study.optimize(objective, n_trials=1, catch=())  # one trial of its own, whatever the others are running
    else:  # (or the remaining trials all run elsewhere: wait for them, and finish any whose worker died)
        run_worker(name, study._storage, objective, trials, catch=())
    return study


def summarise(study: optuna.Study, experiment: str, model: str, level: str = "word") -> dict[str, Any]:
    """Every finished trial (recipe, steps, tokens, seconds, validation score) and the best, as JSON-ready data;
    scores in perplexity (``level`` "word") or bits per character / byte ("char", "byte")."""
    units = {"word": "valid_ppl", "char": "valid_bpc", "byte": "valid_bpb"}
    if level not in units:
        raise ValueError(f"level must be one of {', '.join(units)}, got {level!r}")
    convert = math.exp if level == "word" else (lambda nll: nll / math.log(2))
    unit = units[level]
    rows = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (*FINISHED, optuna.trial.TrialState.FAIL):
            continue
        rows.append({"number": t.number, "state": t.state.name,
                     unit: convert(t.value) if t.value is not None and math.isfinite(t.value) else None,
                     **{k: t.user_attrs.get(k) for k in ("recipe", "parameters", "steps", "tokens", "train_seconds",
                                                             "curve")}})
    done = [r for r in rows if r[unit] is not None]
    best = min(done, key=lambda r: r[unit]) if done else None
    return {"experiment": experiment, "model": model, "study": study.study_name,
            "settings": study.user_attrs.get("spec"), "step_seconds": study.user_attrs.get("step_seconds"),
            "counts": trial_counts(study), "unit": unit,
            "trials": sorted(rows, key=lambda r: r[unit] if r[unit] is not None else math.inf), "best": best}
