"""A scale ladder for Schmidt & Hofmann Table 1: does the DSSM's cross-entropy gap to the GRU
baseline move the paper's way as the training budget grows?

The ``word_generation`` stage scores every Table 1 row after one budget (``steps``). Here two of its rows, a DSSM
(by default 2xTRIL, K=10) and the GRU baseline of the same state size (BASELINE-8D), are trained with the same
data, model, optimiser and learning rate (the ``word_generation`` settings of the same profile) for a ladder of
step budgets growing geometrically, ``rungs``. The learning rate is constant (Adam, no schedule), so one run per
model and seed, stopped and scored at each rung, is the same as a separate run per rung: the runs stop at each
budget with a checkpoint and resume bit for bit (:func:`~paperlib.experiments.word_generation.word_generation.train_model`;
with the stage's ``stack_size``, a row's seeds train as stacks, :func:`~paperlib.experiments.word_generation.training.train_runs`).

At each rung, per model: H[P_test, P̂] (nats per word token, eq. 12 for the DSSM with ``eval_samples`` prior
trajectories, exact for the GRU) over the seeds, and whether training had **converged**: the same cross-entropy
three quarters into the rung, and converged means it fell by no more than twice the standard error of its
per-seed change over that last quarter. The gap is H(GRU) - H(DSSM), positive in the paper's direction (the
paper: 12.97 - 11.38 = 1.59 nats); its tie margin is twice the standard error of the difference of the two seed
means at that rung. :func:`paperlib.experiments.common.claims.ladder_word` reads the ladder;
:mod:`paperlib.experiments.word_generation.claims` turns it into S-T1's claim.

Departure from the seed: the paper trains for an unstated budget on BooksCorpus; ours is the wordfreq list of
the ``word_generation`` stage, and the top rung is still far from convergence-scale training.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from paperlib.experiments.common.stage import results_path
from paperlib.atomic_files import write_json_atomic
from paperlib.device import Compute, configure, current
from paperlib.data.wordlist import english_word_list
from paperlib.experiments.common.claims import check_ladder, convergence, ladder_word, scoring_steps
from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.config import register_experiment
from paperlib.experiments.common.ladder import start_stage
from paperlib.experiments.common.provenance import provenance
from paperlib.experiments.common.runs import map_jobs
from paperlib.experiments.word_generation.word_generation import (NAME as MAIN, SplitData, PAPER_TABLE1, WordGenerationParams,
                                                  build_model, complete_spec, evaluate_model, make_splits,
                                                  settings_fingerprint)
from paperlib.experiments.word_generation.training import _log_prob_fn, train_runs
from paperlib.word_metrics import train_test_cross_entropy

NAME = "word_generation_ladder"
KEPT = ("H_train", "H_test", "I_bar", "in_vocab")  # what each scoring keeps of evaluate_model's metrics


@register_experiment(NAME)
@dataclass(frozen=True)
class WordGenerationLadderParams:
    """The ladder's own settings; everything else is the ``word_generation`` section of the same profile.

    ``dssm`` and ``baseline`` name rows of that section's ``table1`` (a DSSM and a GRU); ``rungs`` are the step
    budgets, increasing; ``seeds`` (at least two: the tie margin is their spread); ``workers`` processes train the
    jobs in parallel (a job: one (model, seed) run, or a row's seeds as a stack with that section's ``stack_size``); ``check_samples``: at the top rung, also score the DSSM with this many prior
    trajectories, to show how much of its cross-entropy is the Monte Carlo estimate's upward bias (None: skip).
    """

    dssm: str
    baseline: str
    rungs: list[int]
    seeds: list[int]
    workers: int = 1
    check_samples: int | None = None

    def __post_init__(self) -> None:
        check_ladder(self.rungs, self.seeds, self.workers)
        if self.check_samples is not None and self.check_samples < 1:
            raise ValueError(f"check_samples must be >= 1 or null, got {self.check_samples}")


def main_settings(ladder: WordGenerationLadderParams, main: WordGenerationParams) -> WordGenerationParams:
    """The ``word_generation`` settings trained to the ladder's top rung; rejects rows that are not there."""
    for name, kind in ((ladder.dssm, "dssm"), (ladder.baseline, "gru")):
        spec = main.table1.get(name)
        if spec is None or spec.get("kind") != kind:
            choices = [k for k, v in main.table1.items() if v.get("kind") == kind]
            raise ValueError(f"{NAME}: {name!r} is not a {kind} row of word_generation's table1; choices: {choices}")
    return dataclasses.replace(main, steps=ladder.rungs[-1])


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


