"""The reverse-copy task: encoder/decoder LSTM vs Mogrifier LSTM, Melis thesis §2.3.3 (Fig. 2.4).

An encoder reads a sequence of i.i.d. uniform tokens; a decoder, initialised from the encoder's last
state, reads a marker and then emits the sequence reversed (teacher-forced on the shifted reversed
source, see :func:`paperlib.data.reverse_copy`). The thesis compares an LSTM encoder/decoder with a
Mogrifier LSTM (eq. 2.2) encoder/decoder of the same total size (10M parameters, vocabulary 1,000,
500k training examples, lengths 50–200) and reports per-token cross-entropy against sequence length:
both models solve lengths 50 and 100, the Mogrifier is considerably better at 150 and 200, and the
Mogrifier's tuned embedding is much smaller (41/1054 vs 498/787 embedding/hidden at 150 steps).

The model (:class:`~paperlib.seq2seq.ReverseCopyModel`, with :func:`~paperlib.seq2seq.count_parameters` and
:func:`~paperlib.seq2seq.hidden_size_for_budget`, so that both models have almost the same size while their
embedding sizes differ, as in the thesis) is in :mod:`paperlib.seq2seq`; its training and evaluation, one model
at a time or as a stack of models of one shape, in :mod:`paperlib.experiments.reverse_copy.training`. This module
holds the grid (:func:`grid_points`, grouped by :func:`stacks`), :func:`run_grid_point` / :func:`run_stack`,
:func:`select_best` and the experiment runner :func:`run_reverse_copy`, which writes ``results/reverse_copy.json``
(keys: :data:`RESULT_KEYS`) and its provenance. With a model's ``stack_size`` set (the Mogrifier at the ``gpu`` and
``paper`` profiles), its runs of one length and shape (those that differ in learning rate, L2 penalty and seed)
train as stacks of up to that many models, equal to separate runs up to float rounding; the LSTM (cuDNN's fused
layer on a GPU) and the ``cpu`` profile run them separately.

Departures from the thesis and choices it leaves open:

- The thesis does not give the batch size, the number of training steps, the number of layers, the
  tuner's budget or exactly which parameters count towards "10 million". We use one layer per side,
  separate encoder/decoder embeddings (the encoder's has V rows, the decoder's V + 1 for the marker),
  an untied softmax from the hidden state, and count every parameter (including ``nn.LSTM``'s two
  bias vectors); with this accounting a 10M budget and embedding size 498 give hidden size 793
  (thesis: 787).
- The thesis tunes learning rate, L2 penalty and embedding size (plus r and k for the Mogrifier) with
  a black-box tuner; we run the full grid given in ``params.yaml`` once per training seed (``seeds``: the
  initialisation and the batch order; the examples are drawn once, from ``data_seed``) and pick, per model
  and length, the grid point with the lowest validation cross-entropy averaged over the seeds; its mean test
  cross-entropy is reported, with every seed's beside it for the claims' seed margins. The thesis does not say
  how many seeds it ran.
- The thesis' chapter-2 LSTM is eq. (2.1) without the capped input gate of §4.6, so the cap is off
  by default (it is a per-model option).
- No dropout (as in the thesis: overfitting is not an issue with this much fresh data) and no
  checkpointing inside a separate run; finished runs are cached under ``runs/reverse_copy/`` so an interrupted stage
  resumes at the granularity of one (model, length, grid point); a stack checkpoints every
  :data:`CHECKPOINT_EVERY` steps (``runs/reverse_copy/stack-<key>.pt``) and continues from there.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from paperlib.atomic_files import write_json_atomic
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.reverse_copy.claims import record as claims_record
from paperlib.experiments.common.runs import json_safe, map_jobs
from paperlib.experiments.common.config import register_experiment
from paperlib.data import ReverseCopyData, reverse_copy
from paperlib.experiments.reverse_copy.training import (SCHEDULES, VALID_OPTIMIZERS, TrainSettings, evaluate,
                                                        token_cross_entropy, train_model, train_stacked)
from paperlib.device import cache_key
from paperlib.experiments.common.stage import results_path, setup_stage, stage_device
from paperlib.seq2seq import ReverseCopyModel, build_model, count_parameters, hidden_size_for_budget, num_parameters
from paperlib.reference.reverse_copy import REVERSE_COPY

EXPERIMENT = "reverse_copy"
MODEL_NAMES = ("lstm", "mogrifier")
CHECKPOINT_EVERY = 1000  # steps between a stack's checkpoints (a few minutes at the paper's shapes)

# Top-level keys of results/reverse_copy.json.
RESULT_KEYS = (
    "experiment",  # "reverse_copy"
    "profile",  # the params.yaml profile that made the results
    "settings",  # the validated ReverseCopyParams
    "lengths",  # sequence lengths, ascending
    "chance_cross_entropy",  # ln V: the cross-entropy of guessing uniformly
    "runs",  # one record per (model, length, grid point, seed): sizes, parameters, valid/test metrics, loss curve
    "best",  # {model: {length: the grid point with the lowest mean validation cross-entropy, seed means and lists}}
    "cross_entropy",  # {model: [mean test cross-entropy over seeds of the best grid point, per length]}
    "cross_entropy_seeds",  # {model: [[test cross-entropy per seed] of the best grid point, per length]}
    "parameters",  # {model: [parameter count of the best run, per length]}
    "claims",  # the thesis' claims judged on our numbers (paperlib.experiments.reverse_copy.claims.record)
    "paper",  # the thesis' statements (paperlib.reference.reverse_copy.REVERSE_COPY)
)


# ------------------------------------------------------------------------------------------ experiment


@register_experiment(EXPERIMENT)
@dataclass(frozen=True)
class ReverseCopyParams:
    """Settings of the reverse-copy comparison (one ``params.yaml`` profile).

    ``models`` has exactly the entries ``lstm`` and ``mogrifier``, each a grid:
    ``{embedding_sizes: [...]}`` and, for the Mogrifier, also ``rounds: [...]``, ``ranks: [...]``
    (rank <= 0: full rank) and optionally ``zigzag``; either may set ``capped_input_gate`` and ``stack_size`` (null or
    absent: every run on its own; an integer: the runs of one shape and length in stacks of at most that many,
    :func:`stacks`, :func:`~paperlib.experiments.reverse_copy.training.train_stacked`). The hidden
    size of every grid point is the largest within ``parameter_budget``. Every model is trained at
    every length and every point of models x ``learning_rates`` x ``l2_penalties``, once per seed of ``seeds``
    (initialisation and batch order); the examples of every split are drawn from ``data_seed``.
    """

    vocab_size: int
    lengths: list[int]
    train_examples: int
    valid_examples: int
    test_examples: int
    parameter_budget: int
    models: dict
    learning_rates: list[float]
    l2_penalties: list[float]
    steps: int
    batch_size: int
    optimizer: str = "adam"
    beta1: float = 0.0
    clip_norm: float = 10.0
    schedule: str = "constant"  # learning-rate schedule over `steps` (beyond the thesis, for short budgets)
    num_layers: int = 1
    eval_batch_size: int = 256
    log_every: int = 50
    seeds: list[int] = field(default_factory=lambda: [1])
    data_seed: int = 1
    workers: int = 1
    threads: int = 1

    def __post_init__(self) -> None:
        if sorted(self.models) != sorted(MODEL_NAMES):
            raise ValueError(f"models must have exactly the entries {', '.join(MODEL_NAMES)}, "
                             f"got {sorted(self.models)}")
        allowed = {"lstm": {"embedding_sizes", "capped_input_gate", "stack_size"},
                   "mogrifier": {"embedding_sizes", "rounds", "ranks", "zigzag", "capped_input_gate", "stack_size"}}
        for name, spec in self.models.items():
            if not isinstance(spec, dict):
                raise ValueError(f"models.{name} must be a mapping")
            unknown = sorted(set(spec) - allowed[name])
            if unknown:
                raise ValueError(f"models.{name}: unknown key(s) {unknown}; "
                                 f"valid keys: {', '.join(sorted(allowed[name]))}")
            needed = ["embedding_sizes"] + (["rounds", "ranks"] if name == "mogrifier" else [])
            for key in needed:
                values = spec.get(key)
                if not isinstance(values, list) or not values or not all(isinstance(v, int) for v in values):
                    raise ValueError(f"models.{name}.{key} must be a non-empty list of integers, got {values!r}")
            if any(e < 1 for e in spec["embedding_sizes"]) or any(r < 0 for r in spec.get("rounds", [])):
                raise ValueError(f"models.{name}: embedding sizes must be >= 1 and rounds >= 0")
            size = spec.get("stack_size")
            if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
                raise ValueError(f"models.{name}.stack_size must be null (separate runs) or a positive integer, "
                                 f"got {size!r}")
        if self.optimizer not in VALID_OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(VALID_OPTIMIZERS)}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not self.lengths or any(n < 1 for n in self.lengths) or len(set(self.lengths)) != len(self.lengths):
            raise ValueError(f"lengths must be distinct positive integers, got {self.lengths}")
        for name in ("vocab_size", "train_examples", "valid_examples", "test_examples", "parameter_budget", "steps",
                     "batch_size", "num_layers", "eval_batch_size", "log_every", "workers", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or not all(isinstance(x, int)
                                                                                 for x in self.seeds):
            raise ValueError(f"seeds must be a non-empty list of distinct integers, got {self.seeds}")
        if self.vocab_size < 2:
            raise ValueError("vocab_size must be at least 2")
        if not self.learning_rates or any(lr <= 0 for lr in self.learning_rates):
            raise ValueError(f"learning_rates must be a non-empty list of positive numbers, got {self.learning_rates}")
        if not self.l2_penalties or any(l2 < 0 for l2 in self.l2_penalties):
            raise ValueError(f"l2_penalties must be a non-empty list of non-negative numbers, got {self.l2_penalties}")
        grid_points(self)  # raises ValueError if some embedding size leaves no room in the budget


@dataclass(frozen=True)
class GridPoint:
    """One training run of the experiment."""

    model: str
    length: int
    lr: float
    l2: float
    embedding_size: int
    hidden_size: int
    mogrifier_rounds: int | None
    mogrifier_rank: int
    mogrifier_zigzag: bool
    capped_input_gate: bool
    seed: int  # initialisation and batch order


def grid_points(settings: ReverseCopyParams) -> list[GridPoint]:
    """Every (model, length, lr, l2, embedding size[, rounds, rank], seed) run, hidden size from the budget."""
    points = []
    for name in MODEL_NAMES:
        spec = settings.models[name]
        mog = name == "mogrifier"
        rounds = spec["rounds"] if mog else [None]
        ranks = spec["ranks"] if mog else [0]
        for length, lr, l2, emb, r, k, seed in itertools.product(sorted(settings.lengths), settings.learning_rates,
                                                                 settings.l2_penalties, spec["embedding_sizes"],
                                                                 rounds, ranks, settings.seeds):
            hidden = hidden_size_for_budget(settings.parameter_budget, settings.vocab_size, emb,
                                            settings.num_layers, r, k)
            points.append(GridPoint(name, length, float(lr), float(l2), emb, hidden, r, k,
                                    bool(spec.get("zigzag", True)), bool(spec.get("capped_input_gate", False)),
                                    seed))
    return points


def split_data(settings: ReverseCopyParams, length: int) -> dict[str, ReverseCopyData]:
    """Train/valid/test sets of one length, each from its own seed (so the splits are disjoint draws)."""
    sizes = {"train": settings.train_examples, "valid": settings.valid_examples, "test": settings.test_examples}
    return {split: reverse_copy(num, length, settings.vocab_size, seed=settings.data_seed * 100_003 + 1_009 * length + i)
            for i, (split, num) in enumerate(sizes.items())}


def run_key(point: GridPoint, settings: ReverseCopyParams) -> str:
    """A hash of everything that determines one run's outcome (for the run cache), code included."""
    # the grid's lists, workers and threads do not change what one run computes
    relevant = {k: v for k, v in asdict(settings).items()
                if k not in ("models", "lengths", "learning_rates", "l2_penalties", "seeds", "workers", "threads")}
    text = json.dumps({"point": asdict(point), "settings": relevant, "code": code_hash(__name__), **cache_key(),
                       "stack_size": settings.models[point.model].get("stack_size")}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _train_settings(point: GridPoint, settings: ReverseCopyParams) -> TrainSettings:
    return TrainSettings(steps=settings.steps, batch_size=settings.batch_size, lr=point.lr, l2=point.l2,
                         optimizer=settings.optimizer, beta1=settings.beta1, clip_norm=settings.clip_norm,
                         schedule=settings.schedule, log_every=settings.log_every)


def _build(point: GridPoint, settings: ReverseCopyParams) -> ReverseCopyModel:
    return build_model(settings.vocab_size, point.embedding_size, point.hidden_size, settings.num_layers,
                       point.mogrifier_rounds, point.mogrifier_rank, point.mogrifier_zigzag,
                       point.capped_input_gate, seed=point.seed).to(stage_device())


def _record(point: GridPoint, model: ReverseCopyModel, curve: list[dict[str, float]] | None,
            data: dict[str, ReverseCopyData], settings: ReverseCopyParams, seconds: float) -> dict[str, Any]:
    """One run's record: its sizes, validation/test metrics (inf when training diverged: ``curve`` None) and loss
    curve; ``seconds``: the training time it is charged, evaluation added."""
    started = time.time()
    if curve is None:
        valid = test = {"cross_entropy": math.inf, "token_accuracy": 0.0}
    else:
        valid = evaluate(model, data["valid"], settings.eval_batch_size)
        test = evaluate(model, data["test"], settings.eval_batch_size)
    return {
        **asdict(point), "parameters": num_parameters(model), "diverged": curve is None,
        "valid_cross_entropy": valid["cross_entropy"], "valid_token_accuracy": valid["token_accuracy"],
        "test_cross_entropy": test["cross_entropy"], "test_token_accuracy": test["token_accuracy"],
        "train_curve": curve or [], "seconds": round(seconds + time.time() - started, 2),
    }


def run_grid_point(point: GridPoint, settings: ReverseCopyParams) -> dict[str, Any]:
    """Train one model at one length and grid point; its sizes, validation/test metrics and loss curve."""
    started = time.time()
    data = split_data(settings, point.length)
    model = _build(point, settings)
    try:
        curve = train_model(model, data["train"], _train_settings(point, settings), seed=point.seed)
    except FloatingPointError:
        curve = None
    return _record(point, model, curve, data, settings, time.time() - started)


def run_stack(points: list[GridPoint], settings: ReverseCopyParams,
              checkpoint: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """Train the runs ``points`` (one model, length and shape) as one stack; their records, in order, each charged
    an equal share of the stack's training time (of this process: a stack continued from its ``checkpoint``, saved
    every :data:`CHECKPOINT_EVERY` steps, counts the time since)."""
    started = time.time()
    if not points:
        raise ValueError("a stack needs at least one run")
    shapes = {_shape(p) for p in points}
    if len(shapes) != 1:
        raise ValueError(f"a stack's runs must share model, length and shape; got {len(shapes)} shapes")
    data = split_data(settings, points[0].length)
    models = [_build(p, settings) for p in points]
    curves = train_stacked(models, data["train"], [_train_settings(p, settings) for p in points],
                           [p.seed for p in points], checkpoint, CHECKPOINT_EVERY)
    share = (time.time() - started) / len(points)
    return [_record(p, m, c, data, settings, share) for p, m, c in zip(points, models, curves)]


def _shape(point: GridPoint) -> tuple:
    """What must agree for runs to share a stack: all of a grid point but its learning rate, L2 penalty and seed."""
    return tuple(v for k, v in asdict(point).items() if k not in ("lr", "l2", "seed"))


def _stack_size(point: GridPoint, settings: ReverseCopyParams) -> int | None:
    return settings.models[point.model].get("stack_size")


def stacks(points: list[GridPoint], settings: ReverseCopyParams) -> list[list[GridPoint]]:
    """``points`` as training jobs: one run each for a model without a ``stack_size``; else the model's runs of
    each shape and length in grid order, cut into stacks of at most its ``stack_size``."""
    groups: dict[tuple, list[GridPoint]] = {}
    for point in points:
        groups.setdefault(_shape(point) if _stack_size(point, settings) else (point,), []).append(point)
    jobs = []
    for group in groups.values():
        size = _stack_size(group[0], settings) or 1
        jobs.extend(group[i : i + size] for i in range(0, len(group), size))
    return jobs


def _job(points: list[GridPoint], settings: ReverseCopyParams, runs_dir: str, progress: bool) -> list[dict[str, Any]]:
    """The records of ``points`` (one run, or one stack): read back where finished, the rest trained."""
    paths = {p: Path(runs_dir) / f"{p.model}-L{p.length}-s{p.seed}-{run_key(p, settings)}.json" for p in points}
    records = {p: json.loads(paths[p].read_text()) for p in points if paths[p].is_file()}
    todo = [p for p in points if p not in records]
    if todo:
        torch.set_num_threads(settings.threads)
        setup_stage()  # precision in this (possibly spawned) worker, by the active profile
        checkpoint = None
        if _stack_size(todo[0], settings) is not None:  # this stack's members, named by their run keys
            key = hashlib.sha256(" ".join(paths[p].name for p in todo).encode()).hexdigest()[:16]
            checkpoint = Path(runs_dir) / f"stack-{key}.pt"
        trained = run_stack(todo, settings, checkpoint) if checkpoint else [run_grid_point(todo[0], settings)]
        for point, record in zip(todo, trained):
            write_json_atomic(paths[point], record)
            records[point] = record
            if progress:
                print(f"{point.model:9s} L={point.length:<4d} seed={point.seed} lr={point.lr:g} l2={point.l2:g} "
                      f"E={point.embedding_size} H={point.hidden_size}: valid CE {record['valid_cross_entropy']:.4f} "
                      f"({record['seconds']:.0f}s)", flush=True)
        if checkpoint:
            checkpoint.unlink(missing_ok=True)  # the records are kept: the stack is done
    return [records[p] for p in points]


SEED_METRICS = ("valid_cross_entropy", "valid_token_accuracy", "test_cross_entropy", "test_token_accuracy")
PER_SEED = ("seed", "diverged", "train_curve", "seconds", *SEED_METRICS)  # what differs between a point's seeds


def seed_means(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per grid point of ``runs`` (their seeds pooled, in order of first appearance): the point's
    settings, ``seeds``, the mean of each of :data:`SEED_METRICS` over the seeds (inf if a seed diverged) and its
    per-seed list under ``<metric>_seeds``, and ``diverged`` (some seed did)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        point = json.dumps({k: v for k, v in run.items() if k not in PER_SEED}, sort_keys=True)
        groups.setdefault(point, []).append(run)
    pooled = []
    for members in groups.values():
        record = {k: v for k, v in members[0].items() if k not in PER_SEED}
        record.update(seeds=[r["seed"] for r in members], diverged=any(r["diverged"] for r in members))
        for metric in SEED_METRICS:
            values = [r[metric] for r in members]
            record[metric] = math.fsum(values) / len(values) if all(map(math.isfinite, values)) else math.inf
            record[f"{metric}_seeds"] = values
        pooled.append(record)
    return pooled


def select_best(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per model and length (as a string key), the grid point with the lowest validation cross-entropy averaged
    over its seeds (:func:`seed_means`)."""
    best: dict[str, dict[str, dict[str, Any]]] = {}
    for point in seed_means(runs):
        slot = best.setdefault(point["model"], {})
        key = str(point["length"])
        if key not in slot or point["valid_cross_entropy"] < slot[key]["valid_cross_entropy"]:
            slot[key] = point
    return best


def run_experiment(settings: ReverseCopyParams, runs_dir: str | os.PathLike, progress: bool = False) -> dict[str, Any]:
    """Every run of ``settings`` (cached in ``runs_dir``) and their summary, as written to the results JSON."""
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    # longest sequences first, Mogrifier (slower) before LSTM, so parallel workers finish together
    grid = grid_points(settings)
    jobs = sorted(stacks(grid, settings), key=lambda job: (-job[0].length, job[0].model != "mogrifier"))
    done = map_jobs(_job, [(job, settings, str(runs_dir), progress) for job in jobs], settings.workers)
    by_point = {p: r for job, records in zip(jobs, done) for p, r in zip(job, records)}
    records = [by_point[p] for p in grid]
    best = select_best(records)
    lengths = sorted(settings.lengths)
    results = {
        "experiment": EXPERIMENT,
        "settings": asdict(settings),
        "lengths": lengths,
        "chance_cross_entropy": math.log(settings.vocab_size),
        "runs": records,
        "best": best,
        "cross_entropy": {m: [best[m][str(n)]["test_cross_entropy"] for n in lengths] for m in MODEL_NAMES},
        "cross_entropy_seeds": {m: [best[m][str(n)]["test_cross_entropy_seeds"] for n in lengths]
                                for m in MODEL_NAMES},
        "parameters": {m: [best[m][str(n)]["parameters"] for n in lengths] for m in MODEL_NAMES},
        "paper": REVERSE_COPY,
    }
    results["claims"] = claims_record(results)  # the verdicts the index and the notebook show
    return results


def run_reverse_copy(profile: str | None = None, progress: bool = True,
                     root: str | os.PathLike | None = None) -> Path:
    """Run (or resume) experiment ``reverse_copy`` and write ``results/reverse_copy.json`` plus provenance."""
    from paperlib.experiments.common.config import active_profile, experiment_params, load_params, repo_root
    from paperlib.experiments.common.provenance import provenance

    started = time.time()
    root = Path(root) if root is not None else repo_root()
    params = load_params(root / "params.yaml")
    profile = active_profile(profile, params)
    settings: ReverseCopyParams = experiment_params(EXPERIMENT, profile, params)
    setup_stage(profile, params)
    results = run_experiment(settings, root / "runs" / EXPERIMENT, progress)
    results = {"profile": profile, **results}
    out = results_path(root, EXPERIMENT, profile)
    write_json_atomic(out, json_safe(results))
    seconds = {f"{r['model']}-L{r['length']}-lr{r['lr']:g}-l2{r['l2']:g}-E{r['embedding_size']}-s{r['seed']}": r["seconds"]
               for r in results["runs"]}
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, results["settings"], None, started,
                                    code=code_hash(__name__)), "run_seconds": seconds})
    return out


__all__ = [
    "EXPERIMENT", "RESULT_KEYS", "GridPoint", "ReverseCopyModel", "ReverseCopyParams", "TrainSettings",
    "build_model", "count_parameters", "evaluate", "grid_points", "hidden_size_for_budget",
    "num_parameters", "run_experiment", "run_grid_point", "run_reverse_copy", "run_stack", "seed_means", "select_best",
    "split_data", "stacks", "token_cross_entropy", "train_model", "train_stacked",
]
