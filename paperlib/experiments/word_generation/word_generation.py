"""Unconditional word generation experiments, Schmidt & Hofmann §4–§5 (Tables 1–3, Figs 2–3).

`run_word_generation(profile)` trains the deep state space model (DSSM, :mod:`paperlib.models.dssm`)
in the flow configurations of the profile and the teacher-forced GRU baseline on a word list, then
evaluates every run as the paper does and writes ``results/word_generation.json`` (+ provenance):

* Table 1 (standard split, each token goes to test with probability 0.1): ``H[P_train, P_hat]``,
  ``H[P_test, P_hat]`` (§4.1; the DSSM's ``P_hat`` is the Monte Carlo estimate of eq. 12),
  ``w in V unique``, ``w in V`` (of ``generated_words`` sampled words) and ``I_bar`` (eq. 13);
* Table 2 (alternative split, 10% of the word *types* only in test): cross-entropies and the
  perplexities of generated words under Witten–Bell character n-gram models (n = 2..5) estimated
  on train+test or on test only; the DSSM emits the argmax of ``P(w_t | h_t)`` along sampled
  trajectories, the GRU samples (§5.3);
* Table 3: test cross-entropy and ``I_bar`` of every ``F_g x F_q`` combination (single-sample ELBO);
* Fig. 2: ``I(t)`` per position over sampled prefixes; Fig. 3: ``I_bar`` and the mean symbolic
  entropy ``H[w_t | h_t]`` over training, beside the baseline's per-symbol entropy.

Oracle rows are computed for our data: ORACLE-TRAIN is the training distribution itself (its
cross-entropy with itself is its entropy; sampling it gives the data-space metrics), ORACLE-TEST
(Table 2) the test distribution.

What differs from the paper (also stated in the results JSON and the notebook):

* Data: the `wordfreq` English list filtered by the paper's rules stands in for BooksCorpus
  (:func:`paperlib.data.english_word_list`); the cpu profile keeps only the most frequent words.
* Training: the paper states Adam (§2.6) but no learning rate, batch size or number of steps; ours
  are in params.yaml. Training words are drawn i.i.d. from the training unigram distribution.
* A run whose loss becomes non-finite stops and is reported like the paper's bars (unstable).
* The DSSM's inference GRU and embedding have the state size ``d`` unless a spec says otherwise;
  with ``K > 1`` the proposal ``q`` also sees ``h_g`` (Algorithm 1) but not ``h_{t-1}`` (§2.5).
* Fig. 3's dashed line ("overall word entropy of the trained baseline") is read as the GRU's mean
  entropy of ``P(w_t | w_<t)`` per symbol along its own samples, up to the end-of-word symbol.

Modules: :mod:`.settings`, :mod:`.data` (splits, oracles, n-grams), :mod:`.training` (one run), :mod:`.presentation`
(tables, claims); the paper's numbers are in :mod:`paperlib.reference.word_generation`. This module plans and runs
the experiment and re-exports their public names.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.data.wordlist import WordList, english_word_list
from paperlib.device import cache_key, load_checkpoint
from paperlib.experiments.common.stage import begin_stage, results_path
from paperlib.models.dssm import CharVocab
from paperlib.experiments.common.provenance import provenance
from paperlib.atomic_files import write_json_atomic
from paperlib.reference.word_generation import (
    PAPER_BEST_SINGLE, PAPER_NGRAM_ORDERS, PAPER_TABLE1, PAPER_TABLE2, PAPER_TABLE3, PAPER_TABLE3_FLOWS,
    PAPER_TEST_ENTROPY,
)
from paperlib.experiments.word_generation.settings import (
    MODEL_KINDS, NAME, SPLITS, WordGenerationParams, complete_spec, spec_key,
)
from paperlib.experiments.word_generation.data import (
    SplitData, _flatten_ngram, distribution_log_probs, entropy, expected_unique_fraction, fit_ngram_models, make_splits,
    ngram_row, oracle_rows, sample_words, word_list_sha256,
)
from paperlib.experiments.word_generation.training import (
    GENERATOR_KEYS, TrainResult, build_model, evaluate_model, gru_symbol_entropy, model_loss,
    noise_information_trajectories, stackable, train_model, train_runs, train_stacked,
)
from paperlib.experiments.word_generation.presentation import (
    format_value, table1_frame, table2_frame, table3_frames,
)


@dataclass(frozen=True)
class RunSpec:
    """One training run: a model spec on a split with a seed; `labels` are the table cells it fills."""

    split: str
    spec: dict
    seed: int
    labels: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.split}-{spec_key(self.spec)}"

    def folder(self) -> str:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", self.labels[0]).strip("-").lower()
        return f"{self.key}-{slug}-seed{self.seed}"


# (stack_size: how runs are batched, not what they compute; a stacked run is its separate run up to float rounding,
# so each run's checkpoint continues either way)
_NOT_IN_FINGERPRINT = ("table1", "table2", "table3_generative", "table3_inference", "table3_base", "figure_model",
                       "baseline_reference", "seeds", "seeds_weighted", "threads", "checkpoint_every", "stack_size")


def settings_fingerprint(settings: WordGenerationParams, data: WordList) -> str:
    """Hash of everything a finished run's numbers depend on besides its spec and seed (data, training
    and evaluation settings), so runs of another profile or word list are never mistaken for ours."""
    relevant = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _NOT_IN_FINGERPRINT}
    payload = json.dumps({**relevant, **cache_key(), "code": code_hash(__name__)}, sort_keys=True) + word_list_sha256(data)
    return hashlib.sha1(payload.encode()).hexdigest()[:10]


def plan_runs(settings: WordGenerationParams) -> list[RunSpec]:
    """Every (split, model, seed) the tables need, each trained once even if several cells use it."""
    wanted: dict[tuple[str, str], tuple[dict, list[str]]] = {}

    def add(split: str, label: str, spec: dict) -> None:
        key = (split, spec_key(spec))
        wanted.setdefault(key, (spec, []))[1].append(label)

    for row, spec in settings.table1.items():
        add("standard", f"table1:{row}", spec)
    for (g, q), spec in settings.table3_specs().items():
        add("standard", f"table3:{g}/{q}", spec)
    for row, spec in settings.table2.items():
        add("types", f"table2:{row}", spec)
    return [RunSpec(split, spec, seed, tuple(labels))
            for (split, _), (spec, labels) in wanted.items() for seed in settings.seeds_for(spec)]


def training_jobs(plan: Sequence[RunSpec], settings: WordGenerationParams) -> list[list[RunSpec]]:
    """``plan`` as training jobs, in its order: one run each, or with ``stack_size`` the seeds of one split and spec
    in stacks of at most that many (trained together where the model stacks, :func:`~.training.stackable`)."""
    if settings.stack_size is None:
        return [[run] for run in plan]
    groups: dict[str, list[RunSpec]] = {}
    for run in plan:
        groups.setdefault(run.key, []).append(run)
    size = settings.stack_size
    return [runs[i:i + size] for runs in groups.values() for i in range(0, len(runs), size)]


def aggregate(records: Sequence[dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """Mean and standard deviation (ddof = 1) over the seeds that trained stably.

    A metric a run lacks (``I_bar`` of the GRU) is None; one stored as None (infinite, see
    :func:`finite_or_none`) makes the mean None and is listed under ``infinite``.
    """
    stable = [r for r in records if not r["diverged"]]
    out: dict[str, Any] = {"seeds": len(records), "unstable": len(records) - len(stable), "infinite": []}
    for key in keys:
        values = [r["metrics"].get(key, _MISSING) for r in stable]
        ok = bool(values) and all(v is not None and v is not _MISSING for v in values)
        if values and not ok and _MISSING not in values:
            out["infinite"].append(key)
        out[key] = float(np.mean(values)) if ok else None
        out[key + "_std"] = float(np.std(values, ddof=1)) if ok and len(values) > 1 else None
    return out


_MISSING = object()


TABLE1_KEYS = ("H_train", "H_test", "in_vocab_unique", "in_vocab", "I_bar")


def _ngram_keys(orders: Sequence[int]) -> list[str]:
    return [f"ppl_{s}_{n}" for s in ("full", "test") for n in orders]


def build_tables(settings: WordGenerationParams, records: Sequence[dict[str, Any]],
                 oracles: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Tables 1-3 in the paper's shape (ours with ± over seeds, the paper's beside)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_key.setdefault(r["key"], []).append({**r, "metrics": _flatten_ngram(r["metrics"] or {})})

    def runs(split: str, spec: dict) -> list[dict[str, Any]]:
        return by_key.get(f"{split}-{spec_key(spec)}", [])

    table1 = []
    for row, spec in settings.table1.items():
        table1.append({"model": row, **aggregate(runs("standard", spec), TABLE1_KEYS),
                       "paper": PAPER_TABLE1.get(row)})
    oracle = oracles["standard"]["ORACLE-TRAIN"]
    table1.append({"model": "ORACLE-TRAIN", "seeds": 1, "unstable": 0, "infinite": oracle["infinite"],
                   **{k: oracle.get(k) for k in TABLE1_KEYS}, **{k + "_std": None for k in TABLE1_KEYS},
                   "in_vocab_unique_expected": oracle["in_vocab_unique_expected"],
                   "paper": PAPER_TABLE1["ORACLE-TRAIN"]})

    keys2 = ("H_train", "H_test", *_ngram_keys(settings.ngram_orders))
    table2 = [{"model": row, **aggregate(runs("types", spec), keys2), "paper": PAPER_TABLE2.get(row)}
              for row, spec in settings.table2.items()]
    for name in ("ORACLE-TRAIN", "ORACLE-TEST"):
        flat = _flatten_ngram(oracles["types"][name])
        table2.append({"model": name, "seeds": 1, "unstable": 0, "infinite": flat["infinite"],
                       **{k: flat.get(k) for k in keys2},
                       **{k + "_std": None for k in keys2}, "paper": PAPER_TABLE2[name]})

    cells: dict[str, dict[str, Any]] = {}
    for (g, q), spec in settings.table3_specs().items():
        cells.setdefault(g, {})[q] = aggregate(runs("standard", spec), ("H_test", "I_bar"))
    table3 = {"generative": list(settings.table3_generative), "inference": list(settings.table3_inference),
              "cells": cells, "paper": PAPER_TABLE3, "paper_flows": list(PAPER_TABLE3_FLOWS)}
    return {"table1": table1, "table2": table2, "table3": table3}


def _record_for(run: RunSpec, result: TrainResult, metrics: dict[str, Any] | None,
                seconds: tuple[float, float]) -> dict[str, Any]:
    return {"key": run.key, "split": run.split, "labels": list(run.labels), "seed": run.seed,
            "spec": complete_spec(run.spec), "steps": result.steps,
            "diverged": result.diverged, "history": result.history, "metrics": metrics,
            "seconds": {"train": round(seconds[0], 1), "evaluate": round(seconds[1], 1)}}


def _finite_metrics(metrics: dict[str, Any]) -> bool:
    return all(metrics.get(k) is not None and math.isfinite(metrics[k]) for k in ("H_train", "H_test"))


def run_experiment(settings: WordGenerationParams, data: WordList, runs_dir: str | os.PathLike,
                   progress: bool = False, device: torch.device | str | None = None) -> dict[str, Any]:
    """Train (resumably) and evaluate every run of `settings` on `data`; returns the results dict.

    Each run lives in ``runs_dir/<settings fingerprint>/<split>-<spec hash>-<label>-seed<s>/`` with
    ``checkpoint.pt`` and, once evaluated, ``done.json``; finished runs are read back instead of
    retrained, and interrupted ones resume from their checkpoint.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    runs_dir = Path(runs_dir) / settings_fingerprint(settings, data)
    say = (lambda msg: print(msg, flush=True)) if progress else None
    splits = make_splits(data, settings.test_fraction, settings.split_seed)
    ngram = fit_ngram_models(splits["types"], settings.ngram_orders)
    seed0 = min(settings.seeds)
    oracles = {"standard": oracle_rows(splits["standard"], settings, seed0),
               "types": oracle_rows(splits["types"], settings, seed0, ngram)}

    plan = plan_runs(settings)
    done: dict[str, dict[str, Any]] = {}
    for job in training_jobs(plan, settings):
        pending = [run for run in job if not (runs_dir / run.folder() / "done.json").is_file()]
        for run in job:
            if run not in pending:
                done[run.folder()] = json.loads((runs_dir / run.folder() / "done.json").read_text())
        if not pending:
            continue
        split, spec = splits[pending[0].split], complete_spec(pending[0].spec)
        models = []
        for run in pending:
            torch.manual_seed(run.seed)  # parameter initialisation
            models.append(build_model(spec, split.vocab, settings.max_len).to(device))
        if say:
            together = " as one stack" if len(pending) > 1 and stackable(models[0]) else ""
            say(f"[{', '.join(str(plan.index(r) + 1) for r in pending)}/{len(plan)}] {pending[0].split} split, "
                f"{', '.join(pending[0].labels)}, seed{'s' if len(pending) > 1 else ''} "
                f"{', '.join(str(r.seed) for r in pending)}{together}")
        started = time.time()
        results = train_runs(models, split, settings, spec.get("samples", 1), [run.seed for run in pending],
                             [runs_dir / run.folder() / "checkpoint.pt" for run in pending], say)
        trained = [(time.time() - started) / len(pending)] * len(pending)  # each run its share of a job's time
        for run, model, result, seconds in zip(pending, models, results, trained):
            started = time.time()
            metrics = None
            if not result.diverged:
                metrics = evaluate_model(model, split, settings, run.seed, ngram if run.split == "types" else None)
            record = _record_for(run, result, metrics, (seconds, time.time() - started))
            if metrics is not None and not _finite_metrics(metrics):
                record["diverged"] = True  # e.g. NaN parameters that never produced a NaN loss
            write_json_atomic(runs_dir / run.folder() / "done.json", record)
            done[run.folder()] = record
    records = [done[run.folder()] for run in plan]

    tables = build_tables(settings, records, oracles)
    figure_runs = [r for r in records if r["split"] == "standard" and f"table1:{settings.figure_model}" in r["labels"]]
    fig2 = figure2_data(settings, splits["standard"].vocab, figure_runs, runs_dir, plan, device)
    baseline = [r for r in records if r["split"] == "standard"
                and f"table1:{settings.baseline_reference}" in r["labels"] and not r["diverged"]]
    fig3 = {"model": settings.figure_model,
            "histories": [r["history"] for r in figure_runs],
            "baseline": settings.baseline_reference,
            "baseline_symbol_entropy": (float(np.mean([r["metrics"]["symbol_entropy"] for r in baseline]))
                                        if baseline else None)}
    data_summary = {
        name: {"train_types": len(s.train), "test_types": len(s.test),
               "train_tokens": int(s.train.counts.sum()), "test_tokens": int(s.test.counts.sum()),
               "train_entropy": entropy(s.train.counts), "test_entropy": entropy(s.test.counts),
               "test_types_unseen_in_train": len(set(s.test.words) - set(s.train.words))}
        for name, s in splits.items()
    }
    return {
        "experiment": NAME,
        "data": {"source": "wordfreq English list (stand-in for BooksCorpus), letters only, "
                           f"{settings.min_len}-{settings.max_len} letters, >= {settings.min_count} of "
                           f"{settings.total_tokens:.0e} virtual tokens",
                 "types": len(data), "top_n": settings.top_n, "splits": data_summary,
                 "paper": {"types": 143_000, "tokens": "almost 1B (BooksCorpus)", "test_entropy": PAPER_TEST_ENTROPY}},
        "scale": {k: getattr(settings, k) for k in ("steps", "batch_size", "lr", "seeds", "seeds_weighted",
                                                       "eval_samples", "generated_words", "ngram_words",
                                                       "mi_prefixes", "mi_noise", "clip_norm", "ngram_orders",
                                                       "top_n")},
        **tables,
        "paper_best_single": PAPER_BEST_SINGLE,
        "oracles": oracles,
        "figure2": fig2,
        "figure3": fig3,
        "runs": [{k: v for k, v in r.items() if k != "seconds"} for r in records],  # timings: provenance
    }