def _run(row: str, seeds: Sequence[int], ladder: WordGenerationLadderParams, settings: WordGenerationParams,
         split: SplitData, folders: Sequence[str], device: str, progress: bool,
         compute: Compute | None = None) -> list[dict[str, Any]]:
    """Train the (row, seed) runs of ``seeds`` on ``split`` to the top rung, together where they stack
    (:func:`~paperlib.experiments.word_generation.training.train_runs`), each scored at every :func:`scoring_steps`
    point; resumable (a run's checkpoint and scores so far live in its folder) and read back once done. Returns the
    runs' records in ``seeds`` order. ``compute``: the parent's precision settings, for a worker process (which
    starts with the defaults)."""
    if compute is not None:
        configure(compute.precision, compute.sync_every, compute.compile)
    torch.set_num_threads(settings.threads)
    paths = [Path(folder) for folder in folders]
    records = {seed: json.loads((path / "done.json").read_text())
               for seed, path in zip(seeds, paths) if (path / "done.json").is_file()}
    pending = [(seed, path) for seed, path in zip(seeds, paths) if seed not in records]
    if pending:
        spec = complete_spec(settings.table1[row])
        models = []
        for seed, _ in pending:
            torch.manual_seed(seed)  # parameter initialisation, as in the word_generation stage
            models.append(build_model(spec, split.vocab, settings.max_len).to(device))
        scores = [json.loads((path / "scores.json").read_text()) if (path / "scores.json").is_file() else []
                  for _, path in pending]
        named = ", ".join(str(seed) for seed, _ in pending)
        say = (lambda msg: print(f"{row} seed{'s' if len(pending) > 1 else ''} {named}: {msg}", flush=True)
               ) if progress else None
        started, results = time.time(), [None] * len(pending)
        for step in scoring_steps(ladder.rungs):
            going_on = [j for j, result in enumerate(results) if result is None or not result.diverged]
            if not going_on:
                break
            trained = train_runs([models[j] for j in going_on], split, settings, spec.get("samples", 1),
                                 [pending[j][0] for j in going_on], [pending[j][1] / "checkpoint.pt" for j in going_on],
                                 say, stop_at=step)
            for j, result in zip(going_on, trained):
                results[j] = result
                if result.diverged or any(s["step"] == step for s in scores[j]):
                    continue  # (a run resumed past this step scored it before going on)
                assert result.steps == step, (result.steps, step)  # scored before training past it
                metrics = evaluate_model(models[j], split, settings, pending[j][0])
                scores[j].append({"step": step, **{k: metrics[k] for k in KEPT if k in metrics}})
                write_json_atomic(pending[j][1] / "scores.json", scores[j])
                models[j].train()
        finished = []
        for (seed, path), model, result, scored in zip(pending, models, results, scores):
            record: dict[str, Any] = {
                "row": row, "seed": seed, "spec": spec, "diverged": bool(result and result.diverged), "scores": scored,
                "history": [{"step": h["step"], "loss": h["loss"]} for h in (result.history if result else [])
                            if "loss" in h]}
            if ladder.check_samples is not None and spec["kind"] == "dssm" and not record["diverged"]:
                precise = dataclasses.replace(settings, eval_samples=ladder.check_samples)
                _, h_test = train_test_cross_entropy(_log_prob_fn(model, precise, seed), split.train.words,
                                                     split.train.counts, split.test.words, split.test.counts)
                record["check"] = {"step": ladder.rungs[-1], "eval_samples": ladder.check_samples, "H_test": h_test}
            finished.append((path, record))
        seconds = (time.time() - started) / len(pending)  # each run its share of the job's time
        for path, record in finished:
            record["seconds"] = seconds
            write_json_atomic(path / "done.json", record)
            records[record["seed"]] = record
    return [records[seed] for seed in seeds]


def run_ladder(ladder: WordGenerationLadderParams, main: WordGenerationParams, runs_dir: str | os.PathLike,
               device: str = "cpu", progress: bool = False) -> list[dict[str, Any]]:
    """Every (row, seed) run of the ladder, in (row, seed) order; the DSSM runs (the slow ones) start first. With the
    ``word_generation`` settings' ``stack_size``, a row's seeds train in stacks of at most that many (one job each)."""
    settings = main_settings(ladder, main)
    data = english_word_list(settings.min_len, settings.max_len, settings.min_count, settings.total_tokens,
                             settings.top_n)
    specs = {row: complete_spec(settings.table1[row]) for row in (ladder.dssm, ladder.baseline)}
    key = json.dumps({"ladder": dataclasses.asdict(ladder), "specs": specs, "code": code_hash(__name__),
                      "main": settings_fingerprint(settings, data)}, sort_keys=True)  # the fingerprint skips table1
    base = Path(runs_dir) / _fingerprint(key)
    split = make_splits(data, settings.test_fraction, settings.split_seed)["standard"]  # once, for every run
    size = settings.stack_size or 1
    jobs = [(row, ladder.seeds[i:i + size]) for row in (ladder.dssm, ladder.baseline)
            for i in range(0, len(ladder.seeds), size)]
    compute = current()
    args = [(row, seeds, ladder, settings, split, [str(base / f"{_slug(row)}-seed{seed}") for seed in seeds],
             str(device), progress, compute) for row, seeds in jobs]
    return [record for records in map_jobs(_run, args, ladder.workers) for record in records]


