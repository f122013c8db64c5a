"""MICMCO on Penn Treebank: sentence VAEs, rate vs data-fit frontiers and Table 5.1 (Melis thesis §5.7.2, §5.B).

Sentence-level language modelling with one set of latents per sentence (:class:`~paperlib.models.sentence_vae.
SentenceVAE`: BiLSTM encoder, LSTM decoder with the latents added to its input, 40 Gaussian latents trained with
DReG or 8 x 10 categorical latents trained with VIMCO). Sentences are truncated to 35 tokens in the training and
validation sets (§5.7.2). Every curve of a thesis figure (:data:`FIGURES`, :data:`CURVES`) is an Optuna
multi-objective study over the Table 5.2 ranges of its hyperparameters (:data:`PTB_RANGES`): learning rate, lambda,
alpha (Renyi / power), and for validation curves three decoder dropout rates or an L2 coefficient. A trial trains
one model and reports the per-token NLL (-IWAE with 100 samples) and the per-token KL (the estimate
U^K - ln p^K of §5.7.1 with the same samples) on the training set ("training fit" curves, no regularisation) or on
the validation set; the frontier of a curve is its non-dominated trials (minimise NLL, maximise KL).

The machinery comes from :mod:`paperlib.experiments.micmco.synthetic.micmco_synthetic` (imported, not copied): the estimator configurations
(:class:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.Configuration`), the Table 5.2 ranges, :func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.step_surrogates`, the
resumable study loop (:func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.open_study`, :func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.tune`, Halton start designs),
and the frontier tools (:func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.pareto_front`, :func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.hypervolume`,
:func:`~paperlib.experiments.micmco.synthetic.micmco_synthetic.nll_at_mi`). What is new here is the data, the curve definitions with their regularisation
regime and compute variants, training on sentence batches, per-token evaluation, Table 5.1 and the claims.

**Table 5.1**: for every column (DReG / VIMCO, 1 or 16 samples, KL or Renyi) and hidden size, the trial with the
lowest validation NLL among the shared-mask dropout curves of that estimator (base length and twice as long) is
evaluated on the test set with 500 samples; the thesis' numbers are :data:`THESIS_TABLE_5_1`.

**Resuming**: each study is a SQLite file ``runs/micmco_ptb/<curve>-<profile>-<settings hash>-<code hash>.sqlite3``;
the model of its best-validation trial is kept beside it (``.best.pt``) for Table 5.1, and test evaluations are
cached as JSON. An interrupted run continues every study where it stopped (trials left running count as failed).

Departures and readings (the thesis does not give them, or we chose differently):

- Single-sample objectives: with one sample in the divergence term the KL and Renyi estimates coincide
  (both are ln q(z|x) - ln p(z)), which is why the thesis merges "1 K / R" in Table 5.1; we run one curve for them
  (and for 16/1). With one latent sample, shared and naive masks coincide, so the single-sample curves of
  Fig. 5.10 are those of Fig. 5.12. "VIMCO 1" is REINFORCE 1 (§5.7.1).
- Loss scale: the training loss is the negative objective summed over a batch's sentences divided by its number of
  tokens (per-token, like the reported NLL); the L2 penalty is coefficient x ||theta||^2 over all weights (Adam's
  ``weight_decay`` = 2 x coefficient). The thesis does not say which weights L2 covers or how the loss is scaled.
- Not stated in the thesis, chosen here: batch size, number of trials, the batch-size variant of Figs. 5.16/5.19
  (x2), whether Figs. 5.16-5.21 and 5.28-5.29 show training or validation NLL (robustness: validation with shared
  masks, since Table 5.1's 256-unit rows need validation runs; power objective: training fit, as its synthetic
  counterparts), the optimisation length of the paper profile (40k steps, the shorter length of Figs. 5.17-5.21),
  and that the test set is not truncated (§5.7.2 truncates "the training and validation sets").
- Tuning: a scrambled Halton start design followed by Optuna's GP sampler (the thesis uses batched GP bandits).
  KL estimates above ``kl_cap`` nats per token are capped for the tuner, the frontiers and hypervolumes.
- Hypervolumes: per figure (or per claim), the reference point is (lowest NLL of any trial of the compared curves
  + ``hv_margin``, KL = 0), the KL axis is capped at ``kl_cap``; normalised by ``hv_margin * kl_cap``.
- The ``cpu`` profile shrinks the problem (vocabulary, model, steps, subsets, trials; see ``params.yaml``), so its
  perplexities are not comparable to the thesis'; only the relative claims are tested.

Modules: :mod:`.design` (Table 5.1 layout, ranges, curves, settings), :mod:`.data` (sentences), :mod:`.trials`
(one trial), :mod:`.studies` (one study per curve), :mod:`.stacked_trials` (many trials as one stacked model),
:mod:`.analysis` (frontiers, hypervolumes, Table 5.1), :mod:`.verdicts` (the
stage's own verdicts on the thesis' claims); this module runs the experiment and re-exports their public names. The
claims the results index reads are :mod:`.claims`, the ladder stage is :mod:`.ladder`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from paperlib.experiments.common.code_hash import code_hash
from paperlib.experiments.common.runs import map_jobs, stop_time
from paperlib.experiments.common.stage import results_path, setup_stage
from paperlib.experiments.micmco.synthetic.micmco_synthetic import json_safe
from paperlib.experiments.micmco.ptb.design import (
    CURVES, Curve, ESTIMATORS, EXPERIMENT, FIGURES, MicmcoPtbParams, PTB_RANGES, THESIS_TABLE_5_1, curve_of,
)
from paperlib.experiments.micmco.ptb.data import SentenceData, load_data, prepare_sentences
from paperlib.experiments.micmco.ptb.studies import _study_job, run_curve_study
from paperlib.experiments.micmco.ptb.trials import DIVERGED_NLL, build_model, evaluate, per_token, run_trial, train
from paperlib.experiments.micmco.ptb.analysis import (
    _best_trial, compare_hypervolumes, extra_minutes, frontier, hidden_sizes, summarise_figures, table_5_1,
)
from paperlib.experiments.micmco.ptb.verdicts import LOW_KL, PPL_TOLERANCE, claim_verdicts


def run_experiment(settings: MicmcoPtbParams, runs_dir: str | os.PathLike, profile: str, progress: bool = False,
                   data: SentenceData | None = None, data_root: str | os.PathLike | None = None,
                   deadline: float | None = None) -> tuple[dict[str, Any], dict[str, float]]:
    """Run (or resume) every study of ``settings`` and assemble the results; returns (results, seconds per study).

    Give either ``data`` (used in this process; requires ``workers == 1``) or ``data_root`` (each worker loads the
    corpus). With ``workers > 1`` studies run in spawned processes, most expensive first. With stacks, a
    ``deadline`` stops the studies there (:func:`~paperlib.experiments.micmco.ptb.studies.run_curve_study`), and Table
    5.1 before a cell it would pass (:func:`~paperlib.experiments.micmco.ptb.analysis.table_5_1`).
    """
    if data is None and data_root is None:
        raise ValueError("give the sentences (data=...) or the corpus folder (data_root=...)")
    if data is not None and settings.workers > 1:
        raise ValueError("in-memory data needs workers == 1; give data_root for parallel workers")
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(settings.selected, key=lambda n: CURVES[n].cost, reverse=True)
    root_arg = None if data_root is None else str(data_root)
    pace = {"last": 0.0}  # the last batch's seconds, for the studies run in this process one after another
    jobs = [(n, settings, str(runs_dir), profile, progress, root_arg, data, deadline, pace) for n in names]
    finished = map_jobs(_study_job, jobs, settings.workers)
    curves: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, records, elapsed in sorted(finished, key=lambda job: settings.selected.index(job[0])):
        curve = CURVES[name]
        seconds[name] = elapsed
        best = _best_trial(records)
        curves[name] = {
            "label": curve.label, "regime": curve.regime, "split": curve.split,
            "estimator": asdict(curve.estimator), "steps_factor": curve.steps_factor,
            "batch_factor": curve.batch_factor, "hidden_size": settings.hidden_size * curve.hidden_factor,
            "search_space": {k: asdict(r) for k, r in curve.space.items()},
            "trials": records, "frontier": frontier(records),
            "best": None if best is None else {"trial": best["number"], "nll": best["nll"], "kl": best["kl"],
                                               "perplexity": math.exp(best["nll"])},
        }
    if data is None:
        data = load_data(settings, data_root)
    results: dict[str, Any] = {
        "experiment": EXPERIMENT, "profile": profile, "settings": asdict(settings), "data": data.summary(),
        "curves": curves, "thesis_table_5_1": {str(k): v for k, v in THESIS_TABLE_5_1.items()},
    }
    results["figures"] = summarise_figures(curves, settings)
    started = time.time()
    if settings.table_5_1:
        threads = torch.get_num_threads()
        torch.set_num_threads(settings.threads * settings.workers)
        try:
            results["table_5_1"] = table_5_1(curves, settings, data, runs_dir, profile, progress, deadline)
        finally:
            torch.set_num_threads(threads)
    else:
        results["table_5_1"] = []
    seconds["table_5_1"] = round(time.time() - started, 1)
    results["claims"] = claim_verdicts(results)
    return results, seconds


def run_micmco_ptb(profile: str | None = None, progress: bool = True, out: str | os.PathLike | None = None,
                   runs_dir: str | os.PathLike | None = None, params: dict[str, Any] | None = None) -> Path:
    """Run (or resume) the profile's studies and Table 5.1; write ``results/micmco_ptb.json`` plus provenance.

    With stacks, the studies stop at ``$PAPERLIB_TIME_LIMIT`` seconds (:func:`~paperlib.experiments.common.runs.
    stop_time`), raising :class:`~paperlib.experiments.common.runs.TimeLimitReached` with their work checkpointed.

    ``params``: an already loaded ``params.yaml`` mapping (default: the repository's). Studies live in
    ``runs/micmco_ptb/`` (scratch; resumable).
    """
    from paperlib.experiments.common.config import (
        active_profile, experiment_params, load_params, repo_root, section_params,
    )
    from paperlib.data import pinned_checksums
    from paperlib.experiments.common.provenance import provenance
    from paperlib.atomic_files import write_json_atomic

    started = time.time()
    root = repo_root()
    params = params if params is not None else load_params()
    profile = active_profile(profile, params)
    settings: MicmcoPtbParams = experiment_params(EXPERIMENT, profile, params)
    setup_stage(profile, params)
    data_root = root / section_params("data", params).root
    runs_dir = Path(runs_dir) if runs_dir is not None else root / "runs" / EXPERIMENT
    limit = stop_time() if settings.stack_size is not None else None  # $PAPERLIB_TIME_LIMIT, honoured by stacks
    results, seconds = run_experiment(settings, runs_dir, profile, progress, data_root=data_root, deadline=limit)
    out = Path(out) if out is not None else results_path(root, EXPERIMENT, profile)
    write_json_atomic(out, json_safe(results))
    write_json_atomic(out.with_suffix(".provenance.json"),
                      {**provenance(root, profile, asdict(settings), pinned_checksums(settings.corpus), started,
                                    code=code_hash(__name__)),
                       "study_seconds": seconds})
    return out


__all__ = [
    "CURVES", "DIVERGED_NLL", "ESTIMATORS", "EXPERIMENT", "FIGURES", "LOW_KL", "PPL_TOLERANCE", "PTB_RANGES",
    "THESIS_TABLE_5_1", "Curve", "MicmcoPtbParams", "SentenceData", "build_model", "claim_verdicts",
    "compare_hypervolumes", "curve_of", "evaluate", "extra_minutes", "frontier", "hidden_sizes", "load_data",
    "per_token", "prepare_sentences", "run_curve_study", "run_experiment", "run_micmco_ptb", "run_trial",
    "summarise_figures", "table_5_1", "train",
]