def figure2_data(settings: WordGenerationParams, vocab: CharVocab, figure_runs: list[dict[str, Any]],
                 runs_dir: Path, plan: list[RunSpec], device: torch.device) -> dict[str, Any]:
    """``I(t)`` of single prior prefixes for every stable run of the figure model (Fig. 2 box plot)."""
    per_run = []
    for record in figure_runs:
        if record["diverged"]:
            continue
        run = next(p for p in plan if p.key == record["key"] and p.seed == record["seed"])
        model = build_model(record["spec"], vocab, settings.max_len).to(device)
        state = load_checkpoint(runs_dir / run.folder() / "checkpoint.pt", device, cpu_keys=GENERATOR_KEYS)
        model.load_state_dict(state["model"])
        model.eval()
        gen = torch.Generator(device=device).manual_seed(record["seed"] + 19)
        values = noise_information_trajectories(model, settings.max_len + 1, settings.fig2_trajectories,
                                                settings.mi_noise, gen)
        per_run.append({"seed": record["seed"], "I_t": [[round(float(v), 5) for v in row] for row in values]})
    return {"model": settings.figure_model, "runs": per_run}


def run_word_generation(profile: str | None = None, progress: bool = True, runs_dir: str | os.PathLike | None = None,
                        out: str | os.PathLike | None = None) -> Path:
    """The DVC stage: settings from params.yaml, results to ``results/word_generation.json``."""
    stage = begin_stage(NAME, profile)
    started, root, profile, settings, device = stage.started, stage.root, stage.profile, stage.settings, stage.device
    data = english_word_list(settings.min_len, settings.max_len, settings.min_count, settings.total_tokens,
                             settings.top_n)
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / NAME
    results = run_experiment(settings, data, runs_dir, progress, device)
    results["profile"] = profile
    out = Path(out) if out is not None else results_path(root, NAME, profile)
    write_json_atomic(out, results)
    timing = {Path(p).parent.name: json.loads(p.read_text()).get("seconds")
              for p in sorted((runs_dir / settings_fingerprint(settings, data)).glob("*/done.json"))}
    try:
        from importlib.metadata import version

        wordfreq_version = version("wordfreq")
    except Exception:  # noqa: BLE001 - provenance only
        wordfreq_version = None
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, dataclasses.asdict(settings),
                                    {"wordfreq_en_filtered": word_list_sha256(data)}, started,
                                    code=code_hash(__name__)),
                       "wordfreq": wordfreq_version, "run_seconds": timing})
    return out


__all__ = [
    "GENERATOR_KEYS", "MODEL_KINDS", "NAME", "PAPER_BEST_SINGLE", "PAPER_NGRAM_ORDERS", "PAPER_TABLE1", "PAPER_TABLE2",
    "PAPER_TABLE3", "PAPER_TABLE3_FLOWS", "PAPER_TEST_ENTROPY", "SPLITS", "TABLE1_KEYS", "RunSpec", "SplitData",
    "TrainResult", "WordGenerationParams", "aggregate", "build_model", "build_tables", "complete_spec",
    "distribution_log_probs", "entropy", "evaluate_model", "expected_unique_fraction", "figure2_data",
    "fit_ngram_models", "format_value", "gru_symbol_entropy", "make_splits", "model_loss", "ngram_row",
    "noise_information_trajectories", "oracle_rows", "plan_runs", "run_experiment",
    "run_word_generation", "sample_words", "settings_fingerprint", "spec_key", "stackable", "table1_frame",
    "table2_frame", "table3_frames", "train_model", "train_runs", "train_stacked", "training_jobs",
    "word_list_sha256",
]