def _fingerprint(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _mean_sd(values: Sequence[float]) -> tuple[float, float, int]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0), len(values)


def _score(record: Mapping[str, Any], step: int) -> float | None:
    value = next((s["H_test"] for s in record["scores"] if s["step"] == step), None)
    return value if value is not None and math.isfinite(value) else None


def summarise(records: Sequence[Mapping[str, Any]], ladder: WordGenerationLadderParams) -> dict[str, Any]:
    """Per rung: each model's H_test (seed mean, sd, n) and convergence; the gap H(GRU) - H(DSSM), its standard
    error and tie margin (2 SE); then the ladder's reading."""
    rungs = []
    for rung in ladder.rungs:
        quarter = rung - rung // 4
        entry: dict[str, Any] = {"steps": rung, "models": {}}
        for role, row in (("dssm", ladder.dssm), ("baseline", ladder.baseline)):
            pairs = [(_score(r, quarter), _score(r, rung)) for r in records if r["row"] == row]
            pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
            if len(pairs) < 2:
                entry["models"][role] = {"row": row, "seeds": len(pairs)}
                continue
            mean, sd, n = _mean_sd([b for _, b in pairs])
            entry["models"][role] = {"row": row, "H_test": mean, "sd": sd, "seeds": n,
                                     **convergence([a for a, _ in pairs], [b for _, b in pairs])}
        dssm, gru = entry["models"]["dssm"], entry["models"]["baseline"]
        if "H_test" in dssm and "H_test" in gru:
            se = math.sqrt(dssm["sd"] ** 2 / dssm["seeds"] + gru["sd"] ** 2 / gru["seeds"])
            entry.update(gap=gru["H_test"] - dssm["H_test"], se=se, margin=2 * se)
        rungs.append(entry)
    judged = [(r["gap"], r["se"]) for r in rungs if "gap" in r]
    return {"rungs": rungs, "reading": ladder_word(judged) if len(judged) >= 2 else None}


def paper_gap(ladder: WordGenerationLadderParams) -> float | None:
    """The paper's H_test(GRU) - H_test(DSSM) for the two rows (Table 1), where it has both."""
    try:
        return PAPER_TABLE1[ladder.baseline]["H_test"][0] - PAPER_TABLE1[ladder.dssm]["H_test"][0]
    except (KeyError, TypeError):
        return None


def run_word_generation_ladder(profile: str | None = None, progress: bool = True,
                               runs_dir: str | os.PathLike | None = None, out: str | os.PathLike | None = None) -> Path:
    """The DVC stage: settings from params.yaml, results to ``results/word_generation_ladder.json``."""
    stage = start_stage(NAME, MAIN, profile, runs_dir, progress=False)  # run_ladder says what it trains
    ladder, main, root, profile = stage.ladder, stage.main, stage.root, stage.profile
    records = run_ladder(ladder, main, stage.runs_dir, stage.device, progress)
    settings = main_settings(ladder, main)
    results = {
        "experiment": NAME, "profile": profile,
        "settings": dataclasses.asdict(ladder),
        "training": {k: getattr(settings, k) for k in ("batch_size", "lr", "eval_samples", "top_n", "history_every")},
        "paper": {"dssm": PAPER_TABLE1.get(ladder.dssm, {}).get("H_test"),
                  "baseline": PAPER_TABLE1.get(ladder.baseline, {}).get("H_test"), "gap": paper_gap(ladder)},
        **summarise(records, ladder),
        "runs": [{k: v for k, v in r.items() if k != "seconds"} for r in records],
    }
    out = Path(out) if out is not None else results_path(root, NAME, profile)
    write_json_atomic(out, results)
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, {"ladder": dataclasses.asdict(ladder),
                                                    "word_generation": dataclasses.asdict(settings)}, {}, stage.started,
                                    code=code_hash(__name__)),
                       "run_seconds": {f"{r['row']} seed {r['seed']}": r.get("seconds") for r in records}})
    return out
